"""``onoff``: on/off data sources with high and low rates (paper 004's load model).

Paper 004 (§3, numerical experiment) sets the system load through the sources' sending
speed: a source alternates a *work* phase, in which it sends at a high or a low speed,
and an *idle* phase, in which it sends nothing; the phase changes follow exponential
distributions. The experiment has 100 nodes in 10 subnets and a system load of 80%.
The paper gives no phase lengths, rates or capacity; those below are Params.

Table ``phases`` (one row per phase, ordered by source then phase): ``source`` (int32,
``0..onoff_sources-1``), ``phase`` (int32, index within the source, from 0), ``start_s``,
``end_s`` (float64), ``state`` (string: ``"idle"``, ``"work_low"`` or ``"work_high"``),
``rate_tuples_per_s`` (float64: 0 when idle, else the low or high rate). Each source's
phases tile ``[0, onoff_duration_s]`` without gaps or overlaps (its last phase is cut at
the end); work and idle alternate.

Rules [interpreted]:

- Work and idle lengths are exponential with means ``onoff_mean_work_s`` and
  ``onoff_mean_idle_s``. Each work phase runs at one rate for its whole length: the high
  rate with probability ``onoff_high_share``, else the low rate (``high = low *
  onoff_high_low_ratio``).
- The first phase is drawn from the stationary probabilities (work with probability
  ``W / (W + I)``); exponential lengths are memoryless, so each source is stationary from
  ``t = 0``.
- Rates are scaled so that the *expected* offered load (the sum over sources of the
  long-run mean rate ``W / (W + I) * (h * high + (1 - h) * low)``) is
  ``onoff_target_load * onoff_capacity_tuples_per_s``. The realized load differs by
  sampling noise, which ``profile_load`` bounds.

Profiles checked by the suites (see ``validation_frames``):

- ``profile_load``: the rates give the target load in expectation (relative error
  <= 1e-9), and the realized offered load (``sum rate * length / (duration * capacity)``)
  vs ``onoff_target_load``. Allowed: ``4`` standard deviations + 0.002, the variance from
  the renewal-reward central limit theorem per source (cycle = a work plus an idle phase,
  reward = rate x work length): ``E[Z^2] / (E[X] T)`` with ``Z = (R - m) W - m I``,
  capped at the stationary variance of the rate, summed over sources.
- ``profile_phase_lengths`` (rows ``work``, ``idle``): the mean length as the
  censored-exponential maximum-likelihood estimate ``time in the state / completed
  phases`` (the cut last phases count as time, not as phases; dropping them instead would
  bias the mean low by about ``mean / duration``). Checked as counts: completed phases vs
  ``time in the state / requested mean``, within ``4 sqrt + 8`` (Poisson; the ``+ 8``
  keeps small counts fair); for many phases that is ``4`` standard errors of the mean.
- ``profile_high_share``: share of work phases at the high rate vs ``onoff_high_share``,
  within ``4`` binomial sd ``+ 1/n + 0.01``.
- ``profile_tiling``: counts of gaps or overlaps between consecutive phases of a source,
  phase indexes that skip, sources that do not start at 0 or end at the duration, repeated
  states (work after work, idle after idle), missing sources: all must be 0.

Same params (seed included) -> same bytes -> same digest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from balancebench.core.lazy import lazy_module
from balancebench.core.schema import positive_number_spec
from balancebench.generators.common import (
    CHUNK_ROWS,
    Generator,
    Manifest,
    TableWriter,
    read_table,
)

SCHEMA = pa.schema(
    [
        ("source", pa.int32()),
        ("phase", pa.int32()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("state", pa.string()),
        ("rate_tuples_per_s", pa.float64()),
    ]
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")
#: State names by code (the code is also the index into ``(0, low, high)`` rates).
STATES = ("idle", "work_low", "work_high")
IDLE, WORK_LOW, WORK_HIGH = STATES
#: Bounds on the output, checked before any work (expected phases).
MAX_PHASES = 2_000_000_000
MAX_PHASES_PER_SOURCE = 10_000_000
SIGMAS = 4.0
LOAD_SLACK = 0.002
#: Poisson count slack for small counts (``SIGMAS**2 / 2``, as a sub-gamma tail bound).
COUNT_SLACK = SIGMAS**2 / 2
HIGH_SHARE_SLACK = 0.01
#: The low/high rates must give the target load in expectation up to float rounding.
RATE_SCALING_TOLERANCE = 1e-9


OWN_PARAMS: dict[str, dict[str, Any]] = {
    "onoff_sources": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000_000,
        "default": 100,
        "title": "Sources",
        "description": "On/off data sources (paper 004: 100 nodes in 10 subnets).",
    },
    "onoff_duration_s": positive_number_spec(
        60.0,
        "Duration (s)",
        "Length of the generated timeline; phases tile [0, duration].",
        maximum=1e9,
    ),
    "onoff_mean_work_s": positive_number_spec(
        4.0,
        "Mean work phase (s)",
        "Work phase lengths are exponential with this mean.",
        maximum=1e9,
    ),
    "onoff_mean_idle_s": positive_number_spec(
        2.0,
        "Mean idle phase (s)",
        "Idle phase lengths are exponential with this mean.",
        maximum=1e9,
    ),
    "onoff_high_low_ratio": {
        "type": "number",
        "minimum": 1,
        "maximum": 1e6,
        "default": 4.0,
        "title": "High / low rate",
        "description": "Ratio of the high to the low sending rate of a work phase.",
    },
    "onoff_high_share": {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "default": 0.5,
        "title": "High-rate share",
        "description": "Probability that a work phase sends at the high rate.",
    },
    "onoff_target_load": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1,
        "default": 0.8,
        "title": "Target system load",
        "description": "Expected offered load / capacity (paper 004: 0.8); sets the rates.",
    },
    "onoff_capacity_tuples_per_s": positive_number_spec(
        100_000.0,
        "System capacity (tuples/s)",
        "Total processing capacity the load refers to (default 100 nodes x 1000 tuples/s).",
        maximum=1e12,
    ),
}


def work_fraction(params: dict[str, Any]) -> float:
    """Stationary probability that a source is in a work phase."""
    work, idle = params["onoff_mean_work_s"], params["onoff_mean_idle_s"]
    return work / (work + idle)


def work_rates(params: dict[str, Any]) -> tuple[float, float]:
    """``(low, high)`` tuples/s so the expected offered load is ``target x capacity``."""
    per_source = (
        params["onoff_target_load"]
        * params["onoff_capacity_tuples_per_s"]
        / params["onoff_sources"]
    )
    ratio, high_share = params["onoff_high_low_ratio"], params["onoff_high_share"]
    low = per_source / (work_fraction(params) * (high_share * ratio + 1 - high_share))
    return float(low), float(low * ratio)


def expected_phases_per_source(params: dict[str, Any]) -> float:
    cycle = params["onoff_mean_work_s"] + params["onoff_mean_idle_s"]
    return 1 + 2 * params["onoff_duration_s"] / cycle


class OnOffSources(Generator):
    name = "onoff"
    description = "On/off sources: exponential work/idle phases, high/low rates, target load."
    reference = "paper 004 §3 (work/idle data sources, system load 80%)"
    kind = "phases"
    main_table = "phases"
    params = (*OWN_PARAMS, "seed")
    own_params = OWN_PARAMS

    def check(self, params: dict[str, Any]) -> None:
        per_source = expected_phases_per_source(params)
        if per_source > MAX_PHASES_PER_SOURCE:
            raise ValueError(
                f"onoff_duration_s: {params['onoff_duration_s']} s with mean phases "
                f"onoff_mean_work_s {params['onoff_mean_work_s']} and onoff_mean_idle_s "
                f"{params['onoff_mean_idle_s']} gives {per_source:.3g} phases per source; "
                f"expected at most {MAX_PHASES_PER_SOURCE} (shorter duration or longer phases)"
            )
        total = per_source * params["onoff_sources"]
        if total > MAX_PHASES:
            raise ValueError(
                f"onoff_sources: {params['onoff_sources']} sources x {per_source:.3g} phases "
                f"is {total:.3g} phases; expected at most {MAX_PHASES} (fewer sources or a "
                f"shorter onoff_duration_s)"
            )

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        rng = np.random.default_rng(params["seed"])
        sources, duration = params["onoff_sources"], float(params["onoff_duration_s"])
        mean_s = np.array([params["onoff_mean_idle_s"], params["onoff_mean_work_s"]])
        p_work, high_share = work_fraction(params), params["onoff_high_share"]
        low, high = work_rates(params)
        rate_by_code = np.array([0.0, low, high])
        per_source = expected_phases_per_source(params)
        width = int(per_source + 6 * math.sqrt(per_source) + 8)
        block = max(1, CHUNK_ROWS // width)
        with out.table("phases", SCHEMA) as write:
            for first in range(0, sources, block):
                count = min(block, sources - first)
                work_first = rng.random(count) < p_work
                lengths, highs = [], []
                covered = np.zeros(count)
                while covered.min() < duration:
                    column = np.arange(len(lengths) * width, (len(lengths) + 1) * width)
                    work = work_first[:, None] ^ (column % 2 == 1)[None, :]
                    drawn = rng.standard_exponential((count, width)) * mean_s[work.astype(np.intp)]
                    lengths.append(drawn)
                    highs.append(rng.random((count, width)) < high_share)
                    covered += drawn.sum(axis=1)
                length = np.hstack(lengths)
                columns = length.shape[1]
                work = work_first[:, None] ^ (np.arange(columns) % 2 == 1)[None, :]
                end = np.cumsum(length, axis=1)
                start = np.hstack([np.zeros((count, 1)), end[:, :-1]])
                keep = start < duration
                code = np.where(work, np.where(np.hstack(highs), 2, 1), 0).astype(np.int8)[keep]
                source, phase = np.nonzero(keep)
                write(
                    pa.record_batch(
                        [
                            pa.array((source + first).astype(np.int32)),
                            pa.array(phase.astype(np.int32)),
                            pa.array(start[keep]),
                            pa.array(np.minimum(end[keep], duration)),
                            pa.DictionaryArray.from_arrays(
                                pa.array(code), pa.array(STATES)
                            ).dictionary_decode(),
                            pa.array(rate_by_code[code]),
                        ],
                        schema=SCHEMA,
                    )
                )

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)
        params = manifest.params

        def phases() -> pd.DataFrame:
            return read_table(dataset_dir, manifest, "phases").to_pandas()

        frames["profile_load"] = lambda: load_profile(phases(), params)
        frames["profile_phase_lengths"] = lambda: phase_lengths_profile(phases(), params)
        frames["profile_high_share"] = lambda: high_share_profile(phases(), params)
        frames["profile_tiling"] = lambda: tiling_profile(phases(), params)
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        low, high = work_rates(manifest.params)
        return {
            "max_source": manifest.params["onoff_sources"] - 1,
            "rate_low_tuples_per_s": low,
            "rate_high_tuples_per_s": high,
        }


def _clean(phases: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Rows with usable values (corrupt ones dropped: the ``phases`` suite reports them),
    sorted by source and phase, with ``length_s`` clipped to ``[0, duration]``."""
    duration = float(params["onoff_duration_s"])
    columns = ["source", "phase", "start_s", "end_s", "state", "rate_tuples_per_s"]
    clean = phases[columns].dropna()
    clean = clean[clean["state"].isin(STATES)]
    clean = clean.sort_values(["source", "phase"], kind="stable").reset_index(drop=True)
    start = clean["start_s"].clip(0, duration)
    end = clean["end_s"].clip(0, duration)
    clean["length_s"] = (end - start).clip(lower=0)
    return clean


