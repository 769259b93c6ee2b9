"""How the measured tasks' wait for a core is read from Spark's task metrics
(``rest_task_metrics.core_wait_s``): per node for a node stage, per task for routing."""

from __future__ import annotations

import pytest

from balancebench.spark.rest_task_metrics import GroupWork, add_node_stage, core_wait_s


def _tasks(cpu_s: list[float]) -> list[dict]:
    """Task records as Spark's REST API gives them (the fields the reader uses)."""
    return [
        {
            "index": i,
            "partitionId": i,
            "taskMetrics": {
                "executorCpuTime": int(c * 1e9),
                "executorRunTime": int(c * 1e3),
                "shuffleReadMetrics": {"recordsRead": 1},
                "inputMetrics": {"recordsRead": 0},
            },
        }
        for i, c in enumerate(cpu_s)
    ]


def test_eight_equal_nodes_on_two_cores_wait_three_node_times():
    # Given 8 nodes' tasks of 10 ms each on 2 cores: the stage takes 40 ms here, 10 ms on a
    # cluster of one core per node
    work = GroupWork(8, cores=2)
    add_node_stage(work, _tasks([0.01] * 8))
    assert work.core_wait_s == pytest.approx(0.03)


def test_a_node_stage_waits_by_node_not_by_task():
    # Given 2 tasks per node (partition j on node j mod 4): node 0's two tasks take 0.3 s
    # each, the others' 0.1 s. Node 0 runs its own tasks one after another on a cluster
    # too (0.6 s), as long as the stage's 1.2 s of CPU spread over 2 cores: no wait. Per
    # task (longest 0.3 s) it would be 0.3 s.
    work = GroupWork(4, cores=2)
    add_node_stage(work, _tasks([0.3, 0.1, 0.1, 0.1, 0.3, 0.1, 0.1, 0.1]))
    assert work.core_wait_s == pytest.approx(0.0)
    assert work.node_cpu_s.tolist() == pytest.approx([0.6, 0.2, 0.2, 0.2])


def test_no_wait_where_there_are_cores_for_every_task():
    assert core_wait_s([0.2, 0.1], cores=2) == 0.0
    assert core_wait_s([], cores=2) == 0.0
