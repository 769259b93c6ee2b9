"""The replay clock: how a recorded stream becomes micro-batches, and their latency.

Arrival model: tuple ``i`` arrives at its ``event_time_s`` (the generator's Poisson
process). The stream is cut into ``n_batches`` equal event-time windows of
``interval_s = max(event_time_s) / n_batches`` seconds (measured from the data,
``spark.replay_stream.load_replay``); batch ``b`` holds the tuples with
``floor(event_time_s / interval_s) == b`` (the last batch also takes any later tuple).

Processing model of a micro-batch engine (one batch at a time, in order):

- batch ``b`` *closes* when its window ends (``(b + 1) * interval_s``, or its last
  tuple's arrival if later);
- it *starts* at ``max(close_b, end_{b-1} + plan_delay_{b-1})``: it cannot start before
  the previous batch finished and the plan made from that batch's statistics is ready;
- it *ends* at ``start_b + service_b``, where ``service_b`` is the batch's charged
  service (``cost_model.BatchCosts.service_s``): its routing work per sender, then the node
  that finishes last, by its CPU time (``executorCpuTime``; its run time where a runner
  measures no CPU) plus its share of a migration (CPU and transfer; nodes run in parallel).

So an overloaded strategy builds backlog exactly as a real micro-batch engine does. The
event-time latency of a tuple is ``end_b - event_time_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def batch_index(event_time_s: np.ndarray, interval_s: float, n_batches: int) -> np.ndarray:
    """Micro-batch of each tuple; Spark evaluates the same IEEE expression."""
    return np.minimum(np.floor(np.asarray(event_time_s) / interval_s), n_batches - 1).astype(
        np.int64
    )


@dataclass(frozen=True)
class Schedule:
    close_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray

    @property
    def queueing_s(self) -> np.ndarray:
        """How long each batch waited after closing (backlog)."""
        return self.start_s - self.close_s


def schedule(
    last_arrival_s: np.ndarray, interval_s: float, service_s: np.ndarray, plan_delay_s: np.ndarray
) -> Schedule:
    """Close/start/end time of each batch under the model above."""
    n = len(service_s)
    close = np.maximum((np.arange(n) + 1) * interval_s, last_arrival_s)
    start = np.empty(n)
    end = np.empty(n)
    ready = 0.0
    for b in range(n):
        start[b] = max(close[b], ready)
        end[b] = start[b] + service_s[b]
        ready = end[b] + plan_delay_s[b]
    return Schedule(close, start, end)


def latency_percentiles(
    event_time_s: np.ndarray, batch: np.ndarray, end_s: np.ndarray, percentiles: tuple[float, ...]
) -> dict[float, float]:
    """Percentiles of ``end_{batch(i)} - event_time_i`` over every tuple."""
    latency = end_s[batch] - event_time_s
    values = np.percentile(latency, percentiles)
    return dict(zip(percentiles, (float(v) for v in values), strict=True))
