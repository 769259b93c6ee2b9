"""Dataset generators: deterministic from their seed, Parquet plus ``manifest.json``."""

from balancebench.generators.common import Manifest, load_manifest
from balancebench.generators.zipf_stream import generate_zipf_stream

__all__ = ["Manifest", "generate_zipf_stream", "load_manifest"]
