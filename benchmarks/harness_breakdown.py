"""Where a sweep's harness time goes, per run, read back from MLflow.

    uv run python benchmarks/harness_breakdown.py                       # the latest sweep
    uv run python benchmarks/harness_breakdown.py --experiment balancebench-nightly
    uv run python benchmarks/harness_breakdown.py --sweep <parent run id>

A run's ``harness_s_total`` is its batches' driver wall minus what the cost model
charged them (``metrics.harness_s``): the harness's own time, never charged; of it,
``harness_core_wait_s_total`` is a lower bound on the time the measured tasks waited for
one of the machine's cores (``rest_task_metrics.core_wait_s``), printed apart. Every batch
logs the driver wall of its phases (``batch/phase_<name>_s``: the operator's job, the
oracle, the statistics, the plan, the task-metric reads); this prints, over the sweep's
runs after the first of each Spark application (the first pays the application's
warm-up), the median per run of each phase summed over the batches, beside the charged
time, so the harness target (issue 29: at most 3 s per run after the first) can be traced
to the phase that misses it.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from balancebench.experiment.report import CORE_WAIT_METRIC
from balancebench.experiment.run_spec import RUN_INDEX_TAG
from balancebench.state import tracking

PHASES = ("operator", "oracle", "stats", "plan", "task_metrics")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", default="balancebench-paper-000")
    parser.add_argument("--sweep", default=None, help="the sweep's parent run id")
    args = parser.parse_args()
    sweep = args.sweep
    if sweep is None:
        latest = tracking.latest_parent_run(args.experiment, "nightly_sweep", 0, "sweep")
        if latest is None:
            sys.exit(f"experiment: no sweep in {args.experiment!r}; run balancebench sweep")
        sweep = latest["run_id"]
    client = tracking.client()
    later: dict[str, list[float]] = {
        p: [] for p in [*PHASES, "charged", "harness", "core_wait", "own", "wall"]
    }
    first, n_runs = [], 0
    for _, cell in tracking.child_runs(sweep).iterrows():
        for _, run in tracking.child_runs(cell["run_id"]).iterrows():
            if run["status"] != "FINISHED" or f"tags.{RUN_INDEX_TAG}" not in run:
                continue
            n_runs += 1
            harness = float(run["metrics.harness_s_total"])
            if int(run[f"tags.{RUN_INDEX_TAG}"]) == 1:
                first.append(harness)
                continue
            rid = run["run_id"]
            for phase in PHASES:
                history = client.get_metric_history(rid, f"batch/phase_{phase}_s")
                later[phase].append(sum(m.value for m in history))
            later["charged"].append(float(run["metrics.charged_s_total"]))
            later["harness"].append(harness)
            wait = run.get(f"metrics.{CORE_WAIT_METRIC}")
            if wait is not None and wait == wait:  # runs before the split lack it
                later["core_wait"].append(float(wait))
                later["own"].append(harness - float(wait))
            later["wall"].append(
                sum(m.value for m in client.get_metric_history(rid, "batch/batch_wall_s"))
            )
    if not later["harness"]:
        sys.exit(f"sweep: {sweep} has no finished run after the first of its application")
    med = {k: statistics.median(v) for k, v in later.items() if v}
    print(f"sweep {sweep}: {n_runs} finished runs, {len(later['harness'])} after the first")
    print(f"  harness per run, first of its application: median {statistics.median(first):.2f} s")
    print(f"  harness per run, after the first: median {med['harness']:.2f} s (target <= 3 s)")
    print("  per run after the first, median of the batches' sum (s):")
    print(
        f"    batch wall {med['wall']:.2f}: charged {med['charged']:.2f}, "
        f"harness {med['harness']:.2f}"
    )
    if "own" in med:
        print(
            f"    of the harness: waiting for the machine's cores {med['core_wait']:.2f} (a "
            f"lower bound), the harness's own work {med['own']:.2f}"
        )
    for phase in PHASES:
        print(f"    phase {phase:<13} {med[phase]:.2f}")
    print(
        "  (the operator phase is the batch's plan built and its Spark job run: its wall "
        "minus the charged CPU is the driver's planning, scheduling, task start-up and "
        "the wait for a core above)"
    )


if __name__ == "__main__":
    main()
