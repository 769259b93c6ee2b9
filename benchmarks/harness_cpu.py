"""Where a cell's CPU goes, run after run in one Spark application (Linux ``/proc``).

    uv run python benchmarks/harness_cpu.py --runs 9         # paper 000 Fig. 7's cell
    uv run python benchmarks/harness_cpu.py --runs 12 --conf \\
        '{"workload": "eq5", "strategies": ["hash", "qmmp", "mnrt", "dynamic", "bi", "bi6"],
          "zipf_s": 1.0, "n_nodes": 12, "tpch_scale_factor": 0.02, "n_batches": 4}'

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
- ``py4j``: the JVM threads that serve the Python driver's calls (Py4J's, named
  ``Thread-<n>``, as is any other unnamed thread): building, analysing, optimising and
  planning every query the run sends (its batches', the oracle's and the statistics'),
  and submitting its jobs;
- ``jvm other``: the rest of the JVM (the scheduler, the listener bus and the UI store and
  REST API the task metrics are read from, threads that ended during the run);
- ``python``: the driver's Python (the strategies' planners, the statistics' arrays, Py4J)
  and the processes under the JVM: pyspark's daemon and the Python workers it forks for
  per-tuple routing (read while alive: pyspark reuses them).

``busy`` is that CPU over the run's wall, against the machine's cores. ``--threads``
also prints the JVM's CPU per thread name (the kernel's 15-character ``comm``, trailing
numbers stripped: ``GC Thread#0`` and ``GC Thread#1`` are one row), median per run, the
most first. ``JDK_JAVA_OPTIONS`` reaches the JVM Spark starts, to compare JVM settings
(``JDK_JAVA_OPTIONS=-XX:TieredStopAtLevel=1``). The medians are
over the runs after ``--skip`` (default: the first round, one run per strategy, whose
CPU includes the strategy's warm-up; the JIT keeps compiling Spark's own code for a few
rounds more).
Linux only: it reads the JVM's threads from ``/proc``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from balancebench.core.schema import non_negative_int, parse_json_object, positive_int
from balancebench.experiment.params import ExperimentSpec, check_inputs
from balancebench.experiment.runs import LoadedCell

#: Paper 000 Fig. 7's cell: the figure with the most harness per run (TOPK, 6 batches).
FIG7_CELL = {
    "workload": "topk",
    "strategies": ["qmmp", "mnrt", "readj"],
    "zipf_s": 1.0,
    "n_nodes": 8,
    "tolerance": 0.05,
}
GROUPS = ("tasks", "jit", "gc", "py4j", "jvm other", "python")


def _ticks(stat: str, *, children: bool) -> int:
    """utime + stime of a ``/proc/.../stat`` line, in clock ticks, plus with ``children``
    cutime + cstime (children reaped by a ``wait``). A thread's line carries its process's
    cutime and cstime, so a thread is read without them: with them, each thread that
    started during a run counted the JVM's reaped children (0.11 s here) as its own."""
    fields = stat.rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11 : 15 if children else 13])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # a thread or process that ended meanwhile
        return None


def _group(comm: str) -> str | None:
    """The group of a JVM thread by its name (``comm``: at most 15 characters)."""
    if comm.startswith("Executor task"):  # Spark's task launch and idle workers
        return "tasks"
    if "CompilerThre" in comm:  # C1 and C2
        return "jit"
    if comm.startswith(("GC Thread", "G1 ")):
        return "gc"
    if comm.startswith("Thread-"):  # Py4J's threads; any other unnamed thread too
        return "py4j"
    return None


