"""What a run of the engine is configured with: :class:`EngineConfig`, built from the
Params in one place (``experiment.runs.engine_config``) and read by the engine, the join
architectures and the Spark-native baselines."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from balancebench.core.operators import TimeBounds, Window
from balancebench.core.workloads import Workload


@dataclass(frozen=True)
class EngineConfig:
    workload: Workload
    n_nodes: int
    n_batches: int
    interval_s: float
    window_s: float = 0.0
    band_width: int = 1
    top_k: int = 10
    #: Keep cross-batch state in reliable checkpoints (survives a lost executor) instead
    #: of ``localCheckpoint`` (``MicroBatchLoop.keep``; Param ``state_checkpoint``).
    reliable_state: bool = False
    #: Memory-driven scale-out: a node's capacity in state tuples (Param
    #: ``node_capacity_state_tuples``); None: every node from the start.
    node_capacity_state_tuples: int | None = None
    #: An untimed warm-up (``experiment.warm_up``): its figures are thrown away, so the
    #: engine's fixed cost is not calibrated for it (the first measured run does).
    warm_up: bool = False

    def __post_init__(self) -> None:
        self.window  # noqa: B018 - a window the operator's slide cannot make is refused here

    @property
    def window(self) -> Window | None:
        """The aggregation's window (None: full history, or a join; ``Operator.window``)."""
        return self.workload.operator.window(self.interval_s, self.window_s)

    @property
    def bounds(self) -> TimeBounds | None:
        """The join's time bounds (None: no window, or an aggregation; ``Operator.bounds``)."""
        return self.workload.operator.bounds(self.window_s)

    def first_window_batch(self, b: int) -> int:
        """The first batch of the window an aggregation answers after batch ``b``
        (``Window.first_batch``; 0: the whole history)."""
        window = self.window
        return 0 if window is None else window.first_batch(b)

    def in_window(self, t_r: Column, t_s: Column) -> Column | None:
        """The join's time condition on R's and S's event-time columns
        (``TimeBounds.holds``; None: no window)."""
        bounds = self.bounds
        return None if bounds is None else bounds.holds(t_r, t_s)

    def in_window_of(self, t_a: Column, t_b: Column, a_side: str | Column) -> Column | None:
        """:meth:`in_window` on tuples ``a`` and ``b`` of opposite sides, ``a`` on side
        ``a_side`` ("R" or "S", or a column of them): the rule is on (R, S) whichever side
        probes (an asymmetric rule on (probe, stored) would be wrong half the time)."""
        if isinstance(a_side, str):
            t_r, t_s = (t_a, t_b) if a_side == "R" else (t_b, t_a)
        else:
            a_is_r = a_side == "R"
            t_r = F.when(a_is_r, t_a).otherwise(t_b)
            t_s = F.when(a_is_r, t_b).otherwise(t_a)
        return self.in_window(t_r, t_s)

    def horizon(self, b: int) -> float | None:
        """The oldest event time a join holds after batch ``b`` (``TimeBounds.horizon``;
        None: the whole history)."""
        bounds = self.bounds
        return None if bounds is None else bounds.horizon(b, self.interval_s)
