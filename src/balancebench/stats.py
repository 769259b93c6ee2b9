"""Statistics over repetitions: the mean and its bootstrap 95% CI, and when two
strategies' figures are told apart.

One place for the sweep's cells, the models' summaries, the benchmarks and the README's
readings (``benchmarks/readme_readings.py``), so a "winner" means the same everywhere:
two means are *apart* only when their CIs do not overlap; otherwise there is no clear
difference between them.
"""

from __future__ import annotations

import warnings
from typing import Final

import numpy as np

#: Bootstrap resamples per interval (percentile method, seeded: the same values give the
#: same interval).
BOOTSTRAP_RESAMPLES: Final[int] = 2000


def repetition_stats(values: list[float], seed: int = 0) -> dict[str, float]:
    """Mean, std (ddof 1) and a percentile-bootstrap 95% CI of the mean.

    With one value, or values all equal, the interval is that value (there is no spread
    to resample)."""
    from scipy import stats

    arr = np.asarray(values, dtype=float)
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    if len(arr) < 2 or np.ptp(arr) == 0.0:
        lo = hi = mean
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = stats.bootstrap(
                (arr,),
                np.mean,
                confidence_level=0.95,
                n_resamples=BOOTSTRAP_RESAMPLES,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return {"mean": mean, "std": std, "ci95_lo": lo, "ci95_hi": hi, "n": float(len(arr))}


def intervals_apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two CIs ``(lo, hi)`` do not overlap: only then is a difference named."""
    return a[1] < b[0] or b[1] < a[0]
