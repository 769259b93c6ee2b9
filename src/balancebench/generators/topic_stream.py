"""``topic_stream``: a social-topic stream whose hot set drifts (paper 000's TOPK input).

Paper 000 runs TOPK (top 10 topics per window) on a 10 GB Weibo stream; here a
generated stand-in. Table ``events``: ``tuple_id`` (int64, arrival order),
``event_time_s`` (float64, Poisson arrivals at ``input_rate_tuples_per_s``), ``key``
(int64, the topic, in ``[0, n_keys)``), ``user`` (int64, the posting user, uniform over
``topic_stream_users``).

Popularity follows Zipf(``zipf_s``) over topic *ranks*; a rank-to-topic mapping (a seeded
random permutation) decides which topic is hot. Every ``topic_stream_drift_period_s``
seconds of event time the mapping drifts, which is what makes TOPK's balancing problem
dynamic: the keys that were cold become hot on other nodes.

**Drift rule [interpretation]** ("reshuffled fully or partly"): at each drift boundary
the topics of the ``m = max(1, round(topic_stream_drift_fraction * n_keys))`` hottest
ranks are re-drawn, each swapping its topic with a uniformly random rank of the whole
domain (in rank order, so a topic can move more than once). Fraction 1 is a full
reshuffle (a fresh permutation). Re-drawing the *head* is what changes the hot set, so
even a small fraction changes the top 10 with high probability; drift period 0 means no
drift.

Validation profiles: the Zipf exponent fitted per drift period (the mapping is fixed
inside a period) and, between consecutive periods, how many of the observed top-10
topics changed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from balancebench.core.lazy import lazy_module
from balancebench.core.profiles import key_counts, top_set, zipf_fit_row
from balancebench.generators.common import (
    CHUNK_ROWS,
    Generator,
    Manifest,
    TableWriter,
    poisson_times,
    read_table,
)
from balancebench.generators.zipf_stream import zipf_sampler

SCHEMA = pa.schema(
    [
        ("tuple_id", pa.int64()),
        ("event_time_s", pa.float64()),
        ("key", pa.int64()),
        ("user", pa.int64()),
    ]
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")
#: Size of the hot set the drift profile watches (paper 000's TOPK reports the top 10).
TOP_K = 10


def drift_mapping(rng: np.random.Generator, mapping: np.ndarray, fraction: float) -> np.ndarray:
    """The rank -> topic mapping after one drift step (see the module docstring)."""
    n = len(mapping)
    if fraction >= 1.0:
        return rng.permutation(mapping)
    m = max(1, round(fraction * n))
    out = mapping.copy()
    targets = rng.integers(0, n, size=m)
    for rank, other in zip(range(m), targets.tolist(), strict=True):
        out[rank], out[other] = out[other], out[rank]
    return out


def drift_periods(times: np.ndarray, drift_period_s: float) -> np.ndarray:
    """Drift period of each event time (all 0 when drift is off)."""
    if drift_period_s <= 0:
        return np.zeros(len(times), dtype=np.int64)
    return np.floor(np.asarray(times) / drift_period_s).astype(np.int64)


class TopicStream(Generator):
    name = "topic_stream"
    description = "Topic events with Zipf popularity whose hot set drifts over event time."
    reference = "paper 000 §5.1 TOPK (Weibo topics), drift reconstructed"
    params = (
        "n_tuples",
        "n_keys",
        "zipf_s",
        "input_rate_tuples_per_s",
        "seed",
        "topic_stream_drift_period_s",
        "topic_stream_drift_fraction",
        "topic_stream_users",
    )
    own_params = {
        "topic_stream_drift_period_s": {
            "type": "number",
            "minimum": 0,
            "default": 1.0,
            "title": "topic_stream: drift period (s)",
            "description": "Event-time seconds between drifts of the hot set; 0 = no drift.",
        },
        "topic_stream_drift_fraction": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "default": 0.1,
            "title": "topic_stream: drift fraction",
            "description": "Share of the hottest ranks whose topic is re-drawn at each drift "
            "(1 = full reshuffle).",
        },
        "topic_stream_users": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1_000_000_000,
            "default": 100_000,
            "title": "topic_stream: users",
            "description": "Distinct users posting (uniform).",
        },
    }

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        rng = np.random.default_rng(params["seed"])
        n_tuples, n_keys = params["n_tuples"], params["n_keys"]
        period_s = params["topic_stream_drift_period_s"]
        fraction = params["topic_stream_drift_fraction"]
        draw = zipf_sampler(rng, n_keys, params["zipf_s"])
        # One generator for the drift so the mapping sequence does not depend on chunking.
        drift_rng = np.random.default_rng([params["seed"], 1])
        mappings = [rng.permutation(n_keys).astype(np.int64)]
        last_time = 0.0
        with out.table("events", SCHEMA, delta_columns=("tuple_id",)) as write:
            for start in range(0, n_tuples, CHUNK_ROWS):
                rows = min(CHUNK_ROWS, n_tuples - start)
                times = poisson_times(rng, rows, params["input_rate_tuples_per_s"], last_time)
                last_time = float(times[-1])
                period = drift_periods(times, period_s)
                while len(mappings) <= int(period[-1]):
                    mappings.append(drift_mapping(drift_rng, mappings[-1], fraction))
                ranks = draw(rows)
                keys = np.empty(rows, dtype=np.int64)
                for p in np.unique(period).tolist():
                    sel = period == p
                    keys[sel] = mappings[p][ranks[sel]]
                write(
                    pa.record_batch(
                        [
                            pa.array(np.arange(start, start + rows, dtype=np.int64)),
                            pa.array(times),
                            pa.array(keys),
                            pa.array(rng.integers(0, params["topic_stream_users"], rows, np.int64)),
                        ],
                        schema=SCHEMA,
                    )
                )

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)
        p = manifest.params
        cache: dict[str, Any] = {}

        def by_period() -> tuple[np.ndarray, np.ndarray]:
            if "keys" not in cache:
                t = read_table(dataset_dir, manifest, "events", ["event_time_s", "key"])
                ok = np.asarray(t.column("key").is_valid()) & np.asarray(
                    t.column("event_time_s").is_valid()
                )
                keys = t.column("key").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
                times = t.column("event_time_s").to_numpy(zero_copy_only=False)[ok]
                cache["keys"] = keys
                cache["period"] = drift_periods(times, p["topic_stream_drift_period_s"])
            return cache["keys"], cache["period"]

        def zipf_fit() -> pd.DataFrame:
            keys, period = by_period()
            rows = []
            for q in np.unique(period).tolist():
                counts = key_counts(keys[period == q], p["n_keys"])
                row = zipf_fit_row(counts, p["n_keys"], p["zipf_s"], settings["zipf_fit_tolerance"])
                rows.append({"period": q, **row})
            return pd.DataFrame(rows)

        def drift() -> pd.DataFrame:
            keys, period = by_period()
            periods = np.unique(period).tolist()
            tops = {q: top_set(keys[period == q], TOP_K) for q in periods}
            rows = []
            for before, after in zip(periods, periods[1:], strict=False):
                changed = len(set(tops[after]) - set(tops[before]))
                rows.append(
                    {
                        "period": after,
                        "top_before": " ".join(map(str, tops[before])),
                        "top_after": " ".join(map(str, tops[after])),
                        "changed_topics": changed,
                        "drift_on": int(p["topic_stream_drift_period_s"] > 0),
                    }
                )
            columns = ["period", "top_before", "top_after", "changed_topics", "drift_on"]
            return pd.DataFrame(rows, columns=columns)

        frames["profile_zipf_fit"] = zipf_fit
        frames["profile_drift"] = drift
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        p = manifest.params
        period_s = p["topic_stream_drift_period_s"]
        # Boundaries inside the stream's nominal span n / rate (Poisson noise: +-1).
        nominal = int(p["n_tuples"] / p["input_rate_tuples_per_s"] / period_s) if period_s else 0
        return {
            "max_tuple_id": manifest.row_count - 1,
            "max_key": p["n_keys"] - 1,
            "max_user": p["topic_stream_users"] - 1,
            "drift_boundaries_min": max(0, nominal - 1),
            "drift_boundaries_max": nominal + 1 if period_s else 0,
        }
