"""Strategy runs in paired, rotated rounds inside one Spark application, each run logged
as an MLflow run.

Called by ``spark_apps/run_workload.py`` (the ``spark-submit`` entry point) with the cell
groups of one application (:func:`run_groups`): ``balance_experiment``'s one group (its
strategies) or a sweep application's groups (the cells of one workload and node count
that differ only in the strategy). Each group runs in rounds until its verdicts are
decided or its budget ends (``balancebench.experiment.rounds``). It builds each dataset's replay
stream (``balancebench.experiment.streams``) and loads it once; runs each strategy through its
runner (``spark.runners``: the micro-batch engine under the strategy's router, or a
Spark-native baseline); derives latency and throughput from the measured batches under
the cost model (``cost_model.clock``); logs everything with the units and definitions of
``metric_definitions.METRIC_DEFINITIONS``; and writes a JSON summary per run to ``.local/results``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from balancebench.core import replay
from balancebench.experiment.compare import headline_metrics, logged_name
from balancebench.experiment.params import ExperimentSpec, applicable_params
from balancebench.experiment.rounds import (
    RoundPolicy,
    Rounds,
    run_rounds,
)
from balancebench.experiment.run_log import (
    PROGRESS,
    event_times,
    failure_tagged,
    log_batch,
    log_round_figures,
    report_round,
    report_run_start,
    summarize,
    time_left,
)
from balancebench.experiment.run_spec import (
    APPLICATION_TAG,
    DATASET_RUN_INDEX_TAG,
    ROUNDS_DONE_TAG,
    ROUNDS_STOPPED_TAG,
    RUN_INDEX_TAG,
    RUN_ONLY_PARAMS,
    GroupSpec,
    Position,
    RunSpec,
    loaded_params,
)
from balancebench.experiment.streams import ReplayStream, build_stream
from balancebench.state import reaper, tracking
from balancebench.state.paths import results_dir
from balancebench.strategies import get_strategy, strategy_kind, strategy_settings


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
    from balancebench.spark.engine_config import EngineConfig

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
            from balancebench.state.paths import datasets_dir

            name = params.dataset
            folder, _ = generate(name, datasets_dir(), generator_params(name, params), checked=True)
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
        elif loaded_params(params) != loaded_params(self.params):
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
        stops them (:func:`balancebench.experiment.rounds.run_rounds`): their run summaries
        per round and the verdicts against the baseline."""
        return run_rounds(names, lambda name, _: self.run(spark, name)[1], policy, on_run, on_round)

    def release(self) -> None:
        from balancebench.spark.replay_stream import release_replay

        release_replay(self.df)


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
    params = loaded_params(run.params)
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
    rotated rounds until its policy stops them (:func:`balancebench.experiment.rounds.run_rounds`).
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
            left = time_left(self.durations, self.least - self.index + 1)
            report_run_start(prefix, r, group.policy, self.index, self.least, name, left)
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
                log_round_figures(self.mlflow, cell.spec.parent_run_id, r, record["summary"])
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
                    f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} (Airflow ran "
                    "the task again), "
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


def _label(run: _Checked) -> str:
    return run.spec.run_name or run.spec.strategy


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
        failure_tagged(mlflow),
    ):
        mlflow.log_params(run_params)
        tracking.log_metric_definitions(active.info.run_id)
        try:
            batches, summary = loaded.run(
                spark,
                spec.strategy,
                strategy,
                params=params,
                on_batch=lambda r: log_batch(
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
