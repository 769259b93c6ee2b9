"""Per-task costs for the scheduling model (paper 002), measured by really running each
WordCount task on Spark once.

The ``tasks`` dataset cuts a text into tasks of different sizes (``text.task_id``). Each
task's WordCount (split on whitespace, count per word, collect) runs as its own Spark job
on this session; its cost is the summed ``executorCpuTime`` of the job's tasks, read
from Spark's REST API like the engine's node times (CPU time, because on a few shared
cores a task's wall time is mostly waiting). The scheduling model then scales the cost by
node capacity (``time[i][j] = cost_i / capacity_j``, paper 002).

Every task is measured ``repeats`` times after one untimed warm-up job, and the median is
kept. A job costs something even for no words (scanning the cached text, the shuffle's
tasks), so the same job on a task id that matches nothing is measured too and its median
subtracted: ``cost_i = median(job_i) - median(empty job)``, floored at 1 microsecond (a
task too small to measure). Both the costs and the subtracted overhead go to MLflow (param
``scheduling_task_costs_s`` on every child, ``measured_inputs.json`` on the parent), so a
result can be traced to its inputs.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from balancebench.generators.common import load_manifest
from balancebench.spark.rest_task_metrics import TaskMetricsReader


def _wordcount(text, task_id: int) -> list:
    words = F.explode(F.split(F.col("line"), r"\s+")).alias("word")
    return (
        text.where(F.col("task_id") == task_id)
        .select(words)
        .where(F.col("word") != "")
        .groupBy("word")
        .count()
        .collect()
    )


def measure_wordcount_costs_detail(
    spark: SparkSession, dataset_dir: str | Path, repeats: int = 3
) -> dict[str, list[float] | float]:
    """``task_costs_s`` plus what went into them: the raw medians per task and the
    median CPU seconds of the empty job (``job_overhead_s``)."""
    manifest = load_manifest(dataset_dir)
    files = [str(Path(dataset_dir) / f) for f in manifest.table_files("text")]
    text = spark.read.parquet(*files).select("task_id", "line").cache()
    task_ids = sorted(r.task_id for r in text.select("task_id").distinct().collect())
    sc = spark.sparkContext
    reader = TaskMetricsReader(sc)
    _wordcount(text, task_ids[0])  # warm-up: code generation and first-use costs

    def median_cpu_s(task_id: int) -> float:
        samples = []
        for _ in range(repeats):
            group = f"task-cost-{task_id}-{uuid.uuid4().hex[:8]}"
            sc.setJobGroup(group, f"wordcount task {task_id}")
            try:
                _wordcount(text, task_id)
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)
            samples.append(reader.job_group_cpu_time_s(group))
        return float(np.median(samples))

    overhead = median_cpu_s(-1)  # no task has id -1: the job's cost for no words
    raw = [median_cpu_s(t) for t in task_ids]
    text.unpersist()
    return {
        "task_costs_s": [max(r - overhead, 1e-6) for r in raw],
        "job_cpu_s": raw,
        "job_overhead_s": overhead,
    }
