import numpy as np
import pytest

from balancebench.core.replay import batch_index, latency_percentiles, schedule


def test_batch_index_clamps_last_batch():
    t = np.array([0.0, 0.99, 1.0, 2.5, 3.7])
    assert batch_index(t, 1.0, 3).tolist() == [0, 0, 1, 2, 2]


def test_idle_system_has_no_backlog():
    s = schedule(np.array([1.0, 2.0, 3.0]), 1.0, np.array([0.1, 0.1, 0.1]), np.zeros(3))
    assert s.start_s.tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(s.end_s, [1.1, 2.1, 3.1])
    assert s.queueing_s.max() == 0


def test_overload_builds_backlog_and_plan_delays_next_batch():
    # Service 1.5 s per 1 s window: each batch starts when the previous one ended.
    s = schedule(np.array([1.0, 2.0, 3.0]), 1.0, np.array([1.5, 1.5, 1.5]), np.array([0.1, 0.1, 0]))
    assert np.allclose(s.start_s, [1.0, 2.6, 4.2])
    assert np.allclose(s.queueing_s, [0.0, 0.6, 1.2])


def test_latency_is_batch_end_minus_event_time():
    times = np.array([0.0, 0.5, 1.0, 1.5])
    batch = np.array([0, 0, 1, 1])
    p = latency_percentiles(times, batch, np.array([1.2, 2.2]), (50.0, 100.0))
    assert p[100.0] == pytest.approx(1.2) and p[50.0] == pytest.approx(
        0.95
    )  # latencies 1.2, 0.7, 1.2, 0.7
