"""``phone_stream``: phone numbers from a moving normal distribution (paper 001, §5).

Paper 001 feeds its query "10,000 distinct phone numbers drawn from a time-varying
normal distribution with mean mu and standard deviation sigma": in one experiment mu
moves periodically from 2000 to 8000, in the other sigma shrinks from 100 to 25 in 25
steps (less spread = more imbalance between parallel instances).

Table ``events``: ``tuple_id`` (int64, arrival order), ``event_time_s`` (float64,
Poisson arrivals at ``input_rate_tuples_per_s``), ``key`` (int64, the number's index in
``[0, n_keys)``), ``phone_number`` (int64, ``13_800_000_000 + key``, an 11-digit mobile
number for display).

**Schedule [interpretation]**: the stream is cut by arrival order into
``phone_stream_steps * phone_stream_cycles`` equal steps; step ``j`` uses schedule
position ``i = j mod steps`` with ``mu_i`` and ``sigma_i`` linear from ``*_from`` to
``*_to`` (``i / (steps - 1)``), so the schedule repeats ``cycles`` times ("moves
periodically"). The paper's two experiments are ``mean 2000 -> 8000`` (sigma fixed:
set ``sigma_from = sigma_to``) and ``sigma 100 -> 25`` (mean fixed). A draw is rounded
to the nearest index and clipped to the domain.

Validation profile: per step, the observed mean and standard deviation of the index
against the schedule, allowed 5 standard errors plus the rounding (and any clipping).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from balancebench.core.lazy import lazy_module
from balancebench.generators.common import (
    CHUNK_ROWS,
    Generator,
    Manifest,
    TableWriter,
    poisson_times,
    read_table,
)

SCHEMA = pa.schema(
    [
        ("tuple_id", pa.int64()),
        ("event_time_s", pa.float64()),
        ("key", pa.int64()),
        ("phone_number", pa.int64()),
    ]
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")
PHONE_BASE = 13_800_000_000


def schedule(params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(mu, sigma)`` per schedule position."""
    steps = params["phone_stream_steps"]
    frac = np.arange(steps) / (steps - 1) if steps > 1 else np.zeros(1)
    mu = (
        params["phone_stream_mean_from"]
        + (params["phone_stream_mean_to"] - params["phone_stream_mean_from"]) * frac
    )
    sigma = (
        params["phone_stream_sigma_from"]
        + (params["phone_stream_sigma_to"] - params["phone_stream_sigma_from"]) * frac
    )
    return mu, sigma


def step_of(tuple_ids: np.ndarray, n_tuples: int, total_steps: int) -> np.ndarray:
    """Step of each tuple: equal shares of the stream by arrival order."""
    return (np.asarray(tuple_ids, dtype=np.int64) * total_steps) // n_tuples


