"""SparkSession settings every balancebench job needs.

- Adaptive execution is off: AQE would coalesce or split the shuffle partitions, and
  the executor relies on partition ``i`` being node ``i`` exactly.
- The UI stays on (its REST API is where per-task run times come from) but without
  the console progress bar.
"""

from __future__ import annotations

import logging
import os
import sys

from pyspark.sql import SparkSession

from balancebench.spark import jvm_routing
from balancebench.state.environment import setting
from balancebench.state.paths import local_dir

BASE_CONF = {
    "spark.sql.adaptive.enabled": "false",
    # Merges, TOPK and the oracle shuffle little data: 200 partitions would be pure overhead.
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "true",
    # Per-task metrics come from the UI store: keep every job and stage of a long run
    # (defaults 1000 evict recent skipped stages first).
    "spark.ui.retainedJobs": "100000",
    "spark.ui.retainedStages": "100000",
    "spark.ui.retainedTasks": "10000000",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Per-sender routing (pkg & co.) ships each sender's tuples to its Python worker in
    # Arrow batches: fewer, larger batches cost the JVM less per tuple (measured on 1M
    # tuples: 10k rows per batch 405 ns, 100k rows 359 ns of routing CPU per tuple).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    # Columnar caches (load_replay's persisted input stream and batch frames): uncompressed
    # columns are cheaper to build (measured when the engine still cached its routed rows
    # this way: 1.2 -> 0.55 s CPU per node; it now keeps them with localCheckpoint).
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.sql.session.timeZone": "UTC",
    # Generated classes are cached by their source; at Spark's default of 100 entries a
    # batch's phases (route, operator, compact, migration, the oracle, statistics: about
    # 100 classes for a planner on a join) evicted the previous batch's, so every node
    # stage compiled anew and its first tasks ran the fresh classes interpreted (nodes 0
    # and 1 on 2 cores worked 1.5-2.5x the others). Static: read when the JVM starts.
    "spark.sql.codegen.cache.maxEntries": "4096",
    # Event logs (in .local/spark-events) are plain JSON so a finished run can be
    # inspected or re-measured after its REST API is gone.
    "spark.eventLog.compress": "false",
    "spark.eventLog.rolling.enabled": "false",
}


def get_session(app_name: str, master: str | None = None, conf: dict | None = None) -> SparkSession:
    """A session with :data:`BASE_CONF`; ``master`` only when not set by ``spark-submit``."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers (per-tuple routing) import balancebench: use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    events = local_dir() / "spark-events"
    events.mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder.appName(app_name)
    # The driver is the executor in local mode; 1g (Spark's default) caches millions of
    # routed rows under GC churn. Only when this process starts the JVM: under
    # spark-submit (its JVM already up, its gateway's port in PYSPARK_GATEWAY_PORT) the
    # heap is the DAG's --driver-memory, and another value written here would only show
    # in the application's environment (its event log, its UI) as a heap it does not have.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.config("spark.driver.memory", setting("BALANCEBENCH_DRIVER_MEMORY"))
    builder = builder.config("spark.eventLog.enabled", "true")
    builder = builder.config("spark.eventLog.dir", events.as_uri())
    if master:
        builder = builder.master(master)
    # The per-sender router's jar (pkg & co. route in the JVM), when make setup built it.
    for key, value in {**jvm_routing.spark_conf(), **BASE_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # Releasing a local checkpoint warns that its lineage is gone, once per RDD: the
    # engine releases its state every batch, by design.
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.rdd.MapPartitionsRDD", jvm.org.apache.logging.log4j.Level.ERROR
    )
    return spark
