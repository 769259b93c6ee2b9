"""The contract of the paper 001-004 models (scheduling, elastic, back-pressure, overlay).

These papers' systems (a Flink scheduler on a heterogeneous cluster, an elastic
stream system on 15 nodes, an NS-3 network, a 100-host Chord overlay) cannot run on one
2-core machine, so each becomes a *model*: pure Python + numpy (+ SimPy where it is a
discrete-event simulation), deterministic from a seed, whose package docstring
(``models/<name>/__init__.py``) says what it models and what it leaves out; its
strategies are named objects in the package's ``<name>_strategies.STRATEGIES``
(name -> object; the model's ``strategies`` are its keys).

A model experiment is a grid of :class:`ModelPoint` s — (strategy, parameter point,
repetition) — and :meth:`Model.run` turns one point into a :class:`ModelResult`. The
sweep runner (``balancebench.experiment.model_sweep``) runs every point as one Spark task, so a
nightly sweep scales out on a cluster, and logs one MLflow child per (strategy,
parameter point) with the same schema as the Spark workloads.

Every :class:`ModelResult` carries the common metrics where the model has them
(``plan_time_ms``, ``latency_p50_s``, ``latency_p95_s``, ``latency_p99_s``,
``throughput_tuples_per_s`` or ``throughput_mb_per_s``, ``imbalance_max_over_mean``) plus
the model's own, all with units in the name and a definition in ``metric_definitions``.
``plan_time_ms`` is the thread's CPU time (``balancebench.core.cost_model.plan_clock``)
around the strategy's decision code; everything else is derived from the simulation's own clock
(simulated seconds).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np

from balancebench.core.schema import check_values

T = TypeVar("T")


@dataclass(frozen=True)
class ModelPoint:
    """One unit of work of a model sweep: a strategy at a parameter point, one repetition.

    ``params`` holds every model parameter (defaults filled in, JSON-able); ``seed`` is
    derived from the sweep seed and the repetition, so a point reproduces on its own.
    ``dataset_dir`` is the generated input the model reads (None = the model builds its
    own input from ``params``, e.g. in unit tests).
    """

    model: str
    strategy: str
    params: dict[str, Any]
    repetition: int = 0
    seed: int = 0
    dataset_dir: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelPoint:
        return cls(**json.loads(text))

    def label(self, varied: tuple[str, ...] = ()) -> str:
        """``strategy`` plus the varied parameters, e.g. ``acts n_tasks=8``."""
        parts = [self.strategy] + [f"{k}={self.params[k]}" for k in varied]
        return " ".join(parts)


@dataclass
class ModelResult:
    """What one point produced.

    - ``metrics``: run-level numbers, units in the names (``_s``, ``_ms``, ``_tuples``,
      ``_mb``, ``_per_s``, ratios named what-over-what).
    - ``series``: time series sampled at ``time_s`` (simulated seconds, same length), logged
      to MLflow with ``step`` = index; e.g. utilisation mean/std over time.
    - ``events``: simulated events processed (SimPy events, scheduling decisions, messages),
      for the model-speed benchmark (events per second of wall time).
    - ``info``: JSON-able detail (placements, node counts, moves) saved as an artifact.
    """

    metrics: dict[str, float]
    series: dict[str, list[float]] = field(default_factory=dict)
    time_s: list[float] = field(default_factory=list)
    events: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.metrics.items():
            if not np.isfinite(float(value)):
                raise ValueError(f"metric {name}: {value!r} is not a finite number")
            self.metrics[name] = float(value)
        for name, values in self.series.items():
            if len(values) != len(self.time_s):
                raise ValueError(
                    f"series {name}: {len(values)} values for {len(self.time_s)} time steps"
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelResult:
        return cls(**data)


def registered(strategies: Mapping[str, T], name: str) -> T:
    """The strategy registered as ``name`` in a model's ``STRATEGIES``; an unknown name
    raises ``ValueError`` naming the allowed values."""
    if name not in strategies:
        raise ValueError(f"strategy: unknown {name!r}; allowed values: {list(strategies)}")
    return strategies[name]


class Model(ABC):
    """A paper's system as a model. Subclasses set the class attributes and ``run``.

    - ``name``: registry key (``scheduling``, ``elastic``, ``backpressure``, ``overlay``).
    - ``reference``: the paper and section it follows.
    - ``strategies``: strategy names it compares (globally unique across models).
    - ``dataset``: the generator (``balancebench.generators``) whose output feeds it.
    - ``param_schema``: JSON-schema spec per model parameter (``type``, bounds/enum,
      ``default``, ``title``, ``description``); the DAG Param is ``<model>_<param>``.
    - ``metric_definitions``: name -> definition of every metric and series it emits
      beyond the common ones of ``balancebench.core.metric_definitions``.
    """

    name: ClassVar[str]
    reference: ClassVar[str]
    strategies: ClassVar[tuple[str, ...]]
    dataset: ClassVar[str]
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    metric_definitions: ClassVar[dict[str, str]] = {}

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Defaults filled in and every value checked; ``ValueError`` names the field and
        what is allowed. Override to add checks a schema cannot express (call super)."""
        return check_values(self.param_schema, params, what=f"{self.name} params")

    def check_strategy(self, strategy: str) -> None:
        if strategy not in self.strategies:
            raise ValueError(
                f"strategy: {strategy!r} is not a {self.name} strategy; allowed values: "
                f"{list(self.strategies)}"
            )

    def check_sweep(self, params: dict[str, Any]) -> list[str]:
        """Problems between the model's Params (the grid's values included, prefixed
        ``<model>_``) and its dataset's Params, found before any work (one message per
        problem, naming the field and what is allowed). None by default."""
        return []

    @abstractmethod
    def run(self, point: ModelPoint) -> ModelResult:
        """Simulate one point (deterministic from ``point.seed``)."""

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """A matplotlib Figure mirroring the paper's figure for this experiment."""
        raise NotImplementedError(f"{self.name}: no figure")
