"""Paper 003's input: the ``packets`` table, from a generated dataset or synthetic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from balancebench.core.lazy import lazy_module

# Loaded on first use: the model registry and its Params are read without it (lazy.py).
pd = lazy_module("pandas")

PACKET_COLUMNS = ("packet_id", "time_s", "branch", "size_mb", "value")

#: The packet generator's defaults, used by ``synthetic_packets`` (no dataset given).
SYNTHETIC_TRAFFIC: dict[str, Any] = {
    "branch_shares": (0.5, 0.3, 0.2),
    "base_rate_mb_per_s": 20.0,
    "burst_rate_mb_per_s": 100.0,
    "mean_burst_s": 2.0,
    "mean_calm_s": 8.0,
    "burst_focus": 0.8,
    "size_mb": 1.0,
    "value_max": 1000,
}


def synthetic_packets(total_mb: int, rng: np.random.Generator) -> pd.DataFrame:
    """A small in-memory ``packets`` table (unit tests, no dataset): the ``packets``
    generator's process at its defaults (``SYNTHETIC_TRAFFIC``), ``total_mb`` 1 MB packets.

    Calm/burst phases with exponential lengths; Poisson arrivals at the phase's rate; a
    burst's extra packets go to its hot branch with probability ``burst_focus``.
    """
    cfg = SYNTHETIC_TRAFFIC
    shares = np.asarray(cfg["branch_shares"])
    base, burst_rate = cfg["base_rate_mb_per_s"], cfg["burst_rate_mb_per_s"]
    q_hot = cfg["burst_focus"] * (burst_rate - base) / burst_rate
    n = int(round(total_mb / cfg["size_mb"]))
    p_burst = cfg["mean_burst_s"] / (cfg["mean_burst_s"] + cfg["mean_calm_s"])
    in_burst = bool(rng.random() < p_burst)
    times: list[np.ndarray] = []
    branches: list[np.ndarray] = []
    start, count = 0.0, 0
    while count < n:
        length = rng.exponential(cfg["mean_burst_s"] if in_burst else cfg["mean_calm_s"])
        rate = (burst_rate if in_burst else base) / cfg["size_mb"]
        k = int(rng.poisson(rate * length))
        t = np.sort(start + length * rng.random(k))
        branch = rng.choice(len(shares), size=k, p=shares)
        if in_burst:
            hot = int(rng.choice(len(shares), p=shares))
            branch = np.where(rng.random(k) < q_hot, hot, branch)
        times.append(t)
        branches.append(branch)
        count += k
        start += length
        in_burst = not in_burst
    time_s = np.concatenate(times)[:n]
    return pd.DataFrame(
        {
            "packet_id": np.arange(n, dtype=np.int64),
            "time_s": time_s,
            "branch": np.concatenate(branches)[:n].astype(np.int32),
            "size_mb": np.full(n, cfg["size_mb"]),
            "value": rng.integers(1, cfg["value_max"] + 1, n, dtype=np.int64),
        }
    )


def load_packets(dataset_dir: str | Path) -> pd.DataFrame:
    """The ``packets`` table of a generated dataset, in arrival order."""
    from balancebench.generators.common import load_manifest, read_table

    manifest = load_manifest(dataset_dir)
    table = read_table(dataset_dir, manifest, "packets", list(PACKET_COLUMNS)).to_pandas()
    return table.sort_values(["time_s", "packet_id"], kind="stable").reset_index(drop=True)
