"""Strategy runs in paired, rotated rounds inside one Spark application, each run logged
as an MLflow run.

Called by ``spark_apps/run_workload.py`` (the ``spark-submit`` entry point) with the cell
groups of one application (:func:`run_groups`): ``balance_experiment``'s one group (its
strategies) or a sweep application's groups (the cells of one workload and node count
that differ only in the strategy). Each group runs in rounds until its verdicts are
decided or its budget ends (``balancebench.rounds``). It builds each dataset's replay
stream (``balancebench.streams``) and loads it once; runs each strategy through its
runner (``spark.runners``: the micro-batch engine under the strategy's router, or a
Spark-native baseline); derives latency and throughput from the measured batches under
the cost model (``metric_definitions.clock``); logs everything with the units and definitions of
``metric_definitions.METRIC_DEFINITIONS``; and writes a JSON summary per run to ``.local/results``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow.parquet as pq

from balancebench import metric_definitions, reaper, replay, tracking
from balancebench.compare import BATCH_PREFIX, headline_metrics, logged_name
from balancebench.experiment_params import ExperimentSpec, applicable_params
from balancebench.paths import results_dir
from balancebench.rounds import (
    RoundPolicy,
    Rounds,
    figure_words,
    run_rounds,
    verdict_lines,
)
from balancebench.strategies import get_strategy, strategy_kind, strategy_settings
from balancebench.streams import ReplayStream, build_stream


@dataclass(frozen=True)
class RunSpec:
    """Everything a strategy run needs: a cell group's cell (:class:`GroupSpec`, written to
    the groups file spark-submit reads) and, made from it, each of its rounds
    (:meth:`GroupSpec.round_spec`). Its ``params`` were checked at the door
    (:meth:`ExperimentSpec.checked`) and travel as their JSON form."""

    dataset_dir: str
    strategy: str
    params: ExperimentSpec
    parent_run_id: str | None = None
    dag_id: str = ""
    dag_run_id: str = ""
    #: Where the JSON summary goes (default ``.local/results/<parent run>/<strategy>.json``).
    result_path: str | None = None
    #: MLflow run name (default: the strategy) and extra tags (a sweep's cell, the round).
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: Timed runs of this DAG run allowed at once on the machine (logged as a param).
    concurrency: int = 1
    #: Test hook of the nightly sweep's regression check (``Strategy.extra_plan_work_ms``).
    plan_extra_work_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "params": self.params.to_json()}

    @classmethod
    def from_json(cls, data: str | dict[str, Any]) -> RunSpec:
        fields = json.loads(data) if isinstance(data, str) else dict(data)
        return cls(**{**fields, "params": ExperimentSpec.from_json(fields["params"])})


def event_times(stream: ReplayStream) -> np.ndarray:
    """Arrival time of every tuple of the replay stream (for latency)."""
    column = stream.columns["event_time_s"]
    table = pq.ParquetDataset(stream.files).read(columns=[column])
    return table.column(0).to_numpy()


def summarize(
    batches: list[Any],
    event_time_s: np.ndarray,
    batch_of: np.ndarray,
    interval_s: float,
    bandwidth_mb_per_s: float | None = metric_definitions.DEFAULT_BANDWIDTH_MB_PER_S,
) -> dict[str, float]:
    """Run-level metrics from the measured batches, under the cost model (definitions in
    ``metric_definitions``)."""
    costs = [b.costs(bandwidth_mb_per_s) for b in batches]
    run = metric_definitions.clock(costs, event_time_s, batch_of, interval_s)
    makespan = np.array([b.makespan_s for b in batches])
    plans = [b.plan for b in batches if b.plan is not None]
    plan_ms = np.array([p.plan_time_ms for p in plans])
    imb = np.array([b.imbalance_max_over_mean for b in batches])
    ratio = np.array(
        [b.makespan_s / b.ideal_makespan_s if b.ideal_makespan_s > 0 else 1.0 for b in batches]
    )
    tuples = sum(b.input_tuples for b in batches)
    received = sum(b.received_tuples for b in batches)
    nodes_used = max(b.nodes_used for b in batches)
    node_work_s = [float(b.node_work_s.sum()) for b in batches]
    _, per_tuple_s, r2, residual_s = metric_definitions.fit_node_work(
        np.array([b.node_received for b in batches]), np.array([b.node_work_s for b in batches])
    )
    # A scale-out's adjustment: the plan made after the batch nodes joined, and the
    # migration it caused, carried out in the next batch.
    adjustment = sum(
        costs[i].plan_s + (costs[i + 1].migration_s if i + 1 < len(costs) else 0.0)
        for i, b in enumerate(batches)
        if b.extra.get("scaled_out")
    )
    out = {
        "plan_time_ms_mean": float(plan_ms.mean()) if len(plan_ms) else 0.0,
        "plan_time_ms_max": float(plan_ms.max()) if len(plan_ms) else 0.0,
        "imbalance_max_over_mean_mean": float(imb.mean()),
        "imbalance_max_over_mean_max": float(imb.max()),
        "makespan_s_total": float(makespan.sum()),
        "makespan_wall_s_total": float(sum(b.makespan_wall_s for b in batches)),
        "makespan_over_ideal_mean": float(ratio.mean()),
        "route_s_total": float(sum(c.routing_s for c in costs)),
        "routing_table_entries_max": float(max(b.routing_table_entries for b in batches)),
        "migrated_tuples_total": float(sum(b.migrated_tuples for b in batches)),
        "migration_s_total": float(run.migration_s.sum()),
        "migration_bytes_total": float(sum(c.migration_bytes for c in costs)),
        "migration_extract_s_total": float(
            sum(b.migration.extract_s for b in batches if b.migration is not None)
        ),
        "harness_s_total": float(run.harness_s.sum()),
        "harness_core_wait_s_total": float(sum(c.harness_core_wait_s for c in costs)),
        "retried_stages_total": float(sum(b.extra.get("retried_stages", 0.0) for b in batches)),
        "scale_outs_total": float(sum(b.extra.get("scaled_out", 0.0) for b in batches)),
        "scale_out_adjustment_s_total": float(adjustment),
        "latency_p50_s": run.latency_s[50.0],
        "latency_p95_s": run.latency_s[95.0],
        "latency_p99_s": run.latency_s[99.0],
        "throughput_tuples_per_s": run.throughput_tuples_per_s,
        "capacity_tuples_per_s": run.capacity_tuples_per_s,
        "charged_s_total": run.charged_s_total,
        "sustainable_rate_tuples_per_s": run.sustainable_rate_tuples_per_s,
        "backlog_s_max": float(run.schedule.queueing_s.max()),
        "nodes_used_max": float(nodes_used),
        "avg_received_tuples_per_node_total": received / nodes_used if nodes_used else 0.0,
        "replication_factor_total": received / tuples if tuples else 0.0,
        "replicated_tuples_total": float(received - tuples),
        "state_tuples_max_node_max": float(max(b.node_state.max() for b in batches)),
        "result_rows_total": float(sum(b.result_rows for b in batches)),
        "input_tuples_total": float(tuples),
        "node_work_per_tuple_us": per_tuple_s * 1e6,
        "node_work_r2": r2,
        "node_work_residual_s": residual_s,
        "cpu_communication_s_total": float(sum(b.route_work_s for b in batches)),
        "cpu_processing_s_total": float(sum(node_work_s)),
        "cpu_idle_s_total": float(
            sum(b.nodes_used * b.makespan_s - w for b, w in zip(batches, node_work_s, strict=True))
        ),
    }
    fixed = batches[0].node_fixed_s
    if fixed is not None:
        out["node_fixed_s"] = float(fixed)
    return out


def batch_metrics(
    result: Any, bandwidth_mb_per_s: float | None = metric_definitions.DEFAULT_BANDWIDTH_MB_PER_S
) -> dict[str, float]:
    """The per-batch series (``step`` = batch index)."""
    costs = result.costs(bandwidth_mb_per_s)
    out = {
        "batch_tuples": float(result.input_tuples),
        "imbalance_max_over_mean": result.imbalance_max_over_mean,
        "makespan_s": result.makespan_s,
        "ideal_makespan_s": result.ideal_makespan_s,
        "makespan_wall_s": result.makespan_wall_s,
        "makespan_over_ideal": (
            result.makespan_s / result.ideal_makespan_s if result.ideal_makespan_s > 0 else 1.0
        ),
        "route_s": costs.routing_s,
        "route_cpu_s": costs.routing_cpu_s,
        "route_transfer_s": costs.routing_transfer_s,
        "sent_bytes": float(costs.sent_bytes),
        "received_bytes_max_node": float(np.max(costs.received_bytes, initial=0.0)),
        "node_transfer_s": float(np.max(costs.node_transfer_s, initial=0.0)),
        "service_s": costs.service_s,
        "routing_table_entries": float(result.routing_table_entries),
        "batch_wall_s": result.wall_s,
        "harness_s": costs.harness_s,
        "nodes_used": float(result.nodes_used),
        "avg_received_tuples_per_node": (
            result.received_tuples / result.nodes_used if result.nodes_used else 0.0
        ),
        "replication_factor": result.replication_factor,
        "replicated_tuples": float(result.received_tuples - result.input_tuples),
        "state_tuples_max_node": float(result.node_state.max()),
        "result_rows": float(result.result_rows),
        "migrated_tuples": float(result.migrated_tuples),
        "migration_s": costs.migration_s,
        "migration_transfer_s": float(costs.migration_transfer_s.max(initial=0.0)),
        "migration_bytes": costs.migration_bytes,
        **{k: float(v) for k, v in result.extra.items()},
    }
    if metric_definitions.CORE_WAIT in out:  # part of harness_s, as its definition says
        out[metric_definitions.CORE_WAIT] = costs.harness_core_wait_s
    if result.migration is not None:
        out["migration_extract_s"] = result.migration.extract_s
    if result.plan is not None:
        out["plan_time_ms"] = result.plan.plan_time_ms
        out["split_keys"] = float(result.plan.split_keys)
        out["plan_reached_tolerance"] = 1.0 if result.plan.reached_tolerance else 0.0
    return out


def reliable_state(choice: str, master: str) -> bool:
    """Param ``state_checkpoint``: 'auto' is reliable on a cluster, where one executor
    can be lost while the driver lives; in local mode the executor is the driver."""
    if choice == "auto":
        return not master.startswith("local")
    return choice == "reliable"


def execute(
    spark: Any,
    stream_df: Any,
    config: Any,
    strategy: Any,
    name: str,
    params: ExperimentSpec,
    on_batch: Any = None,
    harness_hook: Any = None,
) -> list[Any]:
    """Run one strategy on a loaded replay stream through its runner (``spark.runners``)."""
    from balancebench.spark.architecture_routers import ArchitectureRouter
    from balancebench.spark.runners import make_runner

    runner = make_runner(
        spark, stream_df, config, strategy, name, params.tolerance, on_batch, harness_hook
    )
    batches = runner.run()
    router = getattr(runner, "router", None)
    if on_batch is not None and isinstance(router, ArchitectureRouter):
        # What a join architecture actually used (grid shape, groups, subgroups).
        tracking.store().log_dict(router.info(), "layout.json")
    return batches


def fresh_strategy(name: str, params: ExperimentSpec) -> Any:
    """A new instance of strategy ``name`` with the Params' settings for it."""
    return get_strategy(name, n_nodes=params.n_nodes, **strategy_settings(name, params))


