"""``benchmarks/harness_cpu.py`` reads CPU from ``/proc``: what it charges a thread."""

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc")


@pytest.fixture(scope="module")
def harness_cpu():
    spec = importlib.util.spec_from_file_location(
        "harness_cpu", ROOT / "benchmarks" / "harness_cpu.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_thread_that_starts_is_not_charged_its_process_reaped_children(harness_cpu):
    """A thread's ``/proc`` line carries its process's cutime/cstime (children reaped by
    a wait). Read with them, a thread that started during a run was charged the JVM's
    reaped children whole (0.11 s per thread, so 1 s a run for the broadcast threads)."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3:\n    pass"
    subprocess.run([sys.executable, "-c", burn], check=True)  # reaped: our cutime grows
    before = harness_cpu.thread_ticks(os.getpid())
    started, finish = threading.Event(), threading.Event()
    idle = threading.Thread(target=lambda: (started.set(), finish.wait()))
    idle.start()
    started.wait()
    try:
        after = harness_cpu.thread_ticks(os.getpid())
    finally:
        finish.set()
        idle.join()
    tick = os.sysconf("SC_CLK_TCK")
    reaped = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[13:15]
    assert sum(int(t) for t in reaped) >= 0.2 * tick  # the child's CPU is ours to see
    new = [ticks for tid, (_, ticks) in after.items() if tid not in before]
    assert new, "the idle thread was not read"
    # The idle thread did next to nothing: not the 0.3 s its process reaped.
    assert max(new) < 0.1 * tick
    used = harness_cpu.cpu_by_thread(before, after)
    assert sum(used.values()) < 0.15
