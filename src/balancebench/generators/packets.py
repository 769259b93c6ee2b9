"""``packets``: bursty, unevenly tagged packet traffic (paper 003's traffic counting).

Paper 003 (§4, experiment) tests back-pressure handling with *traffic counting*, a word
count over packets: every packet is 1 MB and carries a tag naming which of 3 branches
processes it. The input is *bursty* (the sending rate suddenly rises and falls) and
*uneven* (packets with the same tag pile up, so branches get very different loads in the
same period). The totals tested are 500 MB, 1 GB, 2 GB and 5 GB. The paper gives no
rates, shares or burst lengths; the process below is reconstructed from that description.

Table ``packets`` (arrival order): ``packet_id`` (int64, 0..n-1), ``time_s`` (float64,
arrival time, increasing), ``branch`` (int32 in ``[0, packets_branches)``), ``size_mb``
(float64, ``packets_size_mb``), ``value`` (int64 in ``[1, 1000]``: the number the
counting job aggregates per branch, e.g. records in the packet; uniform and independent
of everything else; paper 003 needs sum, max and mean per branch to stay correct when
segments of a branch are migrated). ``n = packets_total_mb / packets_size_mb`` packets
(a count of packets, not bytes on disk).

Table ``rate_phases`` (the ground truth of the rate process, one row per phase):
``phase_id`` (int64), ``start_s``, ``end_s`` (float64; the phases tile
``[0, last arrival]``, the last one is cut there), ``state`` (``"calm"`` or ``"burst"``),
``hot_branch`` (int32, the branch a burst favours; -1 when calm), ``rate_mb_per_s``.

Rules [reconstructed]:

- **Bursts** (a Markov-modulated Poisson process): calm and burst phases alternate with
  exponential lengths (means ``packets_mean_calm_s``, ``packets_mean_burst_s``); the
  first phase is drawn from the stationary probabilities. Packets arrive as a Poisson
  process at ``packets_base_rate_mb_per_s / size`` while calm and at
  ``packets_burst_rate_mb_per_s / size`` during a burst.
- **Unevenness**: each burst picks a *hot branch* with the probabilities
  ``packets_branch_shares``. A packet sent while calm gets its branch from the shares; in
  a burst, each of the extra packets (the part of the rate above the base rate) goes to
  the hot branch with probability ``packets_burst_focus`` and otherwise follows the
  shares. So a packet in a burst goes to the hot branch with extra probability
  ``q = focus * (burst - base) / burst``. Because the hot branch is itself drawn with the
  shares, every packet's branch has marginal probability ``share[b]``: the long-run shares
  are the requested ones, while within a burst one branch gets much more than its share.

Profiles checked by the suites (see ``validation_frames``):

- ``profile_branch_shares`` (one row per branch): observed share vs the share expected
  given the recorded phases (``sum over packets of P(branch | phase)``), allowed
  ``4`` standard deviations (the counts are Poisson-binomial given the phases) plus one
  packet (counts are whole numbers) ``/ n + 0.005``; and the share of bursts whose hot
  branch is ``b`` vs ``share[b]`` (binomial over the ``K`` bursts: ``4`` sd ``+ 1/K +
  0.02``). The observed share alone is not compared with the requested share: with few
  bursts one hot branch can carry a large part of all packets, which is the point.
- ``profile_burstiness`` (one row per statistic): the time fraction in bursts vs
  ``mean_burst / (mean_burst + mean_calm)`` (two-state Markov chain, ``a = 1/mean_calm``,
  ``b = 1/mean_burst``: the variance of a time average over the span ``T`` is
  ``2ab / ((a+b)^3 T)``, capped at the stationary ``p(1-p)``; allowed ``4`` sd + 0.01);
  the mean rate ``n * size / T`` vs the long-run mean ``p * burst + (1-p) * base``
  (compared as packets, ``n`` vs ``mean * T / size``: ``4`` sd of the count, Poisson
  plus burst-time parts, + 8 for the skewed tails when ``n`` is small, + 1%); the packet
  count vs the integral of the recorded rates (``Gamma(n, 1)``: ``4 sqrt`` + 8); and the
  peak packets in a whole 1 s bin, which must reach the largest count the recorded bursts
  imply minus ``4 sqrt`` - 1 (one-sided: the peaks are there).

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

PACKETS_SCHEMA = pa.schema(
    [
        ("packet_id", pa.int64()),
        ("time_s", pa.float64()),
        ("branch", pa.int32()),
        ("size_mb", pa.float64()),
        ("value", pa.int64()),
    ]
)
PHASES_SCHEMA = pa.schema(
    [
        ("phase_id", pa.int64()),
        ("start_s", pa.float64()),
        ("end_s", pa.float64()),
        ("state", pa.string()),
        ("hot_branch", pa.int32()),
        ("rate_mb_per_s", pa.float64()),
    ]
)
CALM, BURST = "calm", "burst"
#: ``value`` is uniform in ``[1, VALUE_MAX]``.
VALUE_MAX = 1000
#: Most packets a dataset may have (the same bound as ``n_tuples``).
MAX_PACKETS = 2_000_000_000
#: Phases first drawn (then doubled) when the arrivals run past the last one.
PHASE_BATCH = 4096
#: Standard deviations a profile statistic may stray, plus the absolute slack below.
SIGMAS = 4.0
SHARE_SLACK = 0.005
HOT_SHARE_SLACK = 0.02
BURST_FRACTION_SLACK = 0.01
MEAN_RATE_REL_SLACK = 0.01
#: With ``n`` arrivals fixed, the integrated rate up to the last one is Gamma(n, 1):
#: ``P(|X - n| > 4 sqrt(n) + 8) <= 2 exp(-8)`` (sub-gamma tail bound, scale 1).
GAMMA_SLACK = SIGMAS**2 / 2
SHARES_SUM_TOLERANCE = 1e-9
BURSTINESS_STATISTICS = (
    "burst_time_fraction",
    "mean_rate_mb_per_s",
    "packets_given_phases",
    "peak_packets_per_1s",
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")


OWN_PARAMS: dict[str, dict[str, Any]] = {
    "packets_total_mb": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10**15,
        "default": 1000,
        "examples": [500, 1000, 2000, 5000],
        "title": "Total traffic (MB)",
        "description": "Traffic volume; packets = total / packet size (a count of packets, "
        "not bytes on disk). Paper 003's presets: 500, 1000 (1 GB), 2000, 5000 MB.",
    },
    "packets_size_mb": positive_number_spec(
        1.0, "Packet size (MB)", "Size of every packet (paper 003: 1 MB)."
    ),
    "packets_branches": {
        "type": "integer",
        "minimum": 1,
        "maximum": 64,
        "default": 3,
        "title": "Branches",
        "description": "Branches a packet's tag can name (paper 003: 3).",
    },
    "packets_branch_shares": {
        "type": "array",
        "items": {"type": "number", "minimum": 0, "maximum": 1},
        "minItems": 1,
        "maxItems": 64,
        "default": [0.5, 0.3, 0.2],
        "title": "Branch shares",
        "description": "Long-run share of packets per branch (one per branch, sum 1); also "
        "the probability that a burst favours that branch.",
    },
    "packets_base_rate_mb_per_s": positive_number_spec(
        20.0, "Base rate (MB/s)", "Sending rate between bursts (Poisson arrivals)."
    ),
    "packets_burst_rate_mb_per_s": positive_number_spec(
        100.0, "Burst rate (MB/s)", "Sending rate during a burst (>= the base rate)."
    ),
    "packets_mean_burst_s": positive_number_spec(
        2.0, "Mean burst length (s)", "Burst lengths are exponential with this mean."
    ),
    "packets_mean_calm_s": positive_number_spec(
        8.0,
        "Mean calm length (s)",
        "Lengths of the calm phases between bursts are exponential with this mean.",
    ),
    "packets_burst_focus": {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "default": 0.8,
        "title": "Burst focus",
        "description": "Probability that an extra packet of a burst (above the base rate) "
        "goes to the burst's hot branch instead of following the shares.",
    },
}


def packet_count(params: dict[str, Any]) -> int:
    """``packets_total_mb / packets_size_mb``, rounded to the nearest whole packet."""
    return int(round(params["packets_total_mb"] / params["packets_size_mb"]))


def hot_probability(params: dict[str, Any]) -> float:
    """Extra probability ``q`` that a packet sent during a burst goes to the hot branch."""
    base, burst = params["packets_base_rate_mb_per_s"], params["packets_burst_rate_mb_per_s"]
    return params["packets_burst_focus"] * (burst - base) / burst


def _shares(params: dict[str, Any]) -> np.ndarray:
    shares = np.asarray(params["packets_branch_shares"], dtype=np.float64)
    return shares / shares.sum()


class _RatePhases:
    """Alternating calm/burst phases, drawn in batches as far as the arrivals need.

    ``op_end`` is the integral of the packet rate up to each phase's end (the
    "operational time" in which arrivals form a unit-rate Poisson process).
    """

    def __init__(self, rng: np.random.Generator, params: dict[str, Any]) -> None:
        self.rng = rng
        self.shares = _shares(params)
        size = params["packets_size_mb"]
        self.rate_mb = (params["packets_base_rate_mb_per_s"], params["packets_burst_rate_mb_per_s"])
        self.rate_packets = np.array(self.rate_mb) / size
        self.mean_s = np.array([params["packets_mean_calm_s"], params["packets_mean_burst_s"]])
        p_burst = self.mean_s[1] / self.mean_s.sum()
        self.first_burst = int(rng.random() < p_burst)
        self.start = np.empty(0)
        self.end = np.empty(0)
        self.burst = np.empty(0, dtype=bool)
        self.hot = np.empty(0, dtype=np.int32)
        self.packets_per_s = np.empty(0)
        self.op_start = np.empty(0)
        self.op_end = np.empty(0)

    def cover(self, op_time: float) -> None:
        while not len(self.op_end) or self.op_end[-1] < op_time:
            # Doubling keeps the copying linear in the number of phases.
            self._extend(max(PHASE_BATCH, len(self.op_end)))

    def _extend(self, count: int) -> None:
        first = len(self.start)
        burst = (np.arange(first, first + count) + self.first_burst) % 2 == 1
        duration = self.rng.standard_exponential(count) * self.mean_s[burst.astype(np.intp)]
        hot = self.rng.choice(len(self.shares), count, p=self.shares).astype(np.int32)
        hot[~burst] = -1
        rate = self.rate_packets[burst.astype(np.intp)]
        t0 = self.end[-1] if first else 0.0
        op0 = self.op_end[-1] if first else 0.0
        end = t0 + np.cumsum(duration)
        op_end = op0 + np.cumsum(rate * duration)
        self.start = np.concatenate([self.start, np.concatenate([[t0], end[:-1]])])
        self.op_start = np.concatenate([self.op_start, np.concatenate([[op0], op_end[:-1]])])
        self.end = np.concatenate([self.end, end])
        self.op_end = np.concatenate([self.op_end, op_end])
        self.burst = np.concatenate([self.burst, burst])
        self.hot = np.concatenate([self.hot, hot])
        self.packets_per_s = np.concatenate([self.packets_per_s, rate])

    def table(self, last_phase: int, last_time_s: float) -> pa.Table:
        """Phases ``0..last_phase``, the last one cut at ``last_time_s``."""
        k = last_phase + 1
        end = self.end[:k].copy()
        end[-1] = last_time_s
        states = pa.DictionaryArray.from_arrays(
            pa.array(self.burst[:k].astype(np.int8)), pa.array([CALM, BURST])
        ).dictionary_decode()
        rate_mb = np.where(self.burst[:k], self.rate_mb[1], self.rate_mb[0])
        return pa.table(
            [
                pa.array(np.arange(k, dtype=np.int64)),
                pa.array(self.start[:k]),
                pa.array(end),
                states,
                pa.array(self.hot[:k]),
                pa.array(rate_mb),
            ],
            schema=PHASES_SCHEMA,
        )


class PacketTraffic(Generator):
    name = "packets"
    description = "1 MB packets tagged for one of 3 branches, bursty rate and uneven tags."
    reference = "paper 003 §4 (traffic counting: bursty, uneven packet traffic)"
    kind = "packets"
    main_table = "packets"
    params = (*OWN_PARAMS, "seed")
    own_params = OWN_PARAMS

    def check(self, params: dict[str, Any]) -> None:
        shares = params["packets_branch_shares"]
        branches = params["packets_branches"]
        if len(shares) != branches:
            raise ValueError(
                f"packets_branch_shares: {len(shares)} shares {shares} but packets_branches "
                f"is {branches}; expected one share per branch"
            )
        total = math.fsum(shares)
        if abs(total - 1.0) > SHARES_SUM_TOLERANCE:
            raise ValueError(
                f"packets_branch_shares: {shares} sum to {total!r}; expected a sum of 1 "
                f"(within {SHARES_SUM_TOLERANCE})"
            )
        base, burst = params["packets_base_rate_mb_per_s"], params["packets_burst_rate_mb_per_s"]
        if burst < base:
            raise ValueError(
                f"packets_burst_rate_mb_per_s: {burst} is below packets_base_rate_mb_per_s "
                f"{base}; expected a burst rate >= the base rate"
            )
        total_mb, size_mb = params["packets_total_mb"], params["packets_size_mb"]
        n = total_mb / size_mb
        if abs(n - round(n)) > 1e-9 * max(n, 1.0) or round(n) < 1:
            raise ValueError(
                f"packets_size_mb: packets_total_mb {total_mb} / packets_size_mb {size_mb} = "
                f"{n:g} is not a whole number of packets; expected a packet size that divides "
                f"the total"
            )
        if round(n) > MAX_PACKETS:
            raise ValueError(
                f"packets_total_mb: {total_mb} MB in {size_mb} MB packets is {n:.3g} packets; "
                f"expected at most {MAX_PACKETS} packets"
            )

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        phase_rng, gap_rng, branch_rng, value_rng = (
            np.random.default_rng(s) for s in np.random.SeedSequence(params["seed"]).spawn(4)
        )
        n = packet_count(params)
        size_mb = float(params["packets_size_mb"])
        shares_cdf = np.cumsum(_shares(params))
        shares_cdf[-1] = 1.0
        branches = params["packets_branches"]
        q_hot = hot_probability(params)
        phases = _RatePhases(phase_rng, params)
        op_time = 0.0
        last_phase, last_time = 0, 0.0
        with out.table("packets", PACKETS_SCHEMA) as write:
            for start in range(0, n, CHUNK_ROWS):
                rows = min(CHUNK_ROWS, n - start)
                op = op_time + np.cumsum(gap_rng.standard_exponential(rows))
                op_time = float(op[-1])
                phases.cover(op_time)
                k = np.searchsorted(phases.op_end, op, side="right")
                k = np.minimum(k, len(phases.op_end) - 1)
                times = phases.start[k] + (op - phases.op_start[k]) / phases.packets_per_s[k]
                times = np.minimum(times, phases.end[k])
                hot = phases.burst[k] & (branch_rng.random(rows) < q_hot)
                by_share = np.searchsorted(shares_cdf, branch_rng.random(rows), side="right")
                branch = np.where(hot, phases.hot[k], np.minimum(by_share, branches - 1))
                last_phase, last_time = int(k[-1]), float(times[-1])
                write(
                    pa.record_batch(
                        [
                            pa.array(np.arange(start, start + rows, dtype=np.int64)),
                            pa.array(times),
                            pa.array(branch.astype(np.int32)),
                            pa.array(np.full(rows, size_mb)),
                            pa.array(value_rng.integers(1, VALUE_MAX + 1, rows, dtype=np.int64)),
                        ],
                        schema=PACKETS_SCHEMA,
                    )
                )
        out.write_table("rate_phases", phases.table(last_phase, last_time))

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)
        params = manifest.params

        def load() -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
            packets = read_table(dataset_dir, manifest, "packets", ["time_s", "branch"])
            phases = read_table(dataset_dir, manifest, "rate_phases").to_pandas()
            return (
                packets.column("time_s").to_numpy(zero_copy_only=False),
                packets.column("branch").to_numpy(zero_copy_only=False),
                phases,
            )

        def shares() -> pd.DataFrame:
            times, branch, phases = load()
            return branch_shares_profile(times, branch, phases, params)

        def burstiness() -> pd.DataFrame:
            times, _, phases = load()
            return burstiness_profile(times, phases, params)

        frames["profile_branch_shares"] = shares
        frames["profile_burstiness"] = burstiness
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        n = packet_count(manifest.params)
        return {
            "expected_packets": n,
            "max_packet_id": n - 1,
            "max_branch": manifest.params["packets_branches"] - 1,
            "value_max": VALUE_MAX,
        }


def _clean_phases(phases: pd.DataFrame, branches: int) -> pd.DataFrame:
    """Phases with usable start, end and state, sorted by start (corrupt rows dropped: the
    ``rate_phases`` suite reports them)."""
    ok = phases[["start_s", "end_s", "state"]].notna().all(axis=1)
    ok &= phases["state"].isin([CALM, BURST]) & (phases["end_s"] >= phases["start_s"])
    clean = phases[ok].sort_values("start_s", kind="stable").reset_index(drop=True)
    hot = pd.to_numeric(clean["hot_branch"], errors="coerce").fillna(-1).astype(np.int64)
    clean["hot"] = np.where(
        (clean["state"] == BURST) & (hot >= 0) & (hot < branches), hot, -1
    ).astype(np.int64)
    return clean


def _phase_of(times: np.ndarray, phases: pd.DataFrame) -> np.ndarray:
    """Index (in ``phases``) of the phase each time falls in (clipped to the first/last)."""
    k = np.searchsorted(phases["start_s"].to_numpy(), times, side="right") - 1
    return np.clip(k, 0, max(len(phases) - 1, 0))


def _valid_packets(
    times: np.ndarray, branch: np.ndarray | None, branches: int
) -> tuple[np.ndarray, np.ndarray]:
    times = np.asarray(times, dtype=np.float64)
    if branch is None:
        ok = np.isfinite(times)
        return times[ok], np.zeros(int(ok.sum()), dtype=np.int64)
    branch = np.asarray(branch, dtype=np.float64)
    ok = np.isfinite(times) & np.isfinite(branch) & (branch >= 0) & (branch < branches)
    return times[ok], branch[ok].astype(np.int64)


def branch_shares_profile(
    times: np.ndarray, branch: np.ndarray, phases: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    """One row per branch: observed share vs the share expected given the recorded phases,
    and the hot-branch share of the bursts vs the requested share."""
    branches = params["packets_branches"]
    shares = np.asarray(params["packets_branch_shares"], dtype=np.float64)
    if len(shares) != branches:  # cannot happen for a checked dataset; keep going anyway
        shares = np.full(branches, 1.0 / branches)
    shares = shares / shares.sum()
    times, branch = _valid_packets(times, branch, branches)
    phases = _clean_phases(phases, branches)
    n = len(times)
    observed = np.bincount(branch, minlength=branches)[:branches].astype(np.float64)
    q = hot_probability(params)
    if n and len(phases):
        hot = phases["hot"].to_numpy()[_phase_of(times, phases)]
        # P(branch b | phase) = (1 - q) * share[b] + q * [b == hot], for burst phases.
        in_burst = hot >= 0
        expected = np.zeros(branches)
        variance = np.zeros(branches)
        hot_counts = np.bincount(hot[in_burst], minlength=branches)[:branches]
        calm_n = float(n - in_burst.sum())
        burst_n = float(in_burst.sum())
        for b in range(branches):
            p_calm = shares[b]
            p_burst_other = (1 - q) * shares[b]
            p_burst_hot = p_burst_other + q
            others = burst_n - hot_counts[b]
            expected[b] = calm_n * p_calm + others * p_burst_other + hot_counts[b] * p_burst_hot
            variance[b] = (
                calm_n * p_calm * (1 - p_calm)
                + others * p_burst_other * (1 - p_burst_other)
                + hot_counts[b] * p_burst_hot * (1 - p_burst_hot)
            )
    else:
        expected = shares * n
        variance = n * shares * (1 - shares)
    burst_hot = phases.loc[phases["hot"] >= 0, "hot"].to_numpy()
    bursts = len(burst_hot)
    hot_observed = np.bincount(burst_hot, minlength=branches)[:branches] / max(bursts, 1)
    rows = []
    for b in range(branches):
        share_error = abs(observed[b] - expected[b]) / n if n else 0.0
        # 4 sd + one packet (continuity: counts are whole numbers) + slack.
        share_allowed = (SIGMAS * math.sqrt(variance[b]) + 1) / n + SHARE_SLACK if n else 1.0
        hot_error = abs(hot_observed[b] - shares[b]) if bursts else 0.0
        k = max(bursts, 1)
        hot_allowed = SIGMAS * math.sqrt(shares[b] * (1 - shares[b]) / k) + 1 / k
        hot_allowed += HOT_SHARE_SLACK
        rows.append(
            {
                "branch": b,
                "packets": int(observed[b]),
                "requested_share": float(shares[b]),
                "observed_share": float(observed[b] / n) if n else 0.0,
                "expected_share_given_phases": float(expected[b] / n) if n else 0.0,
                "abs_error": float(share_error),
                "allowed_error": float(share_allowed),
                "bursts": bursts,
                "hot_burst_share": float(hot_observed[b]),
                "hot_abs_error": float(hot_error),
                "hot_allowed_error": float(hot_allowed),
                "within_allowed": int(share_error <= share_allowed and hot_error <= hot_allowed),
            }
        )
    return pd.DataFrame(rows)


def _time_average_variance(a: float, b: float, span_s: float) -> float:
    """Variance of the time fraction a two-state Markov chain (rates ``a``: 0 -> 1,
    ``b``: 1 -> 0, started stationary) spends in state 1 over ``span_s``: the asymptotic
    ``2ab / ((a+b)^3 T)``, capped at the stationary variance ``p(1-p)``."""
    p = a / (a + b)
    if span_s <= 0:
        return p * (1 - p)
    return min(2 * a * b / ((a + b) ** 3 * span_s), p * (1 - p))


def burstiness_profile(
    times: np.ndarray, phases: pd.DataFrame, params: dict[str, Any]
) -> pd.DataFrame:
    """One row per statistic in ``BURSTINESS_STATISTICS`` (observed, expected, allowed)."""
    size = params["packets_size_mb"]
    base, burst = params["packets_base_rate_mb_per_s"], params["packets_burst_rate_mb_per_s"]
    mean_calm, mean_burst = params["packets_mean_calm_s"], params["packets_mean_burst_s"]
    times, _ = _valid_packets(times, None, 1)
    phases = _clean_phases(phases, params["packets_branches"])
    n = len(times)
    span = float(times.max()) if n else 0.0
    to_burst, to_calm = 1.0 / mean_calm, 1.0 / mean_burst
    fraction_variance = _time_average_variance(to_burst, to_calm, span)
    p_burst = mean_burst / (mean_calm + mean_burst)

    start = phases["start_s"].to_numpy()
    end = phases["end_s"].to_numpy()
    is_burst = (phases["state"] == BURST).to_numpy()
    rate_packets = np.where(is_burst, burst, base) / size
    length = end - start
    burst_fraction = float(length[is_burst].sum() / span) if span > 0 else 0.0

    # Mean rate, compared as packets: n vs the long-run rate times the span, allowed 4 sd of
    # the count (Poisson part + the burst-time part) + the sub-gamma scale term (n is fixed
    # and the span random, whose tails are skewed for small n); shown in MB/s.
    mean_rate = p_burst * burst + (1 - p_burst) * base
    if span > 0:
        observed_rate = n * size / span
        mean_packets = mean_rate * span / size
        count_variance = mean_packets + ((burst - base) * span / size) ** 2 * fraction_variance
        rate_allowed = (SIGMAS * math.sqrt(count_variance) + GAMMA_SLACK) * size / span
        rate_allowed += MEAN_RATE_REL_SLACK * mean_rate
    else:
        observed_rate, rate_allowed = 0.0, mean_rate

    expected_packets = float((rate_packets * length).sum())

    # Expected packets per whole 1 s bin given the phases: the rate integral is piecewise
    # linear between phase boundaries.
    bins = int(math.floor(span))
    if bins >= 1 and len(phases):
        boundary = np.concatenate([[start[0]], end])
        cumulative = np.concatenate([[0.0], np.cumsum(rate_packets * length)])
        edges = np.interp(np.arange(bins + 1, dtype=np.float64), boundary, cumulative)
        expected_peak = float(np.diff(edges).max())
        counts = np.bincount(times[times < bins].astype(np.int64), minlength=bins)
        observed_peak = float(counts.max())
    else:
        expected_peak = observed_peak = 0.0

    rows = [
        (
            "burst_time_fraction",
            burst_fraction,
            p_burst,
            abs(burst_fraction - p_burst),
            SIGMAS * math.sqrt(fraction_variance) + BURST_FRACTION_SLACK,
        ),
        (
            "mean_rate_mb_per_s",
            observed_rate,
            mean_rate,
            abs(observed_rate - mean_rate),
            rate_allowed,
        ),
        (
            "packets_given_phases",
            float(n),
            expected_packets,
            abs(n - expected_packets),
            SIGMAS * math.sqrt(expected_packets) + GAMMA_SLACK,
        ),
        (
            "peak_packets_per_1s",
            observed_peak,
            expected_peak,
            max(0.0, expected_peak - observed_peak),
            SIGMAS * math.sqrt(expected_peak) + 1,
        ),
    ]
    frame = pd.DataFrame(
        rows, columns=["statistic", "observed", "expected", "abs_error", "allowed_error"]
    )
    frame["within_allowed"] = (frame["abs_error"] <= frame["allowed_error"]).astype(int)
    return frame