def warm_up(spark: Any, stream_df: Any, config: Any, name: str, params: ExperimentSpec) -> None:
    """``params.warmup_batches`` untimed batches under a fresh instance of strategy
    ``name``, so the JIT and first-use costs of its code paths (routing table, migration:
    2 batches) do not land on the measured batches that follow."""

    if params.warmup_batches:
        batches = min(params.warmup_batches, config.n_batches)
        warm = replace(config, n_batches=batches, warm_up=True)
        execute(spark, stream_df, warm, fresh_strategy(name, params), name, params)


def engine_config(params: ExperimentSpec, interval_s: float, master: str) -> Any:
    """The engine configuration of a run from its checked Params: the one place it is
    built (runs of the DAGs and of the benchmarks alike)."""
    from balancebench.spark.replay_stream import EngineConfig

    return EngineConfig(
        workload=params.workload,
        n_nodes=params.n_nodes,
        n_batches=params.n_batches,
        interval_s=interval_s,
        window_s=params.window_s,
        band_width=params.band_width,
        top_k=params.top_k,
        node_capacity_state_tuples=params.node_capacity_state_tuples,
        reliable_state=reliable_state(params.state_checkpoint, master),
    )


#: Params a run reads and its loaded dataset does not (the strategy, and the balance
#: tolerance its planner is given): runs that differ only in these share one load.
RUN_ONLY_PARAMS: Final[frozenset[str]] = frozenset({"strategies", "tolerance"})


