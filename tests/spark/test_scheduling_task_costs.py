"""Scheduling model inputs measured on Spark: one WordCount job per task."""

from __future__ import annotations

import pytest

from balancebench.generators import generate
from balancebench.state.paths import datasets_dir

pytestmark = pytest.mark.slow


def test_every_task_gets_a_measured_cpu_cost(spark):
    from balancebench.spark.scheduling_task_costs import measure_wordcount_costs_detail

    # Given 3 WordCount tasks of very different sizes
    folder, _ = generate(
        "tasks", datasets_dir(), {"tasks_total_words": 60_000, "tasks_sizes": [1, 1, 20]}
    )
    # When each task's WordCount runs on Spark
    costs = measure_wordcount_costs_detail(spark, folder, repeats=1)["task_costs_s"]
    # Then each has a positive CPU time, in task order, and the 20x task costs the most
    assert len(costs) == 3
    assert all(c > 0 for c in costs)
    assert costs[2] == max(costs)
