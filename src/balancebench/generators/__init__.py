"""Dataset generators, registered by name: deterministic from their seed, Parquet tables
plus ``manifest.json``; each has Great Expectations suites in ``expectations/<name>/``.

>>> generate("topic_stream", datasets_dir(), {"n_tuples": 10_000})  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from balancebench.generators.common import Generator, Manifest, load_manifest, read_table
from balancebench.generators.onoff import OnOffSources
from balancebench.generators.packets import PacketTraffic
from balancebench.generators.phone_stream import PhoneStream
from balancebench.generators.shared_params import SHARED_DATASET_PARAMS
from balancebench.generators.tasks import HeterogeneousTasks
from balancebench.generators.topic_stream import TopicStream
from balancebench.generators.tpch import TpchGenerator
from balancebench.generators.user_file import UserFile
from balancebench.generators.zipf_stream import ZipfStream

#: name -> generator; add one by writing its module and listing it here.
GENERATORS: dict[str, Generator] = {
    g.name: g
    for g in (
        ZipfStream(),
        TopicStream(),
        PhoneStream(),
        TpchGenerator(),
        PacketTraffic(),
        OnOffSources(),
        HeterogeneousTasks(),
        UserFile(),
    )
}


def _dataset_params() -> dict[str, dict[str, Any]]:
    params = dict(SHARED_DATASET_PARAMS)
    for g in GENERATORS.values():
        for name, spec in g.own_params.items():
            if name in params:
                raise RuntimeError(f"dataset Param {name!r} defined twice (generator {g.name})")
            if not name.startswith(f"{g.name}_"):
                raise RuntimeError(f"generator {g.name}: own Param {name!r} needs its prefix")
            params[name] = spec
        missing = [p for p in g.params if p not in params and p not in g.own_params]
        if missing:
            raise RuntimeError(f"generator {g.name}: unknown Params {missing}")
    return params


#: Every dataset Param (JSON schema with default), shared and generator-specific.
DATASET_PARAMS: dict[str, dict[str, Any]] = _dataset_params()


def get_generator(name: str) -> Generator:
    if name not in GENERATORS:
        raise ValueError(
            f"dataset: unknown generator {name!r}; allowed values: {sorted(GENERATORS)}"
        )
    return GENERATORS[name]


def generator_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The subset of (experiment) ``params`` that generator ``name`` reads."""
    return {k: params[k] for k in get_generator(name).params if k in params}


def generate(
    name: str,
    out_root: str | Path,
    params: dict[str, Any],
    *,
    checked: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[Path, Manifest]:
    """Write (or reuse) dataset ``name``; ``params`` may hold only this generator's Params
    (a bad or unknown one raises ``ValueError`` naming it, before anything is written;
    ``checked``: they passed the door already and are trusted, ``common.run_generator``).
    A cached dataset is reused only when its files are the ones its manifest lists, every
    byte (``common.verify_dataset``); ``say`` tells the reuse or the rewrite in one line
    (default: on stderr)."""
    from balancebench.generators.common import run_generator, say_on_stderr

    return run_generator(
        get_generator(name),
        out_root,
        params,
        DATASET_PARAMS,
        checked=checked,
        say=say or say_on_stderr,
    )


def generate_zipf_stream(out_root: str | Path, **params: Any) -> tuple[Path, Manifest]:
    """``generate("zipf_stream", out_root, params)``."""
    return generate("zipf_stream", out_root, params)


__all__ = [
    "DATASET_PARAMS",
    "GENERATORS",
    "Generator",
    "Manifest",
    "generate",
    "generate_zipf_stream",
    "generator_params",
    "get_generator",
    "load_manifest",
    "read_table",
]
