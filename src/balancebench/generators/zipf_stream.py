"""A Zipf-keyed event stream (paper 000's skewed key distribution).

Columns: ``tuple_id`` (int64, 0..n-1, arrival order), ``event_time_s`` (float64,
seconds since the stream started), ``key`` (int64 in ``[0, n_keys)``), ``payload``
(int64, an opaque value carried along, e.g. a user id).

- Key popularity follows a finite Zipf law: rank ``r`` (1-based) has probability
  ``r^-s / H(n_keys, s)``; ranks are mapped to key ids through a seeded random
  permutation, so hot keys are not simply the small ids (and their home nodes are random).
- Arrivals are a Poisson process at ``input_rate_tuples_per_s``: exponential gaps, so
  ``event_time_s`` is increasing and its mean spacing is ``1 / rate``.

Same params (seed included) -> same bytes -> same digest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from balancebench.generators.common import (
    MANIFEST,
    ColumnDigest,
    Manifest,
    load_manifest,
    params_id,
    write_atomically,
)

GENERATOR = "zipf_stream"
SCHEMA = pa.schema(
    [
        ("tuple_id", pa.int64()),
        ("event_time_s", pa.float64()),
        ("key", pa.int64()),
        ("payload", pa.int64()),
    ]
)
CHUNK_ROWS = 1 << 21


def zipf_probabilities(n_keys: int, zipf_s: float) -> np.ndarray:
    """``p(rank)`` for ranks 1..n_keys (float64, sums to 1)."""
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -float(zipf_s)
    return weights / weights.sum()


def check_number(
    name: str, value: Any, minimum: float, *, integer: bool, exclusive: bool = False
) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is a number (an int if ``integer``)
    at least (or, if ``exclusive``, above) ``minimum``."""
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds):
        expected = "an integer" if integer else "a number"
        raise ValueError(f"{name}: expected {expected}, got {value!r}")
    if value < minimum or (exclusive and value == minimum):
        raise ValueError(f"{name}: must be {'>' if exclusive else '>='} {minimum}, got {value!r}")


def generate_zipf_stream(
    out_root: str | Path,
    *,
    n_tuples: int,
    n_keys: int,
    zipf_s: float,
    input_rate_tuples_per_s: float,
    seed: int,
) -> tuple[Path, Manifest]:
    """Write the stream under ``out_root/zipf_stream/<params id>``; reuse it if present."""
    check_number("n_tuples", n_tuples, 1, integer=True)
    check_number("n_keys", n_keys, 1, integer=True)
    check_number("zipf_s", zipf_s, 0, integer=False)
    check_number(
        "input_rate_tuples_per_s", input_rate_tuples_per_s, 0, integer=False, exclusive=True
    )
    check_number("seed", seed, 0, integer=True)
    params = {
        "n_tuples": int(n_tuples),
        "n_keys": int(n_keys),
        "zipf_s": float(zipf_s),
        "input_rate_tuples_per_s": float(input_rate_tuples_per_s),
        "seed": int(seed),
    }
    final_dir = Path(out_root) / GENERATOR / params_id(GENERATOR, params)
    if (final_dir / MANIFEST).exists():
        manifest = load_manifest(final_dir)
        if all((final_dir / f).exists() for f in manifest.files):
            return final_dir, manifest

    result: dict[str, Manifest] = {}

    def write(tmp: Path) -> None:
        rng = np.random.default_rng(params["seed"])
        cdf = np.cumsum(zipf_probabilities(n_keys, zipf_s))
        cdf[-1] = 1.0
        rank_to_key = rng.permutation(n_keys).astype(np.int64)
        digest = ColumnDigest()
        last_time = 0.0
        path = tmp / "part-00000.parquet"
        with pq.ParquetWriter(path, SCHEMA, compression="zstd") as writer:
            for start in range(0, n_tuples, CHUNK_ROWS):
                rows = min(CHUNK_ROWS, n_tuples - start)
                ranks = np.searchsorted(cdf, rng.random(rows), side="right")
                gaps = rng.exponential(1.0 / input_rate_tuples_per_s, rows)
                times = last_time + np.cumsum(gaps)
                last_time = float(times[-1])
                batch = pa.record_batch(
                    [
                        pa.array(np.arange(start, start + rows, dtype=np.int64)),
                        pa.array(times),
                        pa.array(rank_to_key[ranks]),
                        pa.array(rng.integers(0, 1 << 31, rows, dtype=np.int64)),
                    ],
                    schema=SCHEMA,
                )
                digest.update(batch)
                writer.write_batch(batch)
        manifest = Manifest(
            generator=GENERATOR,
            params=params,
            row_count=int(n_tuples),
            schema={f.name: str(f.type) for f in SCHEMA},
            digest=digest.hexdigest(),
            files=[path.name],
        )
        (tmp / MANIFEST).write_text(manifest.to_json())
        result["manifest"] = manifest

    write_atomically(final_dir, write)
    return final_dir, result["manifest"]