class PhoneStream(Generator):
    name = "phone_stream"
    description = "Phone-number indices from a normal law whose mean/sigma follow a schedule."
    reference = "paper 001 §5 (10,000 numbers; mu 2000 -> 8000; sigma 100 -> 25 in 25 steps)"
    params = (
        "n_tuples",
        "n_keys",
        "input_rate_tuples_per_s",
        "seed",
        "phone_stream_mean_from",
        "phone_stream_mean_to",
        "phone_stream_sigma_from",
        "phone_stream_sigma_to",
        "phone_stream_steps",
        "phone_stream_cycles",
    )
    own_params = {
        "phone_stream_mean_from": {
            "type": "number",
            "minimum": 0,
            "default": 2000.0,
            "title": "phone_stream: mean from",
            "description": "Mean number index at the first schedule step.",
        },
        "phone_stream_mean_to": {
            "type": "number",
            "minimum": 0,
            "default": 8000.0,
            "title": "phone_stream: mean to",
            "description": "Mean number index at the last schedule step.",
        },
        "phone_stream_sigma_from": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 100.0,
            "title": "phone_stream: sigma from",
            "description": "Standard deviation at the first schedule step.",
        },
        "phone_stream_sigma_to": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 25.0,
            "title": "phone_stream: sigma to",
            "description": "Standard deviation at the last schedule step.",
        },
        "phone_stream_steps": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100_000,
            "default": 25,
            "title": "phone_stream: steps",
            "description": "Schedule steps from the 'from' to the 'to' values.",
        },
        "phone_stream_cycles": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000,
            "default": 1,
            "title": "phone_stream: cycles",
            "description": "Times the schedule repeats over the stream.",
        },
    }

    def check(self, params: dict[str, Any]) -> None:
        n = params["n_keys"]
        for name in ("phone_stream_mean_from", "phone_stream_mean_to"):
            if params[name] > n - 1:
                raise ValueError(
                    f"{name}: {params[name]:g} is outside the number domain; expected a value "
                    f"in [0, n_keys - 1] = [0, {n - 1}]"
                )
        total = params["phone_stream_steps"] * params["phone_stream_cycles"]
        if total > params["n_tuples"]:
            raise ValueError(
                f"phone_stream_steps: {params['phone_stream_steps']} steps x "
                f"{params['phone_stream_cycles']} cycles exceed n_tuples={params['n_tuples']}; "
                "expected at most one step per tuple"
            )

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        rng = np.random.default_rng(params["seed"])
        n_tuples, n_keys = params["n_tuples"], params["n_keys"]
        mu, sigma = schedule(params)
        total_steps = params["phone_stream_steps"] * params["phone_stream_cycles"]
        last_time = 0.0
        with out.table("events", SCHEMA, delta_columns=("tuple_id",)) as write:
            for start in range(0, n_tuples, CHUNK_ROWS):
                rows = min(CHUNK_ROWS, n_tuples - start)
                ids = np.arange(start, start + rows, dtype=np.int64)
                pos = step_of(ids, n_tuples, total_steps) % len(mu)
                draws = rng.normal(mu[pos], sigma[pos])
                keys = np.clip(np.rint(draws), 0, n_keys - 1).astype(np.int64)
                times = poisson_times(rng, rows, params["input_rate_tuples_per_s"], last_time)
                last_time = float(times[-1])
                write(
                    pa.record_batch(
                        [
                            pa.array(ids),
                            pa.array(times),
                            pa.array(keys),
                            pa.array(PHONE_BASE + keys),
                        ],
                        schema=SCHEMA,
                    )
                )

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)
        p = manifest.params

        def schedule_profile() -> pd.DataFrame:
            t = read_table(dataset_dir, manifest, "events", ["tuple_id", "key"])
            ok = np.asarray(t.column("key").is_valid()) & np.asarray(
                t.column("tuple_id").is_valid()
            )
            ids = t.column("tuple_id").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
            keys = t.column("key").to_numpy(zero_copy_only=False)[ok].astype(np.float64)
            mu, sigma = schedule(p)
            total_steps = p["phone_stream_steps"] * p["phone_stream_cycles"]
            step = step_of(ids, p["n_tuples"], total_steps)
            rows = []
            for j in range(total_steps):
                k = keys[step == j]
                i = j % len(mu)
                n = len(k)
                mean = float(k.mean()) if n else float("nan")
                std = float(k.std()) if n > 1 else float("nan")
                # 5 standard errors + rounding to an index (+/-0.5) + clipping at the edges.
                clip = float(np.mean((k <= 0) | (k >= p["n_keys"] - 1))) if n else 0.0
                mean_allowed = 5 * sigma[i] / np.sqrt(max(n, 1)) + 0.5 + clip * p["n_keys"]
                std_allowed = 5 * sigma[i] / np.sqrt(2 * max(n - 1, 1)) + 0.5 + clip * p["n_keys"]
                mean_ok = n > 0 and abs(mean - mu[i]) <= mean_allowed
                std_ok = n > 1 and abs(std - sigma[i]) <= std_allowed
                rows.append(
                    {
                        "step": j,
                        "tuples": n,
                        "expected_mean": float(mu[i]),
                        "observed_mean": mean,
                        "mean_allowed_error": float(mean_allowed),
                        "expected_sigma": float(sigma[i]),
                        "observed_sigma": std,
                        "sigma_allowed_error": float(std_allowed),
                        "within_allowed": int(bool(mean_ok and std_ok)),
                    }
                )
            return pd.DataFrame(rows)

        frames["profile_schedule"] = schedule_profile
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        p = manifest.params
        return {
            "max_tuple_id": manifest.row_count - 1,
            "max_key": p["n_keys"] - 1,
            "min_phone_number": PHONE_BASE,
            "max_phone_number": PHONE_BASE + p["n_keys"] - 1,
            "total_steps": p["phone_stream_steps"] * p["phone_stream_cycles"],
        }
