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
sees it, so the last interval of a process that ends is lost too. "no worker" holds, beside
what belongs to no worker (make, the pytest controller, this sampler): a worker's own
Python process (it sets ``PYTEST_XDIST_WORKER`` after it starts, and ``/proc`` shows the
environment a process started with), and a process whose environment was overwritten by
its process title (Airflow's ``setproctitle``, PostgreSQL) before a sample saw it and
whose parent was not seen with a worker either (a child takes its parent's worker).

It also prints what a core-second bought: the CPU time of a fixed piece of work (a
pure-Python loop, ``PROBE_STEPS`` steps) on the idle machine before the command (median of
five) and every ``--probe-every`` seconds while it runs. The same tests cost more CPU on a
host that is slower at the time (a busier shared cache, a noisy neighbour on the host):
this says how much, so that two runs' totals can be compared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from balancebench.core.schema import positive_float

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


def _stat(pid: str) -> tuple[str, str, int] | None:
    """The parent's pid, the start time (clock ticks since boot: with the pid, a process's
    identity, as pids are reused) and the CPU ticks of the process itself (user +
    system, not its children's); None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[1], fields[19], int(fields[11]) + int(fields[12])


def _environ_worker(pid: str) -> str | None:
    """The pytest-xdist worker in the process's environment (``PYTEST_XDIST_WORKER``), or
    None: not set, or the area overwritten (Airflow's ``setproctitle`` and PostgreSQL
    write their process titles over it)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next(
        (
            e.split(b"=", 1)[1].decode(errors="replace")
            for e in environ
            if e.startswith(b"PYTEST_XDIST_WORKER=")
        ),
        None,
    )


def _kind(pid: str) -> str:
    """What the process runs now (read every sample: ``spark-submit`` is a shell script
    until it ``exec``s the JVM, under the same pid)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "gone"
    cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
    found = next((k for piece, k in KINDS if piece in cmdline), None)
    if found is None:  # named by its program and first argument
        words = [Path(w).name for w in cmdline.split()[:2]]
        found = ("other: " + " ".join(words))[:47] if words else "other: (no command line)"
    return found


def _machine_ticks() -> int:
    """Busy ticks of all cores: user, nice, system, irq, softirq (not idle or iowait; not
    steal, another guest's time; not guest, already inside user and nice)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return sum(int(f) for i, f in enumerate(fields) if i in (0, 1, 2, 5, 6))


#: The speed probe's fixed work: a pure-Python loop of this many steps (about 0.1 s).
PROBE_STEPS = 2_000_000


def probe_cpu_s() -> float:
    """The CPU seconds this thread spends on the probe's fixed work."""
    started = time.thread_time()
    total = 0
    for step in range(PROBE_STEPS):
        total += step
    return time.thread_time() - started


class SpeedProbe(threading.Thread):
    """The probe's CPU time every ``every`` seconds, until ``stop`` is set."""

    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.stop = threading.Event()
        self.probes: list[float] = []

    def run(self) -> None:
        while not self.stop.wait(self.every):
            self.probes.append(probe_cpu_s())


class Sampler(threading.Thread):
    def __init__(self, every: float) -> None:
        super().__init__(daemon=True)
        self.every = every
        self.stop = threading.Event()
        #: pid -> (start time, CPU ticks counted so far, worker)
        self.seen: dict[str, tuple[str, int, str]] = {}
        self.cpu: dict[tuple[str, str], int] = defaultdict(int)
        self.first = True

    def _worker(self, pid: str, parent: str) -> str:
        """The worker of a process seen for the first time: its environment's, else its
        parent's (a child of a process whose environment was overwritten)."""
        found = _environ_worker(pid)
        if found is not None:
            return found
        return self.seen[parent][2] if parent in self.seen else "no worker"

    def sample(self) -> None:
        alive = set()
        for entry in sorted(os.scandir("/proc"), key=lambda e: (len(e.name), e.name)):
            pid = entry.name  # in pid order, mostly parents before their children
            if not pid.isdigit():
                continue
            stat = _stat(pid)
            if stat is None:
                continue
            parent, started, ticks = stat
            alive.add(pid)
            if pid not in self.seen or self.seen[pid][0] != started:
                # A process that existed before the command started counts from now on.
                self.seen[pid] = (started, ticks if self.first else 0, self._worker(pid, parent))
            _, last, worker = self.seen[pid]
            if ticks > last:
                self.cpu[worker, _kind(pid)] += ticks - last
            self.seen[pid] = (started, ticks, worker)
        for pid in set(self.seen) - alive:
            del self.seen[pid]
        self.first = False

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.every)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--every", type=positive_float, default=1.0, help="seconds between samples (> 0)"
    )
    parser.add_argument(
        "--probe-every",
        type=positive_float,
        default=30.0,
        help="seconds between two speed probes while the command runs (> 0)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    idle_probe = statistics.median(probe_cpu_s() for _ in range(5))
    sampler, speed = Sampler(args.every), SpeedProbe(args.probe_every)
    machine_before, started = _machine_ticks(), time.monotonic()
    sampler.start()
    speed.start()
    try:
        exit_code = subprocess.run(command).returncode
    finally:
        sampler.stop.set()
        speed.stop.set()
        sampler.join()
        speed.join()
    sampler.sample()
    if exit_code < 0:  # ended by a signal: the shell's convention
        exit_code = 128 - exit_code
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
    print(
        f"CPU of a fixed piece of work ({PROBE_STEPS:,}-step Python loop): {idle_probe:.3f} s "
        "on the idle machine before the command (median of 5)"
    )
    if speed.probes:
        during = statistics.median(speed.probes)
        print(
            f"  while it ran: median {during:.3f} s (min {min(speed.probes):.3f}, max "
            f"{max(speed.probes):.3f}, {len(speed.probes)} probes), "
            f"{during / idle_probe - 1:+.0%} against before"
        )
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
