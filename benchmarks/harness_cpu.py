"""Where a cell's CPU goes, run after run in one Spark application (Linux ``/proc``).

    uv run python benchmarks/harness_cpu.py                  # paper 000 Fig. 7's cell
    uv run python benchmarks/harness_cpu.py --runs 6 --conf \\
        '{"workload": "eq5", "strategies": ["qmmp"], "tpch_scale_factor": 0.02, "n_nodes": 12}'

A run's harness (``harness_s_total``: its batches' driver wall minus what the cost model
charged, ``metrics.harness_s``) is not the harness's CPU: on this machine's cores it is
the wall of everything the run makes the machine do that is not charged. This loads the
cell's dataset once (``experiment.LoadedCell``, as a sweep does), runs its strategies in
turn (warmed up as a sweep warms them), and prints per run the wall, the harness, its
core-wait lower bound (``harness_core_wait_s_total``), and the CPU seconds the run used,
by who used it:

- ``tasks``: Spark's task threads, all the Spark work: the senders' and nodes' work the
  cost model charges (as per-node maxima, so most of this CPU is not charged) and the
  oracle's and statistics' jobs;
- ``jit``: HotSpot's compiler threads, compiling Spark's and the generated code;
- ``gc``: the garbage collector's threads;
- ``py4j``: the JVM threads that serve the Python driver's calls: building, analysing,
  optimising and planning every query the run sends (its batches', the oracle's and the
  statistics'), and submitting its jobs;
- ``jvm other``: the rest of the JVM (the scheduler, the listener bus and the UI store and
  REST API the task metrics are read from, threads that ended during the run);
- ``python``: the driver's Python (the strategies' planners, the statistics' arrays, Py4J)
  and the Python workers per-tuple routing starts.

``busy`` is that CPU over the run's wall: near the machine's core count, the harness can
only shrink by less work, not by overlapping it. The medians are over the runs after
``--skip`` (the JIT keeps compiling Spark's own code for the first few runs).
Linux only: it reads the JVM's threads from ``/proc``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from pathlib import Path

from balancebench.experiment import LoadedCell
from balancebench.experiment_params import ExperimentSpec
from balancebench.schema import parse_json_object, positive_int

#: Paper 000 Fig. 7's cell: the figure with the most harness per run (TOPK, 6 batches).
FIG7_CELL = {
    "workload": "topk",
    "strategies": ["qmmp", "mnrt", "readj"],
    "zipf_s": 1.0,
    "n_nodes": 8,
    "tolerance": 0.05,
}
GROUPS = ("tasks", "jit", "gc", "py4j", "jvm other", "python")


def _ticks(stat: str) -> tuple[int, int]:
    """``(utime + stime, cutime + cstime)`` of a ``/proc/.../stat`` line, in clock ticks."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # a thread or process that ended meanwhile
        return None


def cpu_by_group(jvm_pid: int) -> Counter:
    """CPU seconds so far of the JVM (by thread group) and of this process and the
    Python workers (every process under the JVM, their reaped children included)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: Counter = Counter()
    proc = Path("/proc") / str(jvm_pid)
    own, _ = _ticks(_read(proc / "stat") or "")
    named = 0
    for task in (proc / "task").iterdir():
        comm, stat = _read(task / "comm"), _read(task / "stat")
        if comm is None or stat is None:
            continue
        used, _ = _ticks(stat)
        if comm.startswith("Executor task"):
            out["tasks"] += used
        elif "CompilerThre" in comm:
            out["jit"] += used
        elif comm.startswith(("GC Thread", "G1 ")):
            out["gc"] += used
        elif comm.startswith("Thread-"):
            out["py4j"] += used
        else:
            continue
        named += used
    out["jvm other"] = own - named
    python, _ = _ticks(_read(Path("/proc/self/stat")) or "")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        stat = _read(Path("/proc") / pid / "stat")
        if stat is not None and int(stat.rsplit(")", 1)[1].split()[1]) == jvm_pid:
            used, reaped = _ticks(stat)
            python += used + reaped
    out["python"] = python
    return Counter({k: v / tick for k, v in out.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conf", default=None, help="the cell's Params as a JSON object (default: Fig. 7's)"
    )
    parser.add_argument("--runs", type=positive_int, default=12, help="measured runs")
    parser.add_argument(
        "--skip", type=int, default=3, help="runs left out of the medians (0 <= skip < runs)"
    )
    args = parser.parse_args()
    if not 0 <= args.skip < args.runs:
        parser.error(f"--skip: {args.skip}; allowed: a whole number from 0 to {args.runs - 1}")
    if not Path("/proc/self/task").is_dir():
        parser.error("--conf: this script reads /proc; allowed: Linux only")
    try:  # checked before Spark starts: the message names the Param
        conf = parse_json_object(args.conf, "--conf") if args.conf else FIG7_CELL
        params = ExperimentSpec.checked(conf)
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.session import get_session

    spark = get_session("balancebench-harness-cpu", master="local[*]")
    try:
        jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
        cell = LoadedCell(spark, params)
        cores = spark.sparkContext.defaultParallelism
        print(f"cell {params.workload.name}, {params.strategies}, {cores} cores", flush=True)
        head = " ".join(f"{g:>9}" for g in GROUPS)
        print(f"{'run':>3} {'strategy':>11} {'wall':>6} {'harness':>7} {'wait':>5} {head} busy")
        rows = []
        for r in range(args.runs):
            name = params.strategies[r % len(params.strategies)]
            before, started = cpu_by_group(jvm_pid), time.perf_counter()
            _, summary = cell.run(spark, name)
            wall = time.perf_counter() - started
            used = cpu_by_group(jvm_pid)
            used.subtract(before)
            row = {
                "wall": wall,
                "harness": summary["harness_s_total"],
                "wait": summary["harness_core_wait_s_total"],
                **{g: used[g] for g in GROUPS},
                "busy": sum(used[g] for g in GROUPS) / wall,
            }
            rows.append(row)
            cells = " ".join(f"{row[g]:9.2f}" for g in GROUPS)
            print(
                f"{r + 1:>3} {name:>11} {wall:6.2f} {row['harness']:7.2f} {row['wait']:5.2f} "
                f"{cells} {row['busy']:.2f}",
                flush=True,
            )
        later = rows[args.skip :]
        med = {k: statistics.median(row[k] for row in later) for k in later[0]}
        split = ", ".join(f"{g} {med[g]:.2f}" for g in GROUPS)
        print(
            f"median of runs {args.skip + 1}-{args.runs}: wall {med['wall']:.2f} s, harness "
            f"{med['harness']:.2f} s (of it waiting for a core >= {med['wait']:.2f} s); CPU s: "
            f"{split}; {med['busy']:.2f} of {cores} cores busy"
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
