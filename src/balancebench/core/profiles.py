"""Statistics of a dataset's *distribution*, computed for the Great Expectations suites.

GX checks values in a frame; the distribution checks (fitted Zipf exponent, drift of
the hot set, the phone stream's moving mean) need a statistic first. Each function here
returns such a statistic, and the generators turn them into small *profile* frames that a
suite in ``expectations/<generator>/profile_*.json`` checks with built-in expectations.

**Zipf exponent.** ``fit_zipf_exponent`` is a least-squares line through
``(log rank, log count)`` over the top ``top`` ranks, weighted by ``sqrt(count)`` (the
standard error of ``log count`` is about ``1 / sqrt(count)`` for Poisson counts). Ranks
come from sorting the observed counts, which makes sampling noise look like skew when
there are few tuples per key (measured: uniform keys, 25 tuples per key over 200 keys,
fit up to 0.12). ``zipf_fit_row`` therefore also fits ``bootstrap`` samples of the same
size drawn from the *requested* distribution and allows
``tolerance + max |bootstrap fit - requested|``: a failure means the data differ from the
requested Zipf law by more than sampling explains.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Ranks used by the exponent fit.
FIT_TOP_RANKS = 100
#: Draws per bootstrap sample (larger samples only narrow the band; capping keeps it fast).
BOOTSTRAP_MAX_DRAWS = 1_000_000


def fit_zipf_exponent(counts: np.ndarray, top: int = FIT_TOP_RANKS) -> float:
    """Exponent ``s`` of ``count ~ rank^-s`` over the ``top`` most frequent keys.

    ``counts`` are per-key counts in any order (zeros allowed). Returns 0.0 when fewer
    than two keys were seen.
    """
    c = np.sort(np.asarray(counts, dtype=np.float64))[::-1][:top]
    c = c[c > 0]
    if len(c) < 2:
        return 0.0
    rank = np.arange(1, len(c) + 1, dtype=np.float64)
    slope = np.polyfit(np.log(rank), np.log(c), 1, w=np.sqrt(c))[0]
    return float(-slope)


def zipf_probabilities(n_keys: int, zipf_s: float) -> np.ndarray:
    """``p(rank)`` for ranks 1..n_keys (float64, sums to 1)."""
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -float(zipf_s)
    return weights / weights.sum()


def zipf_fit_row(
    counts: np.ndarray,
    n_keys: int,
    requested_s: float,
    tolerance: float,
    *,
    bootstrap: int = 8,
    seed: int = 0,
) -> dict[str, Any]:
    """One profile row: the fit, the requested exponent and the error allowed. Over one
    key every exponent gives the same law (all tuples on it), so the requested one is
    the fit: there is nothing to tell apart."""
    counts = np.asarray(counts)
    tuples = int(counts.sum())
    fitted = fit_zipf_exponent(counts) if n_keys > 1 else float(requested_s)
    draws = min(tuples, BOOTSTRAP_MAX_DRAWS)
    band = 0.0
    if draws > 0 and n_keys > 1:
        rng = np.random.default_rng(seed)
        cdf = np.cumsum(zipf_probabilities(n_keys, requested_s))
        cdf[-1] = 1.0
        fits = []
        for _ in range(bootstrap):
            ranks = np.searchsorted(cdf, rng.random(draws), side="right")
            fits.append(fit_zipf_exponent(np.bincount(ranks, minlength=n_keys)))
        band = float(np.max(np.abs(np.array(fits) - requested_s)))
    error = abs(fitted - requested_s)
    return {
        "tuples": tuples,
        "keys_seen": int(np.count_nonzero(counts)),
        "requested_s": float(requested_s),
        "fitted_s": fitted,
        "abs_error": error,
        "sampling_band": band,
        "allowed_error": float(tolerance) + band,
        # GX compares columns; a 0/1 flag keeps the failing row readable in the report.
        "within_allowed": int(error <= float(tolerance) + band),
    }


def key_counts(keys: Any, n_keys: int) -> np.ndarray:
    """Counts of keys ``0..n_keys-1`` from an Arrow or numpy column, ignoring nulls and
    keys outside the domain (the table's own suite reports those)."""
    import pyarrow as pa

    if isinstance(keys, pa.ChunkedArray | pa.Array):
        keys = keys.drop_null().to_numpy()
    keys = np.asarray(keys)
    keys = keys[(keys >= 0) & (keys < n_keys)].astype(np.int64)
    return np.bincount(keys, minlength=n_keys)


def top_set(keys: np.ndarray, k: int) -> list[int]:
    """The ``k`` most frequent keys (ties: smaller key first), as a sorted list."""
    uniq, counts = np.unique(np.asarray(keys), return_counts=True)
    order = np.lexsort((uniq, -counts))[:k]
    return sorted(int(x) for x in uniq[order])