def _loaded_params(params: ExperimentSpec) -> dict[str, Any]:
    """The Params a loaded dataset is made with: all but :data:`RUN_ONLY_PARAMS`."""
    return {k: v for k, v in params.to_json().items() if k not in RUN_ONLY_PARAMS}


class LoadedCell:
    """One dataset's replay stream loaded in a Spark session, and what every run of it
    needs (its engine configuration, the tuples' event times): the runs of a sweep's cell
    group (:func:`run_groups`) and of the side-by-side benchmarks are :meth:`run` calls on
    one loaded cell."""

    def __init__(
        self,
        spark: Any,
        params: ExperimentSpec,
        stream: ReplayStream | None = None,
        warmed: set[str] | None = None,
    ) -> None:
        from balancebench.spark.replay_stream import load_replay

        self.params = params
        if stream is None:  # the benchmarks: the Params' dataset, generated or reused
            from balancebench.generators import generate, generator_params
            from balancebench.paths import datasets_dir

            name = params.dataset
            folder, _ = generate(name, datasets_dir(), generator_params(name, params))
            stream = build_stream(params.workload.name, folder, params)
        self.stream = stream
        self.df, self.interval_s = load_replay(
            spark, self.stream, params.n_batches, params.n_senders
        )
        self.config = engine_config(params, self.interval_s, spark.sparkContext.master)
        self.times = event_times(self.stream)
        self.batch_of = replay.batch_index(self.times, self.interval_s, params.n_batches)
        #: The strategies already warmed up in this application (shared by the datasets
        #: an application loads in turn: the JIT's work is the application's).
        self.warmed: set[str] = set() if warmed is None else warmed

    def run(
        self,
        spark: Any,
        name: str,
        strategy: Any = None,
        on_batch: Callable[[Any], None] | None = None,
        params: ExperimentSpec | None = None,
    ) -> tuple[list[Any], dict[str, float]]:
        """Strategy ``name`` (``strategy``, or a fresh instance), warmed up
        (:func:`warm_up`) on its first run in this application, then measured: its
        batches and run summary (:func:`summarize`, with the measured batches' ``wall_s``
        and ``oracle_passed``). A later run of the same strategy finds its code paths
        compiled by the first (the position check shows what remains). ``params``: the
        run's own, where they differ from the cell's in :data:`RUN_ONLY_PARAMS` only."""
        if params is None:
            params = self.params
        elif _loaded_params(params) != _loaded_params(self.params):
            raise ValueError(
                "params: a run on a loaded dataset may differ from it only in "
                f"{sorted(RUN_ONLY_PARAMS)}"
            )
        if name not in self.warmed:
            warm_up(spark, self.df, self.config, name, params)
            self.warmed.add(name)
        strategy = strategy if strategy is not None else fresh_strategy(name, params)
        started = time.perf_counter()
        batches = execute(spark, self.df, self.config, strategy, name, params, on_batch)
        wall_s = time.perf_counter() - started
        summary = summarize(
            batches,
            self.times,
            self.batch_of,
            self.interval_s,
            params.network_bandwidth_mb_per_s,
        )
        summary["wall_s"] = wall_s
        summary["oracle_passed"] = float(all(b.oracle_passed for b in batches))
        return batches, summary

    def side_by_side(
        self,
        spark: Any,
        names: Sequence[str],
        policy: RoundPolicy,
        on_run: Callable[[int, str, int, dict[str, float]], None] | None = None,
        on_round: Callable[[Rounds], None] | None = None,
    ) -> Rounds:
        """The strategies ``names`` in rotated rounds on this loaded cell until ``policy``
        stops them (:func:`balancebench.rounds.run_rounds`): their run summaries per round
        and the verdicts against the baseline."""
        return run_rounds(names, lambda name, _: self.run(spark, name)[1], policy, on_run, on_round)

    def release(self) -> None:
        from balancebench.spark.replay_stream import release_replay

        release_replay(self.df)


