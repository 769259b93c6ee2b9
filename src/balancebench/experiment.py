"""One strategy's run inside a Spark application, logged as an MLflow child run.

Called by ``spark_apps/run_workload.py`` (the ``spark-submit`` entry point). Measures
the TOPK replay (``spark.topk``), derives the latency/throughput figures from the
measured batch times (``replay``), logs everything with the units and definitions of
``metrics.METRIC_DEFINITIONS``, and writes a JSON summary to ``.local/results``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from balancebench import replay, tracking
from balancebench.generators import load_manifest
from balancebench.params import validate_params
from balancebench.paths import results_dir
from balancebench.strategies import get_strategy, strategy_settings

WORKLOAD = "topk"
WORKLOAD_OPERATOR = "aggregate"


@dataclass(frozen=True)
class RunSpec:
    """Everything a strategy run needs; serialised into the spark-submit arguments."""

    dataset_dir: str
    strategy: str
    params: dict[str, Any]
    parent_run_id: str | None = None
    dag_id: str = ""
    dag_run_id: str = ""
    #: Where the JSON summary goes (default ``.local/results/<parent run>/<strategy>.json``).
    result_path: str | None = None

    def to_args(self) -> list[str]:
        return ["--spec", json.dumps(self.__dict__, sort_keys=True)]

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))


def stream_rate(files: list[str]) -> float:
    """Mean input rate of a stream (tuples / span of event time), measured from the data:
    user files have no rate Param."""
    times = pq.ParquetDataset(files).read(columns=["event_time_s"]).column(0)
    import pyarrow.compute as pc

    span = float(pc.max(times).as_py() or 0.0)
    return len(times) / span if span > 0 else float(len(times))


def summarize(
    batches: list[Any], event_time_s: np.ndarray, batch_of: np.ndarray, interval_s: float
) -> dict[str, float]:
    """Run-level metrics from the measured batches (definitions in ``metrics``)."""
    service = np.array([b.makespan_s for b in batches])
    plan_ms = np.array([b.plan.plan_time_ms for b in batches if b.plan is not None])
    plan_delay = np.array([b.plan.plan_time_ms / 1e3 if b.plan else 0.0 for b in batches])
    last_arrival = np.array([event_time_s[batch_of == b.batch].max(initial=0.0) for b in batches])
    sched = replay.schedule(last_arrival, interval_s, service, plan_delay)
    lat = replay.latency_percentiles(event_time_s, batch_of, sched.end_s, (50.0, 99.0))
    imb = np.array([b.imbalance_max_over_mean for b in batches])
    ratio = np.array([b.makespan_s / b.ideal_makespan_s for b in batches])
    migrated = [b.plan.migrated_state_tuples for b in batches if b.plan is not None]
    tuples = sum(b.tuples for b in batches)
    return {
        "plan_time_ms_mean": float(plan_ms.mean()) if len(plan_ms) else 0.0,
        "plan_time_ms_max": float(plan_ms.max()) if len(plan_ms) else 0.0,
        "imbalance_max_over_mean_mean": float(imb.mean()),
        "imbalance_max_over_mean_max": float(imb.max()),
        "makespan_s_total": float(service.sum()),
        "makespan_over_ideal_mean": float(ratio.mean()),
        "routing_table_entries_max": float(max(b.routing_table_entries for b in batches)),
        "migrated_tuples_total": float(sum(migrated)),
        "latency_p50_s": lat[50.0],
        "latency_p99_s": lat[99.0],
        "throughput_tuples_per_s": tuples / float(service.sum()) if service.sum() > 0 else 0.0,
        "backlog_s_max": float(sched.queueing_s.max()),
    }


def batch_metrics(result: Any) -> dict[str, float]:
    out = {
        "batch_tuples": float(result.tuples),
        "imbalance_max_over_mean": result.imbalance_max_over_mean,
        "makespan_s": result.makespan_s,
        "ideal_makespan_s": result.ideal_makespan_s,
        "makespan_over_ideal": result.makespan_s / result.ideal_makespan_s,
        "routing_table_entries": float(result.routing_table_entries),
        "batch_wall_s": result.wall_s,
    }
    if result.plan is not None:
        out["plan_time_ms"] = result.plan.plan_time_ms
        out["migrated_tuples"] = result.plan.migrated_state_tuples
        out["split_keys"] = float(result.plan.split_keys)
        out["plan_reached_tolerance"] = 1.0 if result.plan.reached_tolerance else 0.0
    return out


def run_strategy(spec: RunSpec, master: str | None = None) -> dict[str, Any]:
    """Replay the dataset under one strategy in this process's Spark application."""
    params = validate_params(spec.params)
    if spec.strategy not in params["strategies"]:
        raise ValueError(
            f"strategy: {spec.strategy!r} is not in params.strategies {params['strategies']}"
        )
    strategy = get_strategy(
        spec.strategy, n_nodes=params["n_nodes"], **strategy_settings(spec.strategy, params)
    )
    if WORKLOAD_OPERATOR not in strategy.operators:
        raise ValueError(
            f"strategy: {spec.strategy!r} cannot serve the {WORKLOAD} workload "
            f"(operator {WORKLOAD_OPERATOR!r}; it serves {sorted(strategy.operators)})"
        )
    manifest = load_manifest(spec.dataset_dir)
    files = [str(Path(spec.dataset_dir) / f) for f in manifest.table_files()]
    interval_s = replay.batch_interval_s(
        manifest.row_count, stream_rate(files), params["n_batches"]
    )

    # Imports that start the JVM or MLflow only once the inputs are known to be good.
    from balancebench.spark.session import get_session
    from balancebench.spark.topk import load_stream, run_topk

    mlflow = tracking._mlflow()
    spark = get_session(f"balancebench-{WORKLOAD}-{spec.strategy}", master=master)
    sc = spark.sparkContext
    experiment_id = tracking.ensure_experiment(params["experiment"])
    run_params = {
        **tracking.flat_params(params),
        "strategy": spec.strategy,
        "workload": WORKLOAD,
        "dataset_digest": manifest.digest,
        "dataset_dir": spec.dataset_dir,
        "git_commit": tracking.git_commit(),
        "spark_master": sc.master,
        "spark_default_parallelism": str(sc.defaultParallelism),
        **tracking.library_versions(),
        **{f"strategy.{k}": str(v) for k, v in strategy.params().items()},
    }
    tags = {
        tracking.ROLE_TAG: "child",
        "airflow.dag_id": spec.dag_id,
        "airflow.run_id": spec.dag_run_id,
        "strategy_reference": strategy.reference,
    }
    with mlflow.start_run(
        experiment_id=experiment_id,
        run_name=spec.strategy,
        parent_run_id=spec.parent_run_id,
        tags=tags,
    ) as active:
        mlflow.log_params(run_params)
        tracking.log_metric_definitions(active.info.run_id)
        stream = load_stream(spark, files, interval_s, params["n_batches"])
        stream = stream.repartition(sc.defaultParallelism).cache()
        stream.count()
        # Warm-up: one untimed batch so JIT and first-use costs do not land on batch 0.
        run_topk(
            spark,
            stream,
            get_strategy("hash"),
            n_nodes=params["n_nodes"],
            n_batches=1,
            tolerance=params["tolerance"],
            top_k=params["top_k"],
        )
        started = time.perf_counter()
        try:
            run = run_topk(
                spark,
                stream,
                strategy,
                n_nodes=params["n_nodes"],
                n_batches=params["n_batches"],
                tolerance=params["tolerance"],
                top_k=params["top_k"],
                on_batch=lambda r: mlflow.log_metrics(batch_metrics(r), step=r.batch),
            )
        except AssertionError:
            mlflow.log_metric("oracle_passed", 0.0)
            raise
        wall_s = time.perf_counter() - started
        times = pq.ParquetDataset(files).read(columns=["event_time_s"]).column(0).to_numpy()
        batch_of = replay.batch_index(times, interval_s, params["n_batches"])
        summary = {
            **summarize(run.batches, times, batch_of, interval_s),
            "wall_s": wall_s,
            "oracle_passed": 1.0,
        }
        mlflow.log_metrics(summary)
        record = {
            "run_id": active.info.run_id,
            "strategy": spec.strategy,
            "spark_master": sc.master,
            "summary": summary,
            "node_tuples": [b.node_tuples.tolist() for b in run.batches],
            "topk": [b.topk for b in run.batches],
        }
        out = (
            Path(spec.result_path)
            if spec.result_path
            else (results_dir() / (spec.parent_run_id or "no-parent") / f"{spec.strategy}.json")
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2))
        mlflow.log_artifact(str(out))
    spark.stop()
    return record
