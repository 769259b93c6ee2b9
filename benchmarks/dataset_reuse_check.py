"""What the check of a reused dataset costs: every file's sha256 (``common.verify_dataset``)
beside what the dataset's writing cost, on the default TOPK dataset and on a larger one.

    uv run python benchmarks/dataset_reuse_check.py                      # 4.5M and 100M tuples
    uv run python benchmarks/dataset_reuse_check.py --tuples 4500000

Each dataset is generated (or reused) in the datasets folder first, then checked
``--repeats`` times; the figures are the median CPU and wall time of a check, in the same
process, with nothing else running. The files are in the page cache after the first
check, so the wall time is the hashing, not the disk (a cold cache adds the disk's read
time, which the dataset's load into Spark pays too).
"""

from __future__ import annotations

import argparse
import statistics
import time

from balancebench.experiment.params import EXPERIMENT_PARAMS
from balancebench.generators import generate
from balancebench.generators.common import load_manifest, verify_dataset
from balancebench.state.paths import datasets_dir

#: The default TOPK run's dataset (the DAG's defaults), at each size.
DATASET = "topic_stream"


def _default_params(n_tuples: int) -> dict[str, object]:
    names = ("zipf_s", "input_rate_tuples_per_s", "topic_stream_drift_period_s", "seed")
    params = {name: EXPERIMENT_PARAMS[name]["default"] for name in names}
    return {**params, "n_tuples": n_tuples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", default="4500000,100000000", help="sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(
        f"the check of a reused {DATASET} dataset (sha256 of every file), median of {args.repeats}"
    )
    for n in (int(x) for x in args.tuples.split(",")):
        folder, manifest = generate(DATASET, datasets_dir(), _default_params(n), say=lambda _: None)
        size = sum(f["bytes"] for f in manifest.file_facts.values())
        cpu, wall = [], []
        for _ in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            problem = verify_dataset(folder, load_manifest(folder))
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            assert problem is None, problem
        c, w = statistics.median(cpu), statistics.median(wall)
        print(
            f"  {n:>12,} tuples, {size / 2**20:8.1f} MiB: check {c:6.2f} s CPU, {w:6.2f} s wall "
            f"({size / 2**20 / w:,.0f} MiB/s); writing it took {manifest.generate_s:6.1f} s "
            f"wall (check = {100 * w / manifest.generate_s:.1f}% of it)"
        )


if __name__ == "__main__":
    main()