def report_run(label: str = "") -> Callable[[int, str, int, dict[str, float]], None]:
    """A progress line per run of :meth:`LoadedCell.side_by_side`: the run, its round, the
    strategy, its capacity and p99 latency."""

    def report(i: int, name: str, r: int, summary: dict[str, float]) -> None:
        print(
            f"  {label}run {i} (round {r + 1}): {name}, capacity "
            f"{summary['capacity_tuples_per_s'] / 1e6:.2f}M/s, node service "
            f"{summary['makespan_s_total']:.3f} s, p99 {summary['latency_p99_s']:.2f} s",
            flush=True,
        )

    return report


def report_round(label: str = "") -> Callable[[Rounds], None]:
    """A progress line per round: the rounds done, the verdicts still open, and when the
    rounds stop, why and every verdict."""

    def report(rounds: Rounds) -> None:
        verdicts = rounds.verdicts()
        open_ = [f"{n} {figure_words(f)}" for (n, f), v in verdicts.items() if not v.decided]
        decided = len(verdicts) - len(open_)
        line = (
            f"{PROGRESS} {label}round {rounds.done} of {rounds.policy.min_rounds}-"
            f"{rounds.policy.max_rounds} done ({rounds.wall_s:.0f} s): {decided} of "
            f"{len(verdicts)} verdicts decided"
        )
        if open_ and not rounds.stopped:
            line += f"; open: {', '.join(open_)}"
        print(line, flush=True)
        if rounds.stopped:
            print(f"{PROGRESS} {label}rounds stopped: {rounds.stopped}", flush=True)
            for text in verdict_lines(rounds):
                print(f"{PROGRESS} {label}{text}", flush=True)

    return report


PROGRESS = "[balancebench progress]"
#: A run's position in its Spark application (1 = the first, which pays its first-use
#: costs).
RUN_INDEX_TAG = "balancebench.run_index"
#: A run's position among the runs on its loaded dataset (1 = the first after the load).
DATASET_RUN_INDEX_TAG = "balancebench.dataset_run_index"
#: The Spark application a sweep's run ran in (its Airflow task's name):
#: ``application k of K: ...``.
APPLICATION_TAG = "balancebench.application"
#: A round run's round (from 0) and its cell group.
ROUND_TAG, GROUP_TAG = "balancebench.round", "balancebench.group"
#: What a cell run says when its group's rounds ended: how many, and why they stopped.
ROUNDS_DONE_TAG, ROUNDS_STOPPED_TAG = "balancebench.rounds_done", "balancebench.rounds_stopped"
#: The prefix of the per-round figures logged on a cell run (``step`` = round).
ROUND_PREFIX = "round/"


