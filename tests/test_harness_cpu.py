"""``benchmarks/harness_cpu.py`` reads CPU from ``/proc``: what it charges a thread."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc")


@pytest.fixture(scope="module")
def harness_cpu():
    return load_benchmark("harness_cpu")


def _reaped_child_burns_cpu() -> None:
    """A child that burns 0.3 s of CPU, reaped by this process (its cutime grows)."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass"
    subprocess.run([sys.executable, "-c", burn], check=True)
    tick = os.sysconf("SC_CLK_TCK")
    reaped = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[13:15]
    assert sum(int(t) for t in reaped) >= 0.2 * tick  # the child's CPU is ours to see


def _with_a_new_idle_thread(read):
    """``read()`` before and while a thread that does nothing has started."""
    before = read()
    started, finish = threading.Event(), threading.Event()
    idle = threading.Thread(target=lambda: (started.set(), finish.wait()))
    idle.start()
    started.wait()
    try:
        return before, read()
    finally:
        finish.set()
        idle.join()


def test_a_thread_that_starts_is_not_charged_its_process_reaped_children(harness_cpu):
    """A thread's ``/proc`` line carries its process's cutime/cstime (children reaped by
    a wait). Read with them, every JVM thread that started during a run (a task worker,
    a Py4J thread, a compiler thread) was charged the JVM's reaped children whole, 0.11 s
    each, and "jvm other" (the JVM's total minus the groups) lost as much."""
    _reaped_child_burns_cpu()
    before, after = _with_a_new_idle_thread(lambda: harness_cpu.cpu_reading(os.getpid()))
    new = [ticks for key, (_, ticks) in after.items() if key[0] == "thread" and key not in before]
    assert new, "the idle thread was not read"
    # The idle thread did next to nothing: not the 0.3 s its process reaped.
    assert max(new) < 0.1 * os.sysconf("SC_CLK_TCK")
    assert sum(harness_cpu.cpu_by_thread(before, after).values()) < 0.15


def test_the_cpu_groups_do_not_charge_a_new_thread_its_process_reaped_children(
    harness_cpu, monkeypatch
):
    """The same for the groups the script's table prints (``cpu_reading``): every thread
    of this process read as a task thread."""
    monkeypatch.setattr(harness_cpu, "_group", lambda comm: "tasks")
    _reaped_child_burns_cpu()
    before, after = _with_a_new_idle_thread(lambda: harness_cpu.cpu_reading(os.getpid()))
    assert any(k not in before for k in after if k[0] == "thread")
    assert harness_cpu.cpu_used(before, after)["tasks"] < 0.1
