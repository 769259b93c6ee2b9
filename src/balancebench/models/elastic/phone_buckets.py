"""The model's input: the ``phone_stream`` dataset (or a built-in sample drawn the same
way) and its bucket shares per schedule step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from balancebench.core.routing_table import BucketMap
from balancebench.generators.common import load_manifest, read_table
from balancebench.generators.phone_stream import schedule, step_of

#: Paper 001 §5: 10,000 distinct phone numbers.
PHONE_KEYS = 10_000
#: The paper's two §5.2 experiments, for the built-in sample (used when no dataset is given).
SAMPLE_SCHEDULES: dict[str, dict[str, float]] = {
    "mean_shift": {
        "phone_stream_mean_from": 2000.0,
        "phone_stream_mean_to": 8000.0,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 100.0,
        "phone_stream_steps": 4,
        "phone_stream_cycles": 2,
    },
    "sigma_shrink": {
        "phone_stream_mean_from": 5000.0,
        "phone_stream_mean_to": 5000.0,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 25.0,
        "phone_stream_steps": 25,
        "phone_stream_cycles": 1,
    },
}


@dataclass(frozen=True)
class PhoneInput:
    """The phone stream as the model uses it: keys in arrival order and their schedule step."""

    keys: np.ndarray
    step: np.ndarray
    total_steps: int
    mu: np.ndarray  # per step of the whole stream (cycles included)
    sigma: np.ndarray
    experiment: str  # "mean_shift", "sigma_shrink" or "constant"


def _experiment_of(schedule_params: dict[str, Any]) -> str:
    if schedule_params["phone_stream_sigma_from"] != schedule_params["phone_stream_sigma_to"]:
        return "sigma_shrink"
    if schedule_params["phone_stream_mean_from"] != schedule_params["phone_stream_mean_to"]:
        return "mean_shift"
    return "constant"


def _per_stream_step(schedule_params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    mu, sigma = schedule(schedule_params)
    total = int(schedule_params["phone_stream_steps"] * schedule_params["phone_stream_cycles"])
    pos = np.arange(total) % len(mu)
    return mu[pos], sigma[pos], total


def sample_phone_stream(
    schedule_name: str, n_tuples: int, rng: np.random.Generator, n_keys: int = PHONE_KEYS
) -> PhoneInput:
    """A small phone stream drawn like the ``phone_stream`` generator (same schedule, same
    rounding and clipping), for runs without a dataset (unit tests, quick looks)."""
    params = dict(SAMPLE_SCHEDULES[schedule_name])
    mu, sigma, total = _per_stream_step(params)
    ids = np.arange(n_tuples, dtype=np.int64)
    step = step_of(ids, n_tuples, total)
    draws = rng.normal(mu[step], sigma[step])
    keys = np.clip(np.rint(draws), 0, n_keys - 1).astype(np.int64)
    return PhoneInput(keys, step, total, mu, sigma, _experiment_of(params))


def read_phone_stream(dataset_dir: str) -> PhoneInput:
    """The ``events`` table of a generated ``phone_stream`` dataset (null rows dropped)."""
    manifest = load_manifest(dataset_dir)
    if manifest.generator != "phone_stream":
        raise ValueError(
            f"dataset_dir: {dataset_dir} holds a {manifest.generator!r} dataset; "
            "allowed: a phone_stream dataset"
        )
    table = read_table(dataset_dir, manifest, "events", ["tuple_id", "key"])
    ok = np.asarray(table.column("key").is_valid()) & np.asarray(
        table.column("tuple_id").is_valid()
    )
    ids = table.column("tuple_id").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    keys = table.column("key").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    p = manifest.params
    mu, sigma, total = _per_stream_step(p)
    order = np.argsort(ids, kind="stable")
    ids, keys = ids[order], keys[order]
    step = np.clip(step_of(ids, int(p["n_tuples"]), total), 0, total - 1)
    return PhoneInput(keys, step, total, mu, sigma, _experiment_of(p))


def step_bucket_shares(stream: PhoneInput, n_buckets: int) -> np.ndarray:
    """``(steps, B)``: share of each bucket in each schedule step's tuples (rows sum to 1)."""
    bucket = BucketMap.default(1, n_buckets).buckets(stream.keys).astype(np.int64)
    counts = np.bincount(
        stream.step * n_buckets + bucket, minlength=stream.total_steps * n_buckets
    ).reshape(stream.total_steps, n_buckets)
    totals = counts.sum(axis=1, keepdims=True).astype(np.float64)
    # A step without tuples (a corrupted dataset) falls back to even shares.
    return np.where(totals > 0, counts / np.maximum(totals, 1.0), 1.0 / n_buckets)