def _log_batch(result: Any, label: str, n_batches: int, bandwidth_mb_per_s: float | None) -> None:
    """A measured batch: its series to MLflow and one progress line to the task log."""
    series = batch_metrics(result, bandwidth_mb_per_s)
    tracking.log_batch_metrics(
        {BATCH_PREFIX + name: value for name, value in series.items()}, result.batch
    )
    print(
        f"{PROGRESS} {label}: batch {result.batch + 1} of {n_batches} checked by the oracle; "
        f"{result.input_tuples} tuples, imbalance {result.imbalance_max_over_mean:.2f}, "
        f"service {series['service_s'] * 1e3:.0f} ms",
        flush=True,
    )


@contextlib.contextmanager
def _failure_tagged(mlflow: Any) -> Iterator[None]:
    """An exception inside the active run tags it with its cause (``balancebench.failure``)
    before ``mlflow.start_run`` closes it FAILED: a failed strategy run says why."""
    try:
        yield
    except Exception as exc:
        if not tracking.unreachable(exc):  # else nothing can be tagged
            with contextlib.suppress(Exception):  # the store may be what failed
                mlflow.set_tag(tracking.FAILURE_TAG, tracking.failure_cause(exc))
        raise


@dataclass(frozen=True)
class GroupSpec:
    """A cell group, run in rounds inside one Spark application (:func:`run_groups`):
    one :class:`RunSpec` per strategy, its *cell* (``parent_run_id`` is the cell's MLflow
    run, which every round's run is a child of), in the order of the first round; the
    rounds' policy; the folder the rounds' JSON records go to. Round ``r`` of a cell is
    :meth:`round_spec`."""

    label: str
    cells: tuple[RunSpec, ...]
    policy: RoundPolicy
    results_dir: str

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "cells": [c.to_json() for c in self.cells],
            "policy": self.policy.to_json(),
            "results_dir": self.results_dir,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSpec:
        return cls(
            data["label"],
            tuple(RunSpec.from_json(c) for c in data["cells"]),
            RoundPolicy.from_json(data["policy"]),
            data["results_dir"],
        )

    def round_spec(self, cell: RunSpec, r: int) -> RunSpec:
        """Round ``r`` (from 0) of ``cell``: its own record file, name and tags."""
        name = cell.run_name or cell.strategy
        record = f"{cell.parent_run_id or cell.strategy}-round{r + 1}.json"
        return replace(
            cell,
            result_path=str(Path(self.results_dir) / record),
            run_name=f"{name} · round {r + 1}",
            tags={
                **cell.tags,
                tracking.ROLE_TAG: "round",
                ROUND_TAG: str(r + 1),  # from 1, as the run's name
                GROUP_TAG: self.label,
            },
        )

    @staticmethod
    def write(groups: Sequence[GroupSpec], path: Path) -> list[str]:
        """The spark-submit arguments of groups that share one application: the groups go
        to a file (``path``), as Linux caps one argument at 128 KiB."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([g.to_json() for g in groups], sort_keys=True))
        return ["--groups-file", str(path)]

    @classmethod
    def read(cls, path: str) -> list[GroupSpec]:
        return [cls.from_json(g) for g in json.loads(Path(path).read_text())]


@dataclass(frozen=True)
class _Checked:
    """A run's spec, its strategy built (its Params were checked at the door)."""

    spec: RunSpec
    params: ExperimentSpec
    strategy: Any


def _check(spec: RunSpec) -> _Checked:
    params = spec.params
    if spec.strategy not in params.strategies:
        raise ValueError(
            f"strategy: {spec.strategy!r} is not in params.strategies {list(params.strategies)}"
        )
    strategy = fresh_strategy(spec.strategy, params)
    strategy.extra_plan_work_ms = spec.plan_extra_work_ms
    return _Checked(spec, params, strategy)


def _dataset_key(run: _Checked) -> tuple[str, str]:
    """What a loaded dataset is: the dataset and every Param but :data:`RUN_ONLY_PARAMS`."""
    params = _loaded_params(run.params)
    return run.spec.dataset_dir, json.dumps(params, sort_keys=True, default=str)


def _check_group(group: GroupSpec) -> list[_Checked]:
    """A group's cells at the door: every spec checked, one strategy each, one dataset."""
    if not group.cells:
        raise ValueError(f"group {group.label!r}: no cell; allowed: at least one RunSpec")
    runs = [_check(cell) for cell in group.cells]
    names = [r.spec.strategy for r in runs]
    if len(set(names)) != len(names):
        raise ValueError(f"group {group.label!r}: strategies {names} repeat; allowed: each once")
    if len({_dataset_key(r) for r in runs}) != 1:
        raise ValueError(
            f"group {group.label!r}: its cells differ in more than {sorted(RUN_ONLY_PARAMS)}; "
            "allowed: one loaded dataset per group"
        )
    return runs