def _sd_time_average_rate(params: dict[str, Any]) -> float:
    """Standard deviation of one source's time-average rate over the duration."""
    work, idle = params["onoff_mean_work_s"], params["onoff_mean_idle_s"]
    low, high = work_rates(params)
    h = params["onoff_high_share"]
    r1 = h * high + (1 - h) * low
    r2 = h * high**2 + (1 - h) * low**2
    mean = r1 * work / (work + idle)
    # Renewal reward: Z = (R - mean) W - mean I per cycle, exponential W and I.
    z2 = (r2 - 2 * mean * r1 + mean**2) * 2 * work**2 + mean**2 * 2 * idle**2
    z2 -= 2 * mean * (r1 - mean) * work * idle
    asymptotic = z2 / ((work + idle) * float(params["onoff_duration_s"]))
    stationary = work / (work + idle) * r2 - mean**2
    return math.sqrt(max(min(asymptotic, stationary), 0.0))


def load_profile(phases: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """One row: realized offered load vs ``onoff_target_load``."""
    clean = _clean(phases, params)
    capacity, duration = params["onoff_capacity_tuples_per_s"], float(params["onoff_duration_s"])
    sources, target = params["onoff_sources"], params["onoff_target_load"]
    low, high = work_rates(params)
    h = params["onoff_high_share"]
    expected = sources * work_fraction(params) * (h * high + (1 - h) * low) / capacity
    tuples = float((clean["rate_tuples_per_s"] * clean["length_s"]).sum())
    realized = tuples / (duration * capacity)
    allowed = SIGMAS * math.sqrt(sources) * _sd_time_average_rate(params) / capacity + LOAD_SLACK
    error = abs(realized - target)
    scaling_error = abs(expected - target) / target
    return pd.DataFrame(
        [
            {
                "sources": sources,
                "capacity_tuples_per_s": float(capacity),
                "target_load": float(target),
                "expected_load_from_rates": float(expected),
                "rate_scaling_rel_error": scaling_error,
                "realized_load": realized,
                "offered_tuples": tuples,
                "abs_error": error,
                "allowed_error": allowed,
                "within_allowed": int(error <= allowed and scaling_error <= RATE_SCALING_TOLERANCE),
            }
        ]
    )


def _last_of_source(clean: pd.DataFrame) -> np.ndarray:
    source = clean["source"].to_numpy()
    return np.append(source[1:] != source[:-1], True) if len(source) else np.zeros(0, bool)


def phase_lengths_profile(phases: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """Rows ``work`` and ``idle``: censored-exponential mean length vs the requested one."""
    clean = _clean(phases, params)
    cut = _last_of_source(clean)
    is_work = (clean["state"] != IDLE).to_numpy()
    rows = []
    for state, mask, requested in (
        ("work", is_work, params["onoff_mean_work_s"]),
        ("idle", ~is_work, params["onoff_mean_idle_s"]),
    ):
        exposure = float(clean["length_s"].to_numpy()[mask].sum())
        completed = int((mask & ~cut).sum())
        expected = exposure / requested
        error = abs(completed - expected)
        allowed = SIGMAS * math.sqrt(expected) + COUNT_SLACK
        rows.append(
            {
                "state": state,
                "requested_mean_s": float(requested),
                "observed_mean_s": exposure / completed if completed else 0.0,
                "time_in_state_s": exposure,
                "completed_phases": completed,
                "cut_phases": int((mask & cut).sum()),
                "expected_completed_phases": expected,
                "abs_error": error,
                "allowed_error": allowed,
                "within_allowed": int(error <= allowed),
            }
        )
    return pd.DataFrame(rows)


def high_share_profile(phases: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """One row: share of work phases at the high rate vs ``onoff_high_share``."""
    clean = _clean(phases, params)
    work = int((clean["state"] != IDLE).sum())
    high = int((clean["state"] == WORK_HIGH).sum())
    requested = float(params["onoff_high_share"])
    observed = high / work if work else requested
    n = max(work, 1)
    allowed = SIGMAS * math.sqrt(requested * (1 - requested) / n) + 1 / n + HIGH_SHARE_SLACK
    error = abs(observed - requested)
    return pd.DataFrame(
        [
            {
                "work_phases": work,
                "high_phases": high,
                "requested_share": requested,
                "observed_share": observed,
                "abs_error": error,
                "allowed_error": allowed,
                "within_allowed": int(error <= allowed),
            }
        ]
    )


def tiling_profile(phases: pd.DataFrame, params: dict[str, Any]) -> pd.DataFrame:
    """One row of violation counts (all 0 for a sound dataset)."""
    clean = _clean(phases, params)
    duration = float(params["onoff_duration_s"])
    source = clean["source"].to_numpy()
    phase = clean["phase"].to_numpy()
    start = clean["start_s"].to_numpy()
    end = clean["end_s"].to_numpy()
    work = (clean["state"] != IDLE).to_numpy()
    first = np.insert(source[1:] != source[:-1], 0, True) if len(source) else np.zeros(0, bool)
    last = _last_of_source(clean)
    same = ~first[1:]  # pairs (i-1, i) within one source
    counts = {
        "sources_expected": int(params["onoff_sources"]),
        "sources_seen": int(first.sum()),
        "phases": len(clean),
        "skipped_phase_indexes": int(
            (phase[first] != 0).sum() + (same & (phase[1:] != phase[:-1] + 1)).sum()
        ),
        "gaps_or_overlaps": int((same & (start[1:] != end[:-1])).sum()),
        "sources_not_starting_at_0": int((start[first] != 0).sum()),
        "sources_not_ending_at_duration": int((end[last] != duration).sum()),
        "repeated_states": int((same & (work[1:] == work[:-1])).sum()),
    }
    bad = sum(
        v for k, v in counts.items() if k not in ("sources_expected", "sources_seen", "phases")
    )
    missing = counts["sources_expected"] - counts["sources_seen"]
    counts["missing_sources"] = int(missing)
    counts["within_allowed"] = int(bad == 0 and missing == 0)
    return pd.DataFrame([counts])
