"""Pure pieces of paper 003's strategies: names, detection, scoring, routing, recovery,
credit grants, migration segments, partial aggregates and the completed-volume series.

No SimPy here: the network (``packet_network``) and the strategies
(``backpressure_strategies``) call these.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

#: Strategy names (the keys of ``backpressure_strategies.STRATEGIES``). ``CREDIT`` also
#: names the credit flow control (``FLOW_CONTROLS``), the baseline strategy's mechanism.
CREDIT = "credit"
MIGRATION = "migration"
#: Flow control of the network's links: the paper's stop/resume nodes or Flink's credits.
STOP_RESUME = "stop_resume"
FLOW_CONTROLS = (STOP_RESUME, CREDIT)
RECOVERY_RULES = ("any_listed", "all_listed", "per_node")
#: How BWn is normalised in the branch score (``branch_scores``).
BW_NORMALISATIONS = ("max", "min_max")

#: Table 1 of paper 003 (alpha, beta at 5 GB); the grid values were lost in extraction,
#: so this grid is [reconstructed]: alpha 0.1-0.5, beta 0.1-0.7, alpha + beta <= 0.9.
ALPHA_BETA_GRID: tuple[tuple[float, float], ...] = tuple(
    (a / 10, b / 10) for a in range(1, 6) for b in range(1, 8) if a + b <= 9
)


def is_backpressured(
    queue_use_share: float, input_mb: float, output_mb: float, threshold_share: float = 0.8
) -> bool:
    """Paper 003 §2.1: queue use above the threshold and input above output (same interval)."""
    return queue_use_share > threshold_share and input_mb > output_mb


def branch_scores(
    queue_use_share: Sequence[float],
    io_mb_per_s: Sequence[float],
    bandwidth_mb_per_s: Sequence[float],
    alpha: float,
    beta: float,
    bw_normalisation: str = "max",
) -> np.ndarray:
    """``S_b = alpha*Q_b + beta*IOn_b + (1-alpha-beta)*(1-BWn_b)`` [reconstructed].

    ``IOn`` is min-max normalised over the branches (all 0 when equal). ``BWn`` is
    ``BW / max`` (``bw_normalisation = "max"``, the default) or min-max like ``IOn``
    (``"min_max"``: the slowest link 0, the fastest 1, all 1 when equal; the paper says
    only "normalised"). Lower = lighter.
    """
    q = np.asarray(queue_use_share, dtype=np.float64)
    io = np.asarray(io_mb_per_s, dtype=np.float64)
    bw = np.asarray(bandwidth_mb_per_s, dtype=np.float64)
    spread = io.max() - io.min()
    io_n = (io - io.min()) / spread if spread > 0 else np.zeros_like(io)
    if bw_normalisation == "min_max":
        bw_spread = bw.max() - bw.min()
        bw_n = (bw - bw.min()) / bw_spread if bw_spread > 0 else np.ones_like(bw)
    elif bw_normalisation == "max":
        bw_n = bw / bw.max()
    else:
        raise ValueError(
            f"bw_normalisation: {bw_normalisation!r}; allowed values: {list(BW_NORMALISATIONS)}"
        )
    return alpha * q + beta * io_n + (1.0 - alpha - beta) * (1.0 - bw_n)


def released_nodes(
    listed: Iterable[int], use: Sequence[float], level: float, rule: str
) -> set[int]:
    """Step 5: the listed nodes whose migration ends now (default routing restored).
    ``any_listed`` (the paper): all of them once any is below ``level``; ``all_listed``:
    all of them once every one is; ``per_node``: each one below it."""
    listed = set(listed)
    below = {b for b in listed if use[b] < level}
    if rule == "any_listed":
        return listed if below else set()
    if rule == "all_listed":
        return listed if listed and below == listed else set()
    if rule == "per_node":
        return below
    raise ValueError(f"recovery_rule: {rule!r}; allowed values: {list(RECOVERY_RULES)}")


def choose_light_branch(scores: Sequence[float], excluded: Iterable[int]) -> int | None:
    """Lowest-scoring branch not in ``excluded`` (lowest index on ties); None if none."""
    banned = set(excluded)
    candidates = [b for b in range(len(scores)) if b not in banned]
    if not candidates:
        return None
    return min(candidates, key=lambda b: (scores[b], b))


def migration_routes(n_branches: int, listed: Iterable[int], scores: Sequence[float]) -> list[int]:
    """Tag -> branch: home, except listed (heavy) tags go to the lightest unlisted branch."""
    listed = sorted(set(listed))
    routes = list(range(n_branches))
    light = choose_light_branch(scores, listed)
    if light is not None:
        for heavy in listed:
            routes[heavy] = light
    return routes


def credit_grant(exclusive_slots: int, queued: int, outstanding: int) -> int:
    """Credits a receiver can add to one channel: its free exclusive slots not yet granted."""
    return max(0, exclusive_slots - queued - outstanding)


def exclusive_slots(capacity: int, channels: int) -> list[int]:
    """Queue slots split evenly over input channels (the remainder to the first ones)."""
    base, extra = divmod(capacity, channels)
    return [base + (1 if c < extra else 0) for c in range(channels)]


def record_segment(segments: list[list[int]], tag: int, offset: int, branch: int) -> None:
    """Append packet ``offset`` of ``tag`` sent to ``branch`` to ``segments`` (rows
    ``[tag, offset, length, branch]``), extending the tag's last segment when contiguous."""
    for segment in reversed(segments):
        if segment[0] == tag:
            if segment[3] == branch and segment[1] + segment[2] == offset:
                segment[2] += 1
                return
            break
    segments.append([tag, offset, 1, branch])


def expand_segments(segments: Iterable[Sequence[int]]) -> set[tuple[int, int, int]]:
    """Every ``(tag, offset, branch)`` the segments cover."""
    return {
        (tag, offset + k, branch) for tag, offset, length, branch in segments for k in range(length)
    }


def combine_partials(
    sums: np.ndarray, counts: np.ndarray, maxima: np.ndarray
) -> dict[int, dict[str, float]]:
    """Per-tag result from per (tag, branch) partials (arrays ``[tag, branch]``): sum of
    sums, sum of counts, max of maxima (branches with data), mean = sum / count (Eq. 5)."""
    out: dict[int, dict[str, float]] = {}
    for tag in range(sums.shape[0]):
        count = int(counts[tag].sum())
        if count == 0:
            continue
        total = int(sums[tag].sum())
        out[tag] = {
            "sum": total,
            "count": count,
            "max": int(maxima[tag][counts[tag] > 0].max()),
            "mean": total / count,
        }
    return out


def completed_fraction_series(
    counted_s: np.ndarray, size_mb: np.ndarray, step_s: float
) -> tuple[list[float], list[float]]:
    """Share of the total volume counted by ``t = step, 2*step, ...`` up to the first
    sample at or after the last count (so the series ends at 1)."""
    total = float(size_mb.sum())
    end = float(counted_s.max()) if len(counted_s) else 0.0
    samples = max(1, math.ceil(end / step_s - 1e-12))
    times = [step_s * (k + 1) for k in range(samples)]
    order = np.argsort(counted_s, kind="stable")
    cumulative = np.concatenate([[0.0], np.cumsum(size_mb[order])])
    done = np.searchsorted(counted_s[order], np.asarray(times), side="right")
    return times, [float(cumulative[k] / total) for k in done]