def run_groups(groups: Sequence[GroupSpec], master: str | None = None) -> list[dict[str, Any]]:
    """The cell groups ``groups`` in one Spark application, one after another, each in
    rotated rounds until its policy stops them (:func:`balancebench.rounds.run_rounds`).
    Consecutive groups on the same dataset and Params (but :data:`RUN_ONLY_PARAMS`) share
    it, loaded once. Each run is warmed up (once per strategy and application), measured,
    checked by the oracle and logged as its own MLflow run (a child of its cell's run,
    tagged with its round and its position in the application and on its dataset); its
    headline figures also go on the cell's run as ``round/<figure>`` at ``step`` = round. A
    run's caches and checkpoints are released before the next (``Engine.close``), a
    dataset's before the next is loaded. A failed run drops its strategy from its group's
    later rounds and the others go on; a dataset that fails to load fails its group; the
    application then fails, naming the failed ones.

    What this application costs beyond its runs (JVM and session start, each dataset's load
    and event times) is printed apart as ``application setup`` and ``dataset load`` and
    charged to no run."""
    if not groups:
        raise ValueError("groups: none given; allowed: at least one GroupSpec")
    checked = [_check_group(g) for g in groups]  # every spec at the door, before the JVM
    keys = [_dataset_key(runs[0]) for runs in checked]
    streams: dict[int, ReplayStream] = {}
    for i, runs in enumerate(checked):
        if i == 0 or keys[i] != keys[i - 1]:
            first = runs[0]
            streams[i] = build_stream(
                first.params.workload.name, first.spec.dataset_dir, first.params
            )
    workloads = sorted({runs[0].params.workload.name for runs in checked})

    # Imports that start the JVM or MLflow only once the inputs are known to be good.
    from balancebench.spark.session import get_session

    setup_started = time.perf_counter()
    tracking.reap_orphans()  # an entry point (spark-submit): before opening runs
    reaper.stop_with_launcher()
    mlflow = tracking.store()
    least = sum(g.policy.min_rounds * len(runs) for g, runs in zip(groups, checked, strict=True))
    spark = get_session(f"balancebench-{'-'.join(workloads)}-{least} runs", master=master)
    sc = spark.sparkContext
    app_params = {
        "git_commit": tracking.git_commit(),
        "spark_master": sc.master,
        "spark_default_parallelism": str(sc.defaultParallelism),
        **tracking.library_versions(),
    }
    print(
        f"{PROGRESS} application setup (session): {time.perf_counter() - setup_started:.1f}"
        f" s, charged to no run; {len(groups)} group(s), at least {least} runs on "
        f"{len(streams)} dataset(s)",
        flush=True,
    )
    application = _Application(spark, mlflow, least)
    try:
        loaded: LoadedCell | None = None
        for i, (group, runs) in enumerate(zip(groups, checked, strict=True)):
            if i in streams:
                if loaded is not None:
                    loaded.release()
                loaded = application.load(runs, streams[i])
            application.run_group(group, runs, loaded, app_params)
        if loaded is not None:
            loaded.release()
    finally:
        spark.stop()
    if application.failed:
        failed = application.failed
        raise RuntimeError(f"{len(failed)} run(s) failed: " + "; ".join(failed))
    return application.records


