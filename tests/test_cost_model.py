"""The cost model (``metrics.clock``) on hand-made batch records: what it charges, what it
leaves to the harness, and the three throughput figures."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from balancebench.core.cost_model import BatchCosts, attribute_migration, clock, fit_node_work


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


def test_migration_is_the_slowest_involved_node_with_its_cpu_and_link_at_once():
    # Node 0 sends 50 MB and works 0.1 s; node 2 receives 25 MB and works 0.3 s.
    r = record(
        0,
        [0.1, 0.1, 0.1],
        migration_work_s=np.array([0.1, 0.0, 0.3]),
        migration_sent_bytes=np.array([50e6, 0.0, 0.0]),
        migration_received_bytes=np.array([0.0, 0.0, 25e6]),
    )
    # 125 MB/s: node 0 = max(0.1, 0.4), its link decides; node 2 = max(0.3, 0.2), its CPU
    assert r.migration_transfer_s.tolist() == pytest.approx([0.4, 0.0, 0.2])
    assert r.node_migration_s.tolist() == pytest.approx([0.4, 0.0, 0.3])
    assert r.migration_s == pytest.approx(0.4)
    assert r.migration_bytes == pytest.approx(50e6)
    # inside the batch: node 0 = max(0.1 + 0.1, 0.4), node 2 = max(0.1 + 0.3, 0.2)
    assert r.service_s == pytest.approx(0.4)
    # a CPU-only model charges no transfer
    cpu_only = replace(r, bandwidth_mb_per_s=None)
    assert cpu_only.migration_s == pytest.approx(0.3)
    assert cpu_only.service_s == pytest.approx(0.4)  # node 2: 0.1 + 0.3


def test_doubling_the_bytes_moved_doubles_the_transfer_part():
    sent = np.array([10e6, 0.0, 4e6])
    received = np.array([0.0, 14e6, 0.0])
    work = np.array([0.05, 0.02, 0.01])
    for bw in (125.0, 12.5):
        once = record(
            0,
            [0.1] * 3,
            migration_work_s=work,
            migration_sent_bytes=sent,
            migration_received_bytes=received,
            bandwidth_mb_per_s=bw,
        )
        twice = record(
            0,
            [0.1] * 3,
            migration_work_s=work,
            migration_sent_bytes=2 * sent,
            migration_received_bytes=2 * received,
            bandwidth_mb_per_s=bw,
        )
        assert twice.migration_transfer_s == pytest.approx(2 * once.migration_transfer_s)
        # the links decide here (14 MB at 125 MB/s = 0.112 s > 0.05 s of CPU): the
        # migration's charge doubles with its bytes
        assert once.migration_s == pytest.approx(once.migration_transfer_s.max())
        assert twice.migration_s == pytest.approx(2 * once.migration_s)


def test_the_tuples_cross_the_links_a_node_is_as_slow_as_its_cpu_or_its_link():
    # 3 nodes work 0.1, 0.2, 0.1 s of CPU; node 0 receives 25 MB of tuples, the others 5 MB;
    # 4 senders route 0.4 s of CPU together and write 40 MB
    r = record(
        0,
        [0.1, 0.2, 0.1],
        route_work_s=0.4,
        senders=4,
        received_bytes=np.array([25e6, 5e6, 5e6]),
        sent_bytes=40e6,
    )
    # At 1 GbE (125 MB/s) a sender's 10 MB take 0.08 s < its 0.1 s of CPU; node 0's
    # link takes 0.2 s, as long as node 1's CPU
    assert r.routing_transfer_s == pytest.approx(0.08)
    assert r.routing_s == pytest.approx(0.1)
    assert r.node_transfer_s.tolist() == pytest.approx([0.2, 0.04, 0.04])
    assert r.service_s == pytest.approx(0.1 + 0.2)
    # At 100 Mb/s (12.5 MB/s) the links decide: a sender 0.8 s, node 0 2.0 s
    slow = replace(r, bandwidth_mb_per_s=12.5)
    assert slow.routing_s == pytest.approx(0.8)
    assert slow.service_s == pytest.approx(0.8 + 2.0)
    # A CPU-only model and a runner that measured no bytes charge the CPU alone
    assert replace(r, bandwidth_mb_per_s=None).service_s == pytest.approx(0.1 + 0.2)
    assert record(0, [0.1, 0.2, 0.1], route_work_s=0.4, senders=4).service_s == pytest.approx(0.3)
    # A migration's rows share node 0's inbound link with the tuples
    moving = replace(
        slow,
        migration_work_s=np.array([0.0, 0.0, 0.0]),
        migration_received_bytes=np.array([5e6, 0.0, 0.0]),
        migration_sent_bytes=np.array([0.0, 0.0, 5e6]),
    )
    assert moving.node_transfer_s.tolist() == pytest.approx([2.4, 0.4, 0.4])


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


def test_the_plan_delays_the_next_batch_and_a_migration_lengthens_its_own():
    interval = 1.0
    t, b = arrivals(2, 10, interval)
    r0 = record(0, [0.5, 0.5], plan_s=0.2)
    # the migration after batch 0 rides batch 1: 0.3 s of CPU on node 1
    r1 = record(
        1,
        [0.9, 0.4],
        migration_work_s=np.array([0.0, 0.3]),
        migration_sent_bytes=np.array([0.0, 0.0]),
    )
    run = clock([r0, r1], t, b, interval)
    # batch 0 ends at 1.0 + 0.5; batch 1 closes at 2.0 (the plan is ready at 1.7) and
    # lasts max(0.9, 0.4 + 0.3): the migration lands on a node that is not the slowest
    assert run.schedule.end_s.tolist() == pytest.approx([1.5, 2.9])
    assert run.delay_s.tolist() == pytest.approx([0.2, 0.0])
    assert run.migration_s.tolist() == pytest.approx([0.0, 0.3])
    # on the slowest node it adds to the batch
    r1_slow = record(1, [0.9, 0.4], migration_work_s=np.array([0.3, 0.0]))
    assert clock([r0, r1_slow], t, b, interval).schedule.end_s[1] == pytest.approx(3.2)


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
    """Paper 001 Fig. 6's split from hand-made batches: routing is communication, the
    node stages processing, and the nodes of the layout waiting for the slowest one idle
    (a node that received nothing is not in the layout)."""
    from balancebench.experiment.run_log import summarize
    from balancebench.spark.loop import BatchResult

    def batch(b: int, work: list[float], received: list[int]) -> BatchResult:
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
        )

    batches = [batch(0, [1.0, 3.0, 0.0], [5, 5, 0]), batch(1, [2.0, 2.0, 0.0], [5, 5, 0])]
    out = summarize(batches, np.arange(20.0) / 20, np.repeat([0, 1], 10), 1.0)
    assert out["cpu_communication_s_total"] == pytest.approx(0.5 + 0.5)
    assert out["cpu_processing_s_total"] == pytest.approx(4.0 + 4.0)
    # Batch 0: 2 nodes x 3 s - 4 s = 2 s waiting; batch 1: balanced, 0.
    assert out["cpu_idle_s_total"] == pytest.approx(2.0)


def test_a_migration_of_nothing_costs_nothing():
    # Given a batch in which no row moved (the exchange's extra tasks wrote nothing)
    n = 3
    migration, node = attribute_migration(
        node_cpu_s=np.array([0.2, 0.3, 0.1]),
        stage_cpu_s=np.array([0.2, 0.3, 0.1]),
        stage_records=np.array([1000, 1500, 500]),
        fixed_s=0.01,
        moved_in_rows=np.zeros(n),
        extract_cpu_s=np.zeros(n),
        extract_rows=np.zeros(n),
        extract_bytes=np.zeros(n),
        send_cpu_per_row_s=1e-6,
    )
    # Then nothing is charged and the nodes keep their whole work
    assert migration.work_s.tolist() == [0.0] * n
    assert record(0, node.tolist(), migration_work_s=migration.work_s).migration_s == 0.0
    assert node.tolist() == pytest.approx([0.2, 0.3, 0.1])


def test_moving_twice_the_rows_costs_more_and_the_scan_is_not_charged():
    def moved(rows: float) -> tuple:
        # node 0 sends `rows` rows to node 2; its extra map task also scanned its state
        return attribute_migration(
            node_cpu_s=np.array([0.2, 0.3, 0.1 + 2e-6 * rows]),
            stage_cpu_s=np.array([0.2, 0.3, 0.1 + 2e-6 * rows]),
            stage_records=np.array([100_000, 150_000, 50_000 + rows]),
            fixed_s=0.01,
            moved_in_rows=np.array([0.0, 0.0, rows]),
            extract_cpu_s=np.array([0.004 + 1e-6 * rows, 0.004, 0.004]),
            extract_rows=np.array([rows, 0.0, 0.0]),
            extract_bytes=np.array([40.0 * rows, 0.0, 0.0]),
            send_cpu_per_row_s=1e-6,
        )

    (once, node_once), (twice, node_twice) = moved(5_000), moved(10_000)
    # sending: the senders' 1 us per row written; receiving: node 2's CPU per row read
    assert once.work_s[0] == pytest.approx(5_000e-6)
    assert twice.work_s[0] == pytest.approx(2 * once.work_s[0])
    per_row = (0.1 + 2e-6 * 5_000 - 0.01) / 55_000
    assert once.work_s[2] == pytest.approx(per_row * 5_000)
    assert twice.work_s[2] > 1.8 * once.work_s[2]
    assert once.received_bytes[2] > 0
    assert twice.received_bytes[2] == pytest.approx(2 * once.received_bytes[2])
    # the receiving node's own work is what is left once the moved rows are taken off
    assert node_once[2] == pytest.approx(0.1 + 2e-6 * 5_000 - once.work_s[2])
    # the extra tasks' scan of the state (0.004 s each) is reported, not charged
    assert once.extract_s == pytest.approx(3 * 0.004)
    assert twice.extract_s == pytest.approx(once.extract_s)
    costs = [
        record(
            0,
            n.tolist(),
            migration_work_s=m.work_s,
            migration_sent_bytes=m.sent_bytes,
            migration_received_bytes=m.received_bytes,
        )
        for m, n in ((once, node_once), (twice, node_twice))
    ]
    assert costs[1].migration_s > costs[0].migration_s > 0


def test_node_work_fit():
    received = np.array([[100, 200, 300], [400, 500, 600]])
    work = 0.005 + 2e-6 * received
    intercept, slope, r2, residual = fit_node_work(received, work)
    assert intercept == pytest.approx(0.005) and slope == pytest.approx(2e-6)
    assert r2 == pytest.approx(1.0) and residual == pytest.approx(0.0, abs=1e-12)
    noisy = work + np.array([[0.0, 1e-4, -1e-4], [5e-5, 0.0, -2e-5]])
    assert 0.5 < fit_node_work(received, noisy)[2] < 1.0
    # Balanced nodes (equal tuples): nothing for tuples to explain; the residual shows
    # the noise
    even = np.full((2, 3), 1000)
    work = 0.005 + 2e-6 * even + np.array([[1e-3, -1e-3, 0.0], [0.0, 5e-4, -5e-4]])
    _, _, r2, residual = fit_node_work(even, work)
    assert np.isnan(r2) and residual == pytest.approx(np.sqrt(2.5e-6 / 6), rel=0.01)
