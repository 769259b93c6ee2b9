"""Where the CPU of a test run goes: per pytest-xdist worker and per kind of process.

    uv run python benchmarks/cpu_by_worker.py -- make --no-print-directory test-faults

Runs the command, samples ``/proc`` every ``--every`` seconds while it runs, and prints
core-seconds of CPU per worker (the ``PYTEST_XDIST_WORKER`` a process inherited: a
worker's services, Airflow tasks and Spark JVMs carry it) and per kind of process (the
JVM, PostgreSQL, Airflow's components, the browser, ...), beside the machine's total CPU
from ``/proc/stat`` over the same time. It answers "which file of the suite costs the
CPU a busy 2-core machine shares", which the per-test wall times do not: under load a
file's wall time is mostly waiting for the others.

What it leaves out: a process that lives less than one sampling interval is not seen
(its CPU shows only in the machine's total, as "not seen"); CPU is counted when a sample
sees it, so the last interval of a process that ends is lost too. A worker's own Python
process is listed under "no worker" (it sets ``PYTEST_XDIST_WORKER`` after it starts, and
``/proc`` shows the environment a process started with).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
#: Kinds of process, by a piece of the command line (first match wins).
KINDS = (
    ("java", "JVM (Spark)"),
    ("postgres", "PostgreSQL"),
    ("chrom", "browser"),
    ("headless", "browser"),
    ("scheduler", "Airflow scheduler"),
    ("LocalExecutor", "Airflow task (executor)"),
    ("supervisor", "Airflow task (executor)"),
    ("task runner", "Airflow task (executor)"),
    ("api-server", "Airflow api-server"),
    ("api_server", "Airflow api-server"),
    ("dag-processor", "Airflow dag-processor"),
    ("dag_processor", "Airflow dag-processor"),
    ("triggerer", "Airflow triggerer"),
    ("mlflow", "MLflow server"),
    ("uvicorn", "MLflow server"),
    ("run_workload", "Spark driver (Python)"),
    ("pyspark", "Spark driver (Python)"),
    ("exec(eval(", "pytest-xdist worker"),  # execnet's bootstrap: the worker itself
    ("xdist", "pytest worker"),
    ("pytest", "pytest"),
    ("balancebench", "balancebench CLI"),
)


def _own_ticks(pid: str) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def _worker(pid: str) -> str:
    """The pytest-xdist worker a process inherited (``PYTEST_XDIST_WORKER``)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    return next(
        (e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"PYTEST_XDIST_WORKER=")),
        "no worker",
    )


def _kind(pid: str) -> str:
    """What the process runs now (read every sample: ``spark-submit`` is a shell script
    until it ``exec``s the JVM, under the same pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    found = next((k for piece, k in KINDS if piece in cmdline), None)
    if found is None:  # named by its program and first argument
        words = [Path(w).name for w in cmdline.split()[:2]]
        found = "other: " + " ".join(words)[:40]
    return found


def _machine_ticks() -> int:
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(f) for i, f in enumerate(fields) if i not in (3, 4))  # not idle, iowait


class Sampler(threading.Thread):
    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.stop = threading.Event()
        self.seen: dict[str, tuple[int, str]] = {}  # pid -> (CPU ticks seen, worker)
        self.cpu: dict[tuple[str, str], int] = defaultdict(int)
        self.first = True

    def sample(self) -> None:
        alive = set()
        for entry in os.scandir("/proc"):
            pid = entry.name
            if not pid.isdigit():
                continue
            ticks = _own_ticks(pid)
            if ticks is None:
                continue
            alive.add(pid)
            if pid not in self.seen:
                # A process that existed before the command started counts from now on.
                self.seen[pid] = (ticks if self.first else 0, _worker(pid))
            last, worker = self.seen[pid]
            if ticks > last:
                self.cpu[worker, _kind(pid)] += ticks - last
            self.seen[pid] = (ticks, worker)
        for pid in set(self.seen) - alive:  # a pid may be reused: forget the dead
            del self.seen[pid]
        self.first = False

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.every)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    sampler = Sampler(args.every)
    machine_before, started = _machine_ticks(), time.monotonic()
    sampler.start()
    exit_code = subprocess.run(command).returncode
    sampler.stop.set()
    sampler.join()
    sampler.sample()
    wall = time.monotonic() - started
    machine = (_machine_ticks() - machine_before) / TICKS
    per_worker: dict[str, float] = defaultdict(float)
    for (worker, _), ticks in sampler.cpu.items():
        per_worker[worker] += ticks / TICKS
    print(f"\nCPU by worker and kind of process (core-seconds), over {wall:.0f} s wall:")
    for worker in sorted(per_worker, key=per_worker.get, reverse=True):
        print(f"  {worker:<12} {per_worker[worker]:8.0f}")
        kinds = sorted(
            ((k, t / TICKS) for (w, k), t in sampler.cpu.items() if w == worker),
            key=lambda kt: -kt[1],
        )
        for kind, seconds in kinds:
            if seconds >= 1:
                print(f"      {kind:<28} {seconds:8.0f}")
    seen = sum(per_worker.values())
    print(f"  {'machine':<12} {machine:8.0f} (from /proc/stat; not seen: {machine - seen:.0f})")
    print(f"  machine busy: {machine / wall / os.cpu_count():.0%} of {os.cpu_count()} cores")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