class _Application:
    """:func:`run_groups`'s Spark application as its runs go: what they share across
    datasets (the strategies warmed up), the positions, the records and the failures."""

    def __init__(self, spark: Any, mlflow: Any, least: int) -> None:
        self.spark, self.mlflow, self.least = spark, mlflow, least
        self.warmed: set[str] = set()
        self.records: list[dict[str, Any]] = []
        self.failed: list[str] = []
        self.index = 0
        self.on_dataset = 0
        self.durations: list[float] = []
        self.load_error: str | None = None
        self.stream: ReplayStream | None = None

    def load(self, runs: Sequence[_Checked], stream: ReplayStream) -> LoadedCell | None:
        """A dataset loaded for the groups that share it; None if it failed to load."""
        self.on_dataset, self.load_error, self.stream = 0, None, stream
        started = time.perf_counter()
        try:
            loaded = LoadedCell(self.spark, runs[0].params, stream, warmed=self.warmed)
        except Exception as exc:
            self.load_error = tracking.failure_cause(exc)
            traceback.print_exc()
            print(f"{PROGRESS} dataset load failed: {self.load_error}", flush=True)
            return None
        print(
            f"{PROGRESS} dataset load ({stream.n_tuples} tuples): "
            f"{time.perf_counter() - started:.1f} s, charged to no run",
            flush=True,
        )
        return loaded

    def run_group(
        self,
        group: GroupSpec,
        runs: Sequence[_Checked],
        loaded: LoadedCell | None,
        app_params: dict[str, str],
    ) -> None:
        """One group's rounds, with progress lines; its cells' runs say how they ended."""
        self._supersede_earlier_rounds(group)
        if loaded is None:
            for run in runs:  # none was opened; the other groups still run
                self.failed.append(f"{_label(run)}: dataset load: {self.load_error}")
            return
        assert self.stream is not None
        params = runs[0].params
        shared_params = {
            "workload": params.workload.name,
            "operator": params.workload.operator.name,
            "dataset_digest": self.stream.dataset_digest,
            "dataset_dir": runs[0].spec.dataset_dir,
            "stream_tuples": str(self.stream.n_tuples),
            **app_params,
        }
        by_name = {r.spec.strategy: r for r in runs}
        where = group.cells[0].tags.get(APPLICATION_TAG)
        prefix = f"{where}, {group.label}: " if where else f"{group.label}: "

        def run(name: str, r: int) -> dict[str, float] | None:
            cell = by_name[name]
            spec = group.round_spec(cell.spec, r)
            self.index += 1
            self.on_dataset += 1
            left = _time_left(self.durations, self.least - self.index + 1)
            print(
                f"{PROGRESS} {prefix}round {r + 1} (of {group.policy.min_rounds}-"
                f"{group.policy.max_rounds}), run {self.index} of at least {self.least}: "
                f"{name}{left}",
                flush=True,
            )
            position = Position(self.index, self.on_dataset)
            started = time.perf_counter()
            try:
                record = _measure(
                    self.spark,
                    self.mlflow,
                    _check(spec),  # a fresh strategy instance every round
                    loaded,
                    shared_params,
                    position,
                )
            except Exception as exc:
                if line := tracking.unreachable(exc):
                    # Every later run would wait out the client's retries and fail the same.
                    raise tracking.TrackingUnreachable(line) from None
                self.failed.append(f"{spec.run_name}: {tracking.failure_cause(exc)}")
                traceback.print_exc()  # the whole cause in the task log; the others go on
                print(f"{PROGRESS} {spec.run_name} failed: {self.failed[-1]}", flush=True)
                return None
            finally:
                self.durations.append(time.perf_counter() - started)
            self.records.append(record)
            with contextlib.suppress(Exception):  # the round is measured and logged already
                _log_round(self.mlflow, cell.spec.parent_run_id, r, record["summary"])
            return record["summary"]

        rounds = None
        try:
            rounds = run_rounds(list(by_name), run, group.policy, on_round=report_round(prefix))
        except tracking.TrackingUnreachable:
            raise  # nothing can be written; the DAG step keeps the closing for later
        except BaseException:
            self._tag_rounds(group, rounds)
            raise
        self._tag_rounds(group, rounds)

    def _supersede_earlier_rounds(self, group: GroupSpec) -> None:
        """Round runs already under this group's cells come from an earlier run of this
        application (Airflow ran its task again: a retry, or a task reset after its
        scheduler was lost): they are closed KILLED, superseded, so that a cell counts only
        this run's rounds (its summary and every later sweep's history read FINISHED
        rounds). A cell is in one application only, so none of them is this run's."""
        client = self.mlflow.MlflowClient()
        for cell in group.cells:
            if not cell.parent_run_id:
                continue
            experiment = client.get_run(cell.parent_run_id).info.experiment_id
            where = f"tags.mlflow.parentRunId = '{cell.parent_run_id}'"

            def rounds_so_far(where: str = where, experiment: str = experiment) -> list:
                return client.search_runs([experiment], filter_string=where, max_results=5000)

            earlier = rounds_so_far()
            # The earlier run may still run (its Airflow task outlived its scheduler):
            # stopped first, then read again, so none of its rounds ends after this one.
            tags = {r.data.tags.get(reaper.APPLICATION_TAG, "") for r in earlier}
            if [tag for tag in tags if tag and reaper.stop_application(tag)]:
                print(f"{PROGRESS} stopped the earlier run of this application", flush=True)
                earlier = rounds_so_far()
            superseded = [run for run in earlier if run.info.status != "KILLED"]
            for run in superseded:
                reason = (
                    f"superseded: its application ran again at "
                    f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} (Airflow ran the task again), "
                    f"and this run's round was measured anew; it was {run.info.status}"
                )
                client.set_tag(run.info.run_id, reaper.REASON_TAG, reason)
                client.set_tag(run.info.run_id, reaper.SUPERSEDED_TAG, "true")
                client.set_terminated(run.info.run_id, status="KILLED")
            if superseded:
                print(
                    f"{PROGRESS} {cell.run_name or cell.strategy}: {len(superseded)} round "
                    "run(s) of an earlier run of this application superseded (closed KILLED)",
                    flush=True,
                )

    def _tag_rounds(self, group: GroupSpec, rounds: Any) -> None:
        """How many rounds the cells of ``group`` got, and why they stopped."""
        done = str(rounds.done) if rounds else "?"
        why = rounds.stopped if rounds else "the application stopped during its rounds"
        client = self.mlflow.MlflowClient()
        for cell in group.cells:
            if not cell.parent_run_id:
                continue
            for tag, value in ((ROUNDS_DONE_TAG, done), (ROUNDS_STOPPED_TAG, why)):
                with contextlib.suppress(Exception):  # a store error must not hide runs
                    client.set_tag(cell.parent_run_id, tag, value)


