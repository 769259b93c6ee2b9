"""How a strategy run is logged and reported: its run-level figures under the cost model
(:func:`summarize`) and per-batch series (:func:`batch_metrics`), their MLflow logging,
and the progress lines (``[balancebench progress] ...``, :data:`PROGRESS`) a task log
shows; :func:`running_strategy` reads back which strategy a progress line names (the
Airflow plugin's failure message asks it, so the format lives here alone)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from balancebench.core import cost_model
from balancebench.core.metric_definitions import figure_words
from balancebench.experiment.compare import BATCH_PREFIX, headline_metrics
from balancebench.experiment.rounds import RoundPolicy, Rounds, verdict_lines
from balancebench.experiment.run_spec import ROUND_PREFIX
from balancebench.experiment.streams import ReplayStream
from balancebench.state import tracking

#: The prefix of every progress line a run prints to its task log.
PROGRESS = "[balancebench progress]"


def say_progress(line: str) -> None:
    """``line`` as a progress line: in a task log, which ``balancebench run`` shows."""
    print(f"{PROGRESS} {line}", flush=True)


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
    bandwidth_mb_per_s: float | None = cost_model.DEFAULT_BANDWIDTH_MB_PER_S,
) -> dict[str, float]:
    """Run-level metrics from the measured batches, under the cost model (definitions in
    ``metric_definitions``)."""
    costs = [b.costs(bandwidth_mb_per_s) for b in batches]
    run = cost_model.clock(costs, event_time_s, batch_of, interval_s)
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
    _, per_tuple_s, r2, residual_s = cost_model.fit_node_work(
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
    result: Any, bandwidth_mb_per_s: float | None = cost_model.DEFAULT_BANDWIDTH_MB_PER_S
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
    if cost_model.CORE_WAIT in out:  # part of harness_s, as its definition says
        out[cost_model.CORE_WAIT] = costs.harness_core_wait_s
    if result.migration is not None:
        out["migration_extract_s"] = result.migration.extract_s
    if result.plan is not None:
        out["plan_time_ms"] = result.plan.plan_time_ms
        out["split_keys"] = float(result.plan.split_keys)
        out["plan_reached_tolerance"] = 1.0 if result.plan.reached_tolerance else 0.0
    return out


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


def log_batch(result: Any, label: str, n_batches: int, bandwidth_mb_per_s: float | None) -> None:
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
def failure_tagged(mlflow: Any) -> Iterator[None]:
    """An exception inside the active run tags it with its cause (``balancebench.failure``)
    before ``mlflow.start_run`` closes it FAILED: a failed strategy run says why."""
    try:
        yield
    except Exception as exc:
        if not tracking.unreachable(exc):  # else nothing can be tagged
            with contextlib.suppress(Exception):  # the store may be what failed
                mlflow.set_tag(tracking.FAILURE_TAG, tracking.failure_cause(exc))
        raise


def log_round_figures(mlflow: Any, cell_run: str | None, r: int, summary: dict[str, float]) -> None:
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


def time_left(durations: Sequence[float], remaining: int) -> str:
    """``; at least about N s left`` from the runs so far (none before the first has
    ended, nor once the minimum rounds are done)."""
    if not durations or remaining <= 0:
        return ""
    return f"; at least about {np.mean(durations) * remaining:.0f} s left"


def report_run_start(
    prefix: str, r: int, policy: RoundPolicy, index: int, least: int, name: str, left: str
) -> None:
    """The progress line that starts a run: ``<prefix>round r (of a-b), run i of at least
    n: <strategy><left>`` (:func:`running_strategy` reads it back)."""
    print(
        f"{PROGRESS} {prefix}round {r + 1} (of {policy.min_rounds}-{policy.max_rounds}), "
        f"run {index} of at least {least}: {name}{left}",
        flush=True,
    )


def progress_lines(text: str) -> list[str]:
    """The progress lines of a log's ``text``, their :data:`PROGRESS` prefix taken off."""
    return [
        line[len(PROGRESS) :].strip() for line in text.splitlines() if line.startswith(PROGRESS)
    ]


def running_strategy(progress: Sequence[str]) -> str | None:
    """The strategy the last of ``progress`` (:func:`progress_lines`) that names one says
    was running: ``<strategy> · round r: batch ...`` (:func:`log_batch`) or ``...: round r
    (of a-b), run i of at least n: <strategy>`` (a run's start); None if none does."""
    for line in reversed(progress):
        found = re.match(r"(?:[^:]*: )?(\w+) · round \d+", line) or re.search(
            r"run \d+ of at least \d+: (\w+)", line
        )
        if found:
            return found.group(1)
    return None
