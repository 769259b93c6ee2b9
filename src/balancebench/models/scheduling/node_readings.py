"""Node metrics of the scheduling model: the readings SWPTS weighs and the switch rule
uses, from this machine's ``/proc`` (:class:`ProcNodeMetrics`) or from the dataset's
node profile under a background load (:class:`ProfileNodeMetrics`)."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class NodeMetrics:
    """One node's reading: CPU use ``Cu`` and memory use ``Mu`` (0..1), total memory (GB),
    core count and capacity (relative speed; ``time = cost / capacity``)."""

    name: str
    cores: int
    capacity: float
    cpu_use: float
    mem_use: float
    mem_total_gb: float


class NodeMetricsSource(Protocol):
    """Where the scheduler's node metrics come from (paper §3.1's cluster monitor)."""

    def read(self) -> list[NodeMetrics]: ...


def parse_proc_stat_cpu(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the aggregate ``cpu`` line of ``/proc/stat``.

    Idle = ``idle + iowait``; guest times are already inside user/nice, so they are not
    added again.
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            values += [0] * (8 - len(values))
            total = sum(values)
            idle = values[3] + values[4]
            return total - idle, total
    raise ValueError("/proc/stat: no aggregate 'cpu' line")


def parse_proc_meminfo(text: str) -> tuple[float, float]:
    """(MemTotal, MemFree) of ``/proc/meminfo`` in GB (1 GB = 2**20 kB)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemFree"):
            found[key] = float(rest.split()[0]) / float(1 << 20)
    if len(found) != 2:
        raise ValueError("/proc/meminfo: MemTotal or MemFree missing")
    return found["MemTotal"], found["MemFree"]


class ProcNodeMetrics:
    """This machine as one node: CPU use from two ``/proc/stat`` reads ``interval_s``
    apart, memory use ``(MemTotal - MemFree) / MemTotal`` from ``/proc/meminfo``
    (paper §3.1 parses the same files); cores = ``os.cpu_count()`` = capacity."""

    def __init__(self, interval_s: float = 0.1, proc: str | Path = "/proc") -> None:
        self.interval_s = interval_s
        self.proc = Path(proc)

    def read(self) -> list[NodeMetrics]:
        busy0, total0 = parse_proc_stat_cpu((self.proc / "stat").read_text())
        time.sleep(self.interval_s)
        busy1, total1 = parse_proc_stat_cpu((self.proc / "stat").read_text())
        elapsed = total1 - total0
        cpu_use = (busy1 - busy0) / elapsed if elapsed > 0 else 0.0
        mem_total, mem_free = parse_proc_meminfo((self.proc / "meminfo").read_text())
        cores = os.cpu_count() or 1
        return [
            NodeMetrics(
                name=os.uname().nodename,
                cores=cores,
                capacity=float(cores),
                cpu_use=float(min(1.0, max(0.0, cpu_use))),
                mem_use=(mem_total - mem_free) / mem_total,
                mem_total_gb=mem_total,
            )
        ]


class ProfileNodeMetrics:
    """Modelled nodes (the dataset's ``nodes`` table) under a background load: node
    ``j``'s ``Cu = min(1, busy_cores_j / cores_j)``, ``Mu = min(1, mem_gb_j /
    memory_gb_j)`` (e.g. the OS and the TaskManager JVM on every slave)."""

    def __init__(
        self,
        names: Sequence[str],
        cores: Sequence[int],
        memory_gb: Sequence[float],
        capacity: Sequence[float],
        background_busy_cores: float | Sequence[float] = 0.0,
        background_mem_gb: float | Sequence[float] = 0.0,
    ) -> None:
        n = len(names)
        self.names = list(names)
        self.cores = [int(c) for c in cores]
        self.memory_gb = [float(m) for m in memory_gb]
        self.capacity = [float(c) for c in capacity]
        self.busy_cores = per_node("background_busy_cores", background_busy_cores, n)
        self.mem_gb = per_node("background_mem_gb", background_mem_gb, n)

    def read(self) -> list[NodeMetrics]:
        return [
            NodeMetrics(
                name=self.names[j],
                cores=self.cores[j],
                capacity=self.capacity[j],
                cpu_use=min(1.0, self.busy_cores[j] / self.cores[j]),
                mem_use=min(1.0, self.mem_gb[j] / self.memory_gb[j]),
                mem_total_gb=self.memory_gb[j],
            )
            for j in range(len(self.names))
        ]


def per_node(field: str, value: float | Sequence[float], n_nodes: int) -> list[float]:
    """A scalar for every node, or one value per node (length checked)."""
    if isinstance(value, int | float):
        return [float(value)] * n_nodes
    values = [float(v) for v in value]
    if len(values) != n_nodes:
        raise ValueError(
            f"scheduling_{field}: {len(values)} values for {n_nodes} nodes; allowed: one "
            "number for every node or one per node"
        )
    return values
