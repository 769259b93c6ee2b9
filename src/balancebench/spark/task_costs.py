"""Per-task costs for the scheduling model (paper 002), measured by really running each
WordCount task on Spark once.

The ``tasks`` dataset cuts a text into tasks of different sizes (``text.task_id``). Each
task's WordCount (split on whitespace, count per word, collect) runs as its own Spark job
on this session; its cost is the summed ``executorCpuTime`` of the job's tasks, read
from Spark's REST API like the engine's node times (CPU time, because on a few shared
cores a task's wall time is mostly waiting). The scheduling model then scales the cost by
node capacity (``time[i][j] = cost_i / capacity_j``, paper 002).

Every task is measured ``repeats`` times after one untimed warm-up job, and the median is
kept; the measured seconds go to MLflow (param ``scheduling_task_costs_s`` on every child)
so a result can be traced to its inputs.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from balancebench.generators.common import load_manifest
from balancebench.spark.task_metrics import TaskMetricsReader


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


def measure_wordcount_costs(
    spark: SparkSession, dataset_dir: str | Path, repeats: int = 3
) -> list[float]:
    """Median CPU seconds of each task's WordCount job, in ``task_id`` order."""
    manifest = load_manifest(dataset_dir)
    files = [str(Path(dataset_dir) / f) for f in manifest.table_files("text")]
    text = spark.read.parquet(*files).select("task_id", "line")
    text = text.cache()
    task_ids = sorted(r.task_id for r in text.select("task_id").distinct().collect())
    sc = spark.sparkContext
    reader = TaskMetricsReader(sc)
    _wordcount(text, task_ids[0])  # warm-up: code generation and first-use costs
    costs = []
    for task_id in task_ids:
        samples = []
        for _ in range(repeats):
            group = f"task-cost-{task_id}-{uuid.uuid4().hex[:8]}"
            sc.setJobGroup(group, f"wordcount task {task_id}")
            try:
                _wordcount(text, task_id)
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)
            samples.append(reader.job_group_cpu_time_s(group))
        costs.append(float(np.median(samples)))
    text.unpersist()
    return costs