def _descendants(root: int) -> list[int]:
    """Every live process under ``root`` (pyspark's daemon and the Python workers it forks)."""
    parent: dict[int, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        stat = _read(Path("/proc") / pid / "stat")
        if stat is not None:
            parent[int(pid)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += frontier
    return found


def cpu_reading(jvm_pid: int) -> dict[tuple[str, int], tuple[str, int]]:
    """CPU so far, in clock ticks, by ``(kind, id)``: each JVM thread with its name (its
    ``comm``, by thread id), the JVM process as a whole, this (driver) process, and each
    process under the JVM (the Python workers; pyspark's daemon reaps its workers with
    SIGCHLD ignored, so a worker that ends is not added to anyone: only live ones are
    read)."""
    out: dict[tuple[str, int], tuple[str, int]] = {}
    proc = Path("/proc") / str(jvm_pid)
    for task in (proc / "task").iterdir():
        comm, stat = _read(task / "comm"), _read(task / "stat")
        if comm is not None and stat is not None:
            out[("thread", int(task.name))] = (comm.strip(), _ticks(stat, children=False))
    for pid in _descendants(jvm_pid):
        stat = _read(Path("/proc") / str(pid) / "stat")
        if stat is not None:
            out[("process", pid)] = ("python", _ticks(stat, children=True))
    own = Path("/proc/self/stat").read_text()
    out[("process", os.getpid())] = ("python", _ticks(own, children=True))
    # Last, so the JVM's total covers at least what its threads were read at.
    out[("jvm", jvm_pid)] = ("jvm", _ticks((proc / "stat").read_text(), children=True))
    return out


def _ticks_used(before: dict, after: dict) -> Iterator[tuple[str, str, int]]:
    """``(kind, label, ticks)`` between two readings of :func:`cpu_reading`, per thread or
    process of ``after``: one first seen there counts whole (it started meanwhile)."""
    for key, (label, ticks) in after.items():
        yield key[0], label, ticks - before.get(key, (label, 0))[1]


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """CPU seconds by group between two readings of :func:`cpu_reading` (a JVM thread by
    :func:`_group`). A JVM thread that ended meanwhile is in the JVM's total only, so its
    CPU lands in ``jvm other``, as does a thread of no group; a Python worker that ended
    meanwhile is lost (none does here: pyspark reuses its workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    used: Counter[str] = Counter()
    for kind, label, ticks in _ticks_used(before, after):
        group = _group(label) if kind == "thread" else label
        if group is not None:
            used[group] += ticks
    named = sum(used[g] for g in ("tasks", "jit", "gc", "py4j"))
    used["jvm other"] = used.pop("jvm") - named
    return {g: used[g] / tick for g in GROUPS}


def cpu_by_thread(before: dict, after: dict) -> Counter[str]:
    """The JVM's CPU seconds per thread name (trailing numbers stripped) between two
    readings of :func:`cpu_reading`; a thread that ended meanwhile is not counted."""
    tick = os.sysconf("SC_CLK_TCK")
    used: Counter[str] = Counter()
    for kind, label, ticks in _ticks_used(before, after):
        if kind == "thread":
            used[re.sub(r"[-\s#]*\d+$", "", label) or "(unnamed)"] += ticks / tick
    return used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--conf", default=None, help="the cell's Params as a JSON object (default: Fig. 7's)"
    )
    parser.add_argument("--runs", type=positive_int, default=12, help="measured runs")
    parser.add_argument(
        "--skip",
        type=non_negative_int,
        default=None,
        help="runs left out of the medians (default: one per strategy, the first round)",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also print the JVM's CPU per thread name (median per run)",
    )
    args = parser.parse_args()
    if not Path("/proc/self/task").is_dir():
        parser.error("this script reads a process's threads from /proc: Linux only")
    try:  # checked before Spark starts: the message names the Param
        conf = parse_json_object(args.conf, "--conf") if args.conf is not None else FIG7_CELL
        params = ExperimentSpec.checked(conf)
        check_inputs(params.to_json())  # a user file exists and has its columns
    except ValueError as exc:
        parser.error(str(exc))
    skip = len(params.strategies) if args.skip is None else args.skip
    if skip >= args.runs:
        parser.error(
            f"--skip: {skip} (--runs {args.runs}); allowed: a whole number from 0 to "
            f"{args.runs - 1}"
        )
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
        rows, threads = [], []
        for r in range(args.runs):
            name = params.strategies[r % len(params.strategies)]
            before, started = cpu_reading(jvm_pid), time.perf_counter()
            _, summary = cell.run(spark, name)
            wall = time.perf_counter() - started
            after = cpu_reading(jvm_pid)
            used = cpu_used(before, after)
            threads.append(cpu_by_thread(before, after))
            row = {
                "wall": wall,
                "harness": summary["harness_s_total"],
                "wait": summary["harness_core_wait_s_total"],
                **{g: used[g] for g in GROUPS},
                "busy": sum(used[g] for g in GROUPS) / wall,
            }
            rows.append(row)
            columns = " ".join(f"{row[g]:9.2f}" for g in GROUPS)
            print(
                f"{r + 1:>3} {name:>11} {wall:6.2f} {row['harness']:7.2f} {row['wait']:5.2f} "
                f"{columns} {row['busy']:.2f}",
                flush=True,
            )
        later = rows[skip:]
        med = {k: statistics.median(row[k] for row in later) for k in later[0]}
        split = ", ".join(f"{g} {med[g]:.2f}" for g in GROUPS)
        print(
            f"median of runs {skip + 1}-{args.runs}: wall {med['wall']:.2f} s, harness "
            f"{med['harness']:.2f} s (of it waiting for a core >= {med['wait']:.2f} s); CPU s: "
            f"{split}; {med['busy']:.2f} of {cores} cores busy"
        )
        if args.threads:
            names = set().union(*threads[skip:])
            per = {n: statistics.median(t[n] for t in threads[skip:]) for n in names}
            print(f"JVM CPU per thread name (s a run, median of runs {skip + 1}-{args.runs}):")
            for n, cpu in sorted(per.items(), key=lambda kv: -kv[1]):
                if cpu >= 0.005:
                    print(f"  {n:<16} {cpu:6.2f}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