def _log_round(mlflow: Any, cell_run: str | None, r: int, summary: dict[str, float]) -> None:
    """A round's headline figures on its cell's run, ``round/<figure>`` at ``step`` = r."""
    if not cell_run:
        return
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    headline = headline_metrics()
    metrics = [
        Metric(ROUND_PREFIX + name, float(value), now, r)
        for name, value in summary.items()
        if name in headline and np.isfinite(value)
    ]
    mlflow.MlflowClient().log_batch(cell_run, metrics=metrics)


def _label(run: _Checked) -> str:
    return run.spec.run_name or run.spec.strategy


@dataclass(frozen=True)
class Position:
    """Where a run ran: its position in its Spark application (1 = first, which pays the
    application's first-use costs) and among the runs on its loaded dataset (1 = first
    after the load)."""

    in_application: int
    on_dataset: int


def _time_left(durations: Sequence[float], remaining: int) -> str:
    """``; at least about N s left`` from the runs so far (none before the first has
    ended, nor once the minimum rounds are done)."""
    if not durations or remaining <= 0:
        return ""
    return f"; at least about {np.mean(durations) * remaining:.0f} s left"


def _measure(
    spark: Any,
    mlflow: Any,
    run: _Checked,
    loaded: LoadedCell,
    shared_params: dict[str, str],
    position: Position,
) -> dict[str, Any]:
    """One run of an application: its MLflow run opened, warmed up, measured, logged."""
    spec, params, strategy = run.spec, run.params, run.strategy
    experiment_id = tracking.ensure_experiment(params.experiment)
    run_params = {
        # Only what applies to this run: not other datasets', strategies' or workloads'.
        # The strategy's own parameters are among them, once (<strategy>_<param>).
        **tracking.flat_params(applicable_params(params, [spec.strategy])),
        "strategy": spec.strategy,
        "strategy_kind": strategy_kind(spec.strategy),
        **shared_params,
        "timed_concurrency": str(spec.concurrency),
        "batch_interval_s": f"{loaded.interval_s:.6g}",
        "state_checkpoint_used": "reliable" if loaded.config.reliable_state else "local",
    }
    if spec.plan_extra_work_ms:
        run_params["plan_extra_work_ms"] = str(spec.plan_extra_work_ms)
    tags = {
        tracking.ROLE_TAG: "child",
        "airflow.dag_id": spec.dag_id,
        "airflow.run_id": spec.dag_run_id,
        "strategy_reference": strategy.reference,
        # Where it ran in its application (1 = first, which pays the first-use costs).
        RUN_INDEX_TAG: str(position.in_application),
        DATASET_RUN_INDEX_TAG: str(position.on_dataset),
        **spec.tags,
        **reaper.owner_tags(),
        **reaper.application_tag(),
    }
    if strategy.kind == "key_level" and (strategy.per_tuple or strategy.plans):
        # Which path routed the tuples (the JVM router, or why not)
        from balancebench.spark import jvm_routing

        if strategy.per_tuple:
            tags[jvm_routing.PATH_TAG] = jvm_routing.path_tag(spark, strategy, params.n_nodes)
        else:
            tags[jvm_routing.TABLE_PATH_TAG] = jvm_routing.table_path_tag(spark)
    with (
        mlflow.start_run(
            experiment_id=experiment_id,
            run_name=spec.run_name or spec.strategy,
            parent_run_id=spec.parent_run_id,
            tags=tags,
        ) as active,
        _failure_tagged(mlflow),
    ):
        mlflow.log_params(run_params)
        tracking.log_metric_definitions(active.info.run_id)
        try:
            batches, summary = loaded.run(
                spark,
                spec.strategy,
                strategy,
                params=params,
                on_batch=lambda r: _log_batch(
                    r,
                    spec.run_name or spec.strategy,
                    params.n_batches,
                    params.network_bandwidth_mb_per_s,
                ),
            )
        except AssertionError:
            mlflow.log_metric("oracle_passed", 0.0)
            raise
        headline = headline_metrics()
        mlflow.log_metrics({logged_name(k, headline): v for k, v in summary.items()})
        answers = [b.answer if isinstance(b.answer, list | str) else None for b in batches]
        # The answers' digest: equal digests = equal results (the sweep's exact check).
        digest = hashlib.sha256(json.dumps(answers, default=str).encode()).hexdigest()
        mlflow.set_tag("result_digest", digest)
        record = {
            "run_id": active.info.run_id,
            "strategy": spec.strategy,
            "workload": params.workload.name,
            "spark_master": shared_params["spark_master"],
            "run_index": position.in_application,
            "dataset_run_index": position.on_dataset,
            "summary": summary,
            "node_received": [b.node_received.tolist() for b in batches],
            "node_run_time_s": [b.node_run_time_s.tolist() for b in batches],
            "node_state": [b.node_state.tolist() for b in batches],
            "answers": answers,
            "result_digest": digest,
        }
        out = (
            Path(spec.result_path)
            if spec.result_path
            else (results_dir() / (spec.parent_run_id or "no-parent") / f"{spec.strategy}.json")
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=2, default=str))
        mlflow.log_artifact(str(out))
    return record
