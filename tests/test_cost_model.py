"""The cost model (``metrics.clock``) on hand-made batch records: what it charges, what it
leaves to the harness, and the three throughput figures."""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.metrics import BatchCosts, clock


def record(b: int, node: list[float], **kw) -> BatchCosts:
    return BatchCosts(batch=b, input_tuples=kw.pop("tuples", 100), node_work_s=np.array(node), **kw)


def arrivals(n_batches: int, per_batch: int, interval: float) -> tuple[np.ndarray, np.ndarray]:
    """Evenly spaced arrivals, ``per_batch`` per batch window."""
    t = (np.arange(n_batches * per_batch) + 0.5) * interval / per_batch
    return t, (t // interval).astype(np.int64)


def test_node_service_is_the_slowest_node_and_routing_is_shared_by_senders():
    r = record(0, [0.1, 0.4, 0.2], route_work_s=0.6, senders=3)
    assert r.node_service_s == pytest.approx(0.4)
    assert r.routing_s == pytest.approx(0.2)
    assert r.service_s == pytest.approx(0.6)


def test_migration_is_the_slowest_involved_node_with_its_transfer():
    # Node 0 sends 50 MB and works 0.1 s; node 2 receives 25 MB and works 0.3 s.
    r = record(
        0,
        [0.1, 0.1, 0.1],
        migration_work_s=np.array([0.1, 0.0, 0.3]),
        migration_sent_bytes=np.array([50e6, 0.0, 0.0]),
        migration_received_bytes=np.array([0.0, 0.0, 25e6]),
    )
    # 125 MB/s: node 0 = 0.1 + 0.4, node 2 = 0.3 + 0.2.
    assert r.migration_transfer_s(125.0).tolist() == pytest.approx([0.4, 0.0, 0.2])
    assert r.migration_s(125.0) == pytest.approx(0.5)
    assert r.migration_bytes == pytest.approx(50e6)


def test_doubling_the_bytes_moved_doubles_the_transfer_part():
    sent = np.array([10e6, 0.0, 4e6])
    received = np.array([0.0, 14e6, 0.0])
    work = np.array([0.05, 0.02, 0.01])
    once = record(
        0,
        [0.1] * 3,
        migration_work_s=work,
        migration_sent_bytes=sent,
        migration_received_bytes=received,
    )
    twice = record(
        0,
        [0.1] * 3,
        migration_work_s=work,
        migration_sent_bytes=2 * sent,
        migration_received_bytes=2 * received,
    )
    for bw in (125.0, 12.5):
        assert twice.migration_transfer_s(bw) == pytest.approx(2 * once.migration_transfer_s(bw))
        # the CPU part is unchanged: the total grows by exactly the added transfer
        extra = twice.migration_s(bw) - once.migration_s(bw)
        assert extra == pytest.approx(once.migration_transfer_s(bw).max(), rel=0.01)


def test_harness_is_driver_wall_minus_what_is_charged_and_never_enters_the_clock():
    interval = 1.0
    t, b = arrivals(3, 100, interval)
    base = [record(i, [0.2, 0.3], plan_s=0.01, driver_wall_s=2.0) for i in range(3)]
    slow = [record(i, [0.2, 0.3], plan_s=0.01, driver_wall_s=50.0) for i in range(3)]
    fast, sluggish = clock(base, t, b, interval), clock(slow, t, b, interval)
    assert fast.harness_s == pytest.approx([2.0 - 0.31] * 3)
    assert sluggish.harness_s == pytest.approx([50.0 - 0.31] * 3)
    # same measured work, same clock: latency and throughput do not see the driver's wall
    assert sluggish.latency_s == fast.latency_s
    assert sluggish.throughput_tuples_per_s == fast.throughput_tuples_per_s
    assert np.array_equal(sluggish.schedule.end_s, fast.schedule.end_s)


def test_plan_and_migration_delay_the_next_batch_not_this_one():
    interval = 1.0
    t, b = arrivals(2, 10, interval)
    r0 = record(
        0,
        [0.5],
        plan_s=0.2,
        migration_work_s=np.array([0.3]),
        migration_sent_bytes=np.array([0.0]),
    )
    run = clock([r0, record(1, [0.9])], t, b, interval)
    # batch 0 ends at 1.0 + 0.5; batch 1 closes at 2.0 but waits for 1.5 + 0.2 + 0.3 = 2.0
    assert run.schedule.end_s.tolist() == pytest.approx([1.5, 2.9])
    assert run.delay_s.tolist() == pytest.approx([0.5, 0.0])


def test_throughput_delivered_capacity_and_sustainable_rate():
    interval = 1.0
    t, b = arrivals(4, 1000, interval)
    recs = [record(i, [0.25, 0.5], tuples=1000) for i in range(4)]
    run = clock(recs, t, b, interval)
    # each batch ends 0.5 s after it closes; the last at 4.5; first arrival 0.0005
    assert run.throughput_tuples_per_s == pytest.approx(4000 / (4.5 - 0.0005))
    assert run.capacity_tuples_per_s == pytest.approx(4000 / 2.0)
    assert run.charged_s_total == pytest.approx(4 * 0.5)  # the slower node of 4 batches
    # work 0.5 s per 1000 tuples and a 1 s interval: 2000 tuples/s keep the backlog flat
    assert run.sustainable_rate_tuples_per_s == pytest.approx(2000.0)
    # a plan time per batch does not scale with the rate: it eats the interval first
    planned = [record(i, [0.25, 0.5], tuples=1000, plan_s=0.5) for i in range(4)]
    assert clock(planned, t, b, interval).sustainable_rate_tuples_per_s == pytest.approx(1000.0)


def test_overloaded_run_delivers_less_than_the_input_rate():
    interval = 1.0
    t, b = arrivals(5, 1000, interval)
    recs = [record(i, [2.0], tuples=1000) for i in range(5)]
    run = clock(recs, t, b, interval)
    assert run.sustainable_rate_tuples_per_s == pytest.approx(500.0)
    assert run.throughput_tuples_per_s < 1000 * 0.6
    assert run.schedule.queueing_s[-1] == pytest.approx(4.0)


def test_no_batches_is_refused():
    with pytest.raises(ValueError, match="batches"):
        clock([], np.zeros(0), np.zeros(0, dtype=np.int64), 1.0)


def test_cpu_split_communication_processing_idle():
    """Paper 001 Fig. 6's split from hand-made batches: routing + receive is
    communication, the other node stages processing, and the nodes of the layout waiting
    for the slowest one idle (a node that received nothing is not in the layout)."""
    from balancebench.experiment import summarize
    from balancebench.spark.loop import BatchResult

    def batch(b: int, work: list[float], received: list[int], receive_s: float) -> BatchResult:
        n = len(work)
        return BatchResult(
            batch=b,
            input_tuples=10,
            node_received=np.array(received),
            node_run_time_s=np.array(work),
            node_state=np.zeros(n),
            result_rows=0,
            routing_table_entries=0,
            oracle_passed=True,
            node_cpu_time_s=np.array(work),
            route_work_s=0.5,
            senders=2,
            extra={"node_work_receive_s": receive_s},
        )

    batches = [batch(0, [1.0, 3.0, 0.0], [5, 5, 0], 0.4), batch(1, [2.0, 2.0, 0.0], [5, 5, 0], 1.0)]
    out = summarize(batches, np.arange(20.0) / 20, np.repeat([0, 1], 10), 1.0)
    assert out["cpu_communication_s_total"] == pytest.approx(0.5 + 0.5 + 0.4 + 1.0)
    assert out["cpu_processing_s_total"] == pytest.approx(4.0 + 4.0 - 1.4)
    # Batch 0: 2 nodes x 3 s - 4 s = 2 s waiting; batch 1: balanced, 0.
    assert out["cpu_idle_s_total"] == pytest.approx(2.0)
