"""Input of the overlay model: the on/off sources' rate per period (from an ``onoff``
dataset's ``phases`` table, or made in memory by the generator's own code) and the chains of
operators built over them (:class:`OverlayInput`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from balancebench.core.lazy import lazy_module
from balancebench.generators.onoff import OWN_PARAMS as ONOFF_PARAMS
from balancebench.generators.onoff import OnOffSources

# Loaded on first use: the model registry and its Params are read without it (lazy.py).
pd = lazy_module("pandas")


class _CollectingWriter:
    """Stands in for ``TableWriter``: keeps the generator's batches in memory."""

    def __init__(self) -> None:
        self.batches: dict[str, list[pa.RecordBatch]] = {}

    @contextmanager
    def table(self, name: str, schema: pa.Schema, delta_columns: tuple[str, ...] = ()) -> Iterator:
        batches = self.batches.setdefault(name, [])
        yield batches.append


def synthetic_onoff_phases(
    sources: int, duration_s: float, capacity_tuples_per_s: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The ``onoff`` generator's ``phases`` table, made in memory with its default phase
    Params (target load 1.0 of ``capacity_tuples_per_s``); returns it and those Params."""
    params = {name: spec["default"] for name, spec in ONOFF_PARAMS.items()}
    params.update(
        onoff_sources=sources,
        onoff_duration_s=float(duration_s),
        onoff_target_load=1.0,
        onoff_capacity_tuples_per_s=float(capacity_tuples_per_s),
        seed=seed,
    )
    writer = _CollectingWriter()
    OnOffSources().write(writer, params)  # type: ignore[arg-type]
    table = pa.Table.from_batches(writer.batches["phases"])
    return table.to_pandas(), params


def period_rates(phases: pd.DataFrame, sources: int, period_s: float, periods: int) -> np.ndarray:
    """``(sources, periods)`` mean rate (tuples/s) of each source over each period, from
    the exact tuples sent (piecewise-linear cumulative count of the phases)."""
    rates = np.zeros((sources, periods))
    edges = np.arange(periods + 1) * period_s
    ordered = phases.sort_values(["source", "phase"], kind="stable")
    for source, rows in ordered.groupby("source", sort=True):
        start = rows["start_s"].to_numpy()
        end = rows["end_s"].to_numpy()
        sent = np.concatenate(
            [[0.0], np.cumsum(rows["rate_tuples_per_s"].to_numpy() * (end - start))]
        )
        times = np.concatenate([start[:1], end])
        cumulative = np.interp(edges, times, sent)
        rates[int(source)] = np.diff(cumulative) / period_s
    return rates


@dataclass
class OverlayInput:
    """What the simulation runs on.

    ``op_load``: ``(ops, periods)`` load of each operator, shares of a nominal host;
    ``op_cost_s``: service time per tuple on a nominal host; ``chains``: ``(sources,
    chain_length)`` operator indexes in chain order; ``source_tuples``: ``(sources,
    periods)`` tuples entering; ``source_host``: where each source enters."""

    op_load: np.ndarray
    op_cost_s: np.ndarray
    chains: np.ndarray
    source_tuples: np.ndarray
    source_host: np.ndarray


def build_input(
    rates: np.ndarray, params: dict[str, Any], rng: np.random.Generator
) -> OverlayInput:
    """Chains of operators over the sources' per-period rates (already at the target load)."""
    sources = rates.shape[0]
    length = int(params["chain_length"])
    capacity = float(params["node_capacity_tuples_per_s"])
    weights = rng.uniform(0.5, 1.5, (sources, length))
    weights /= weights.sum(axis=1, keepdims=True)
    chains = np.arange(sources * length).reshape(sources, length)
    op_cost_s = (weights / capacity).ravel()
    op_load = np.repeat(rates, length, axis=0) * op_cost_s[:, None]
    return OverlayInput(
        op_load=op_load,
        op_cost_s=op_cost_s,
        chains=chains,
        source_tuples=rates * float(params["period_s"]),
        source_host=np.arange(sources) % int(params["nodes"]),
    )
