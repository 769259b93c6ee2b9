"""What the Spark driver JVMs' class archive saves a small application, side by side.

    uv run python benchmarks/class_archive.py --rounds 5

Each round runs one small Spark application twice, with the archive ``make setup``
built (``balancebench.orchestration.class_archive``) and without it, alone on the machine, the
order alternating round by round: ``spark-submit spark_apps/exercise_classes.py
--strategies mnrt readj`` (one round of two strategies the archive's own exercise does
not run, on 20,000 TOPK tuples, through the path every run takes), in the environment of
the exercise (``class_archive.exercise_env``: a ``BALANCEBENCH_LOCAL`` of its own, where
one untimed run first generates the dataset and opens the MLflow store), with
``-XX:SharedArchiveFile`` left out for the run without. It prints each run's CPU (the
whole application: the JVM, the Python driver and its workers, as ``getrusage`` of the
waited-for processes) and wall, then the paired verdicts (``balancebench.core.stats.verdict``)
on both.

What it leaves out: the Python processes' CPU, which the archive does not change, is in
both figures (so the ratio understates the JVM's own saving); the JVM's C2 compiler runs
as in ``make run`` (``make test-faults`` runs C1 only).
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time

from balancebench.core.stats import LOWER, verdict
from balancebench.orchestration import class_archive
from balancebench.state.paths import source_root


def run_once(with_archive: bool, strategies: tuple[str, ...], local: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one application."""
    options = class_archive.driver_java_options().split()
    if not with_archive:
        options = [o for o in options if not o.startswith("-XX:SharedArchiveFile=")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        class_archive.exercise_command(strategies),
        env=class_archive.exercise_env(local, " ".join(options)),
        check=True,
        capture_output=True,
        cwd=source_root(),
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds (at least 2)")
    parser.add_argument("--strategies", nargs="+", default=["mnrt", "readj"])
    args = parser.parse_args()
    if args.rounds < 2:
        parser.error(f"--rounds: {args.rounds}; allowed: at least 2 (an interval needs 2)")
    archive = class_archive.archive_path()
    if archive is None or not archive.exists():
        sys.exit("no class archive: run make setup first")
    print(f"archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB)")
    print(f"application: one round of {', '.join(args.strategies)} on 20,000 TOPK tuples")
    figures: dict[bool, dict[str, list[float]]] = {
        arm: {"cpu_s": [], "wall_s": []} for arm in (False, True)
    }
    strategies = tuple(args.strategies)
    with tempfile.TemporaryDirectory(prefix="balancebench-class-archive-bench-") as local:
        run_once(True, strategies, local)  # untimed: generates the dataset, opens the store
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for arm in order:
                cpu, wall = run_once(arm, strategies, local)
                figures[arm]["cpu_s"].append(cpu)
                figures[arm]["wall_s"].append(wall)
                label = "with archive   " if arm else "without archive"
                print(f"round {r + 1}: {label}  CPU {cpu:6.1f} s  wall {wall:6.1f} s", flush=True)
    for figure in ("cpu_s", "wall_s"):
        without, with_ = figures[False][figure], figures[True][figure]
        mean_without, mean_with = sum(without) / len(without), sum(with_) / len(with_)
        found = verdict(without, with_, LOWER)
        print(
            f"{figure}: mean {mean_without:.1f} without, {mean_with:.1f} with; with the "
            f"archive: {found.text(('less', 'more'))} ({found.n} paired rounds)"
        )


if __name__ == "__main__":
    main()
