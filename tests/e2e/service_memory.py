"""The memory of the whole local service while a test drives it: every process of
PostgreSQL and of each component's process tree (the tasks, their spark-submit JVMs and
Spark drivers included), sampled in a thread."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import psutil

COMPONENTS = ("mlflow", "api-server", "scheduler", "dag-processor", "triggerer")


def service_processes(folder: Path) -> list[psutil.Process]:
    """The service's processes now: each component's and PostgreSQL's, with every
    descendant (a task supervisor in its own process group is still a descendant)."""
    roots = []
    for name in COMPONENTS:
        try:
            roots.append(psutil.Process(int((folder / f"{name}.pid").read_text())))
        except (OSError, ValueError, psutil.Error):
            continue
    with contextlib.suppress(OSError, ValueError, IndexError, psutil.Error):
        roots.append(
            psutil.Process(int((folder / "postgres" / "postmaster.pid").read_text().split()[0]))
        )
    found: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            for process in [root, *root.children(recursive=True)]:
                found[process.pid] = process
        except psutil.Error:
            continue
    return list(found.values())


def proportional_bytes(processes: list[psutil.Process]) -> int:
    """Sum of the processes' proportional set sizes (PSS: a page shared by n processes
    counts 1/n in each, so forked workers' shared pages are not counted n times)."""
    total = 0
    for process in processes:
        try:
            total += process.memory_full_info().pss
        except psutil.Error:
            continue  # ended between the listing and the reading
    return total


class PeakMemory:
    """Samples the service's PSS every ``every_s`` seconds until stopped; ``peak_bytes`` and
    ``processes_at_peak`` hold the largest sample."""

    def __init__(self, folder: Path, every_s: float = 2.0) -> None:
        self.folder, self.every_s = folder, every_s
        self.peak_bytes, self.processes_at_peak, self.samples = 0, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="service-memory", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            processes = service_processes(self.folder)
            total = proportional_bytes(processes)
            self.samples += 1
            if total > self.peak_bytes:
                self.peak_bytes, self.processes_at_peak = total, len(processes)
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def line(self) -> str:
        return (
            f"service peak memory: {self.peak_bytes / 2**30:.2f} GiB PSS over "
            f"{self.processes_at_peak} processes ({self.samples} samples, every "
            f"{self.every_s:g} s)"
        )
