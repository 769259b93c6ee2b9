"""Generation speed of every dataset generator, next to a pyarrow floor.

    uv run python benchmarks/generate.py                 # realistic sizes (a few minutes)
    uv run python benchmarks/generate.py --quick         # 10x smaller
    uv run python benchmarks/generate.py --only zipf_stream topic_stream

For each generator: rows written (all tables), wall time of ``generate`` into a fresh
folder (the manifest's ``generate_s``: drawing the data, digest, Parquet/zstd write),
rows/s, and the floor: writing the same number of rows of random int64 columns (as many
columns as the main table) to Parquet with pyarrow and the generators' own writer settings
(``common.parquet_writer``: zstd, no dictionary for numbers), in the same chunks,
including drawing the random numbers. The issue's target: the Zipf stream within 2x of its floor.
Validation time (GX on every frame) is printed too, as it is part of every DAG run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from balancebench.core.schema import positive_int
from balancebench.generators import generate
from balancebench.generators.common import CHUNK_ROWS, parquet_writer

#: Realistic sizes (the issue names 10M Zipf events and TPC-H SF 1): (label, generator,
#: params); a generator may appear more than once.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("zipf 10k keys", "zipf_stream", {"n_tuples": 10_000_000, "zipf_s": 1.0}),
    ("zipf 1M keys", "zipf_stream", {"n_tuples": 10_000_000, "n_keys": 1_000_000, "zipf_s": 1.0}),
    ("topic_stream", "topic_stream", {"n_tuples": 10_000_000, "n_keys": 100_000, "zipf_s": 1.0}),
    ("phone_stream", "phone_stream", {"n_tuples": 10_000_000}),
    ("tpch SF 1", "tpch", {"tpch_scale_factor": 1.0}),
    ("packets", "packets", {"packets_total_mb": 5_000_000}),
    ("onoff", "onoff", {"onoff_sources": 100, "onoff_duration_s": 3600.0}),
    ("tasks", "tasks", {"tasks_total_words": 10_000_000}),
    ("user_file csv", "user_file", {}),  # needs a file: made below
]


def floor_s(rows: int, columns: int, folder: Path) -> float:
    """Seconds to draw and write ``rows`` x ``columns`` random int64 with pyarrow (zstd)."""
    rng = np.random.default_rng(0)
    schema = pa.schema([(f"c{i}", pa.int64()) for i in range(columns)])
    started = time.perf_counter()
    with parquet_writer(folder / "floor.parquet", schema) as writer:
        for start in range(0, rows, CHUNK_ROWS):
            n = min(CHUNK_ROWS, rows - start)
            cols = [pa.array(rng.integers(0, 1 << 62, n, dtype=np.int64)) for _ in range(columns)]
            writer.write_batch(pa.record_batch(cols, schema=schema))
    return time.perf_counter() - started


def user_file(folder: Path, rows: int) -> dict[str, Any]:
    """A CSV of ``rows`` (time, word) lines for the user_file generator."""
    rng = np.random.default_rng(1)
    path = folder / "user.csv"
    words = np.array([f"w{i}" for i in range(10_000)])
    table = pa.table(
        {
            "ts": np.sort(rng.random(rows) * 1000.0),
            "word": words[rng.zipf(1.5, rows) % len(words)],
        }
    )
    import pyarrow.csv as pacsv

    pacsv.write_csv(table, path)
    return {
        "user_file_path": str(path),
        "user_file_key_column": "word",
        "user_file_time_column": "ts",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes / 10")
    parser.add_argument(
        "--only", nargs="*", default=None, choices=[c[1] for c in CASES], help="generator names"
    )
    parser.add_argument(
        "--repeats", type=positive_int, default=3, help="median over this many runs"
    )
    parser.add_argument("--no-validate", action="store_true", help="skip the GX timing")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or c[1] in args.only]
    print(
        f"{'case':>14} {'rows':>11} {'gen_s':>8} {'rows/s':>11} {'floor_s':>8} "
        f"{'x floor':>8} {'validate_s':>10}   (medians of {args.repeats} runs)"
    )
    for label, name, size in cases:
        work = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
        try:
            params = dict(size)
            if args.quick:
                for key in ("n_tuples", "tasks_total_words", "packets_total_mb"):
                    if key in params:
                        params[key] //= 10
                if "tpch_scale_factor" in params:
                    params["tpch_scale_factor"] = 0.1
                if "onoff_duration_s" in params:
                    params["onoff_duration_s"] /= 10
            if name == "user_file":
                params.update(user_file(work, 1_000_000 if args.quick else 10_000_000))
            gen_times, floors = [], []
            for repeat in range(args.repeats):
                out = work / f"out{repeat}"
                folder, manifest = generate(name, out, params)
                rows = sum(t["rows"] for t in manifest.tables.values())
                gen_times.append(manifest.generate_s)
                floors.append(floor_s(rows, len(manifest.schema), work))
                if repeat < args.repeats - 1:
                    shutil.rmtree(out, ignore_errors=True)
            gen, floor = float(np.median(gen_times)), float(np.median(floors))
            validate_s = float("nan")
            if not args.no_validate:
                from balancebench.experiment.validation import validate_dataset

                started = time.perf_counter()
                report = validate_dataset(folder, work / "validation.json")
                validate_s = time.perf_counter() - started
                if not report.success:
                    print(report.message())
            print(
                f"{label:>14} {rows:>11,} {gen:>8.2f} {rows / gen:>11,.0f} {floor:>8.2f} "
                f"{gen / floor:>8.2f} {validate_s:>10.1f}",
                flush=True,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
