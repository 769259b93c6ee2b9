"""Tuple-level protocol simulation: a sliding-window count per number over a bucket map
with window or state recreation, to check that neither loses or duplicates a result and
that the rate-based model counts the protocols' costs right."""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from balancebench.core.routing_table import BucketMap
from balancebench.models.elastic.reconfiguration_rules import PROTOCOLS, state_transfer_s

_TICKS_PER_S = 1_000_000
_FAR = 1 << 62


@dataclass
class _Hold:
    """One task's hold on one bucket: the tuples it accepts and the windows it emits."""

    accept_from: int = -_FAR  # tick, inclusive
    accept_to: int = _FAR  # tick, exclusive
    emit_from: int = -_FAR  # window index, inclusive
    emit_to: int = _FAR  # window index, exclusive
    counts: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    per_slot: Counter = field(default_factory=Counter)  # tuples processed per slide slot
    buffering: bool = False
    buffer: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ProtocolRun:
    """Result of ``simulate_windowed_count``: the answer multiset and the protocol costs."""

    results: Counter  # (window index, key, count) -> multiplicity
    duplicated_tuples: int = 0
    buffered_tuples: int = 0
    serialized_state_tuples: int = 0
    serialized_state_entries: int = 0
    durations_s: list[float] = field(default_factory=list)
    deferred_moves: int = 0
    applied_moves: int = 0


def simulate_windowed_count(
    event_time_s: np.ndarray,
    keys: np.ndarray,
    initial_owner: np.ndarray,
    moves: Sequence[tuple[float, int, int]],
    *,
    window_s: float,
    slide_s: float,
    protocol: str,
    transfer_latency_s: float = 0.0,
    tuple_bytes: float = 64.0,
    bandwidth_mb_per_s: float = 1250.0,
) -> ProtocolRun:
    """Tuple-level run of a sliding-window count per number over a bucket map.

    ``initial_owner[b]`` is the task of bucket ``b`` (``BucketMap`` hashing of the keys);
    ``moves`` are ``(startTS, bucket, new task)`` commands. The splitter keeps ``BMP[b]``
    (owner, and for window recreation the ``endTS`` until which it sends to both tasks);
    tasks hold buckets with an accepted tuple range and an emitted window range (old task:
    tuples ``< endTS``, windows ``< switchTS``; new task: from ``switchTS``) or, for state
    recreation, checkpoint at ``startTS`` and buffer until the checkpoint arrives. A window
    is emitted when the watermark (the current tuple time) passes its end, by the task
    owning it, and never by a task still waiting for a checkpoint. A move of a bucket still
    being reconfigured waits until that ends. Times are integer microseconds inside.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: {protocol!r}; allowed: {list(PROTOCOLS)}")
    slide = round(slide_s * _TICKS_PER_S)
    m = round(window_s / slide_s)
    ticks = np.rint(np.asarray(event_time_s, dtype=np.float64) * _TICKS_PER_S).astype(np.int64)
    order = np.argsort(ticks, kind="stable")
    ticks, keys = ticks[order], np.asarray(keys, dtype=np.int64)[order]
    n_buckets = len(initial_owner)
    bucket_of = BucketMap.default(1, n_buckets).buckets(keys).astype(np.int64)
    owner = np.asarray(initial_owner, dtype=np.int64).copy()
    holds: dict[tuple[int, int], list[_Hold]] = {
        (int(owner[b]), b): [_Hold()] for b in range(n_buckets)
    }
    both_until = np.full(n_buckets, -_FAR, dtype=np.int64)  # window protocol: BMP endTS
    previous_owner = owner.copy()
    busy = np.zeros(n_buckets, dtype=bool)
    pending: dict[int, list[tuple[int, int]]] = defaultdict(list)
    run = ProtocolRun(Counter())
    events: list[tuple[int, int, str, Any]] = []
    seq = 0

    def push(tick: int, kind: str, payload: Any) -> None:
        nonlocal seq
        heapq.heappush(events, (tick, seq, kind, payload))
        seq += 1

    for start_s, b, new in moves:
        push(round(start_s * _TICKS_PER_S), "move", (int(b), int(new)))

    def add(hold: _Hold, tick: int, key: int) -> None:
        slot = tick // slide
        hold.per_slot[slot] += 1
        for k in range(slot - m + 1, slot + 1):
            hold.counts[k][key] += 1

    def emit(watermark: int) -> None:
        for (_task, _b), hs in list(holds.items()):
            for h in list(hs):
                if h.buffering:
                    continue
                for k in sorted(h.counts):
                    if (k + m) * slide > watermark:
                        break
                    window = h.counts.pop(k)
                    if h.emit_from <= k < h.emit_to:
                        for key, count in window.items():
                            run.results[(k, key, count)] += 1
                if h.accept_to <= watermark and not h.counts:
                    hs.remove(h)
            if not hs:
                del holds[(_task, _b)]

    def start_move(tick: int, b: int, new: int) -> None:
        if busy[b]:
            run.deferred_moves += 1
            pending[b].append((tick, new))
            return
        old = int(owner[b])
        if new == old:
            return
        run.applied_moves += 1
        old_hold = next(h for h in holds[(old, b)] if h.accept_to == _FAR)
        new_hold = _Hold()
        busy[b] = True
        previous_owner[b], owner[b] = old, new
        if protocol == "window":
            switch_k = -((-tick) // slide)
            end_tick = (switch_k - 1 + m) * slide
            old_hold.accept_to, old_hold.emit_to = end_tick, switch_k
            new_hold.accept_from, new_hold.emit_from = switch_k * slide, switch_k
            both_until[b] = end_tick
            run.durations_s.append((end_tick - tick) / _TICKS_PER_S)
            push(end_tick, "window_end", b)
        else:
            open_k = tick // slide - m + 1
            old_hold.accept_to, old_hold.emit_to = tick, open_k
            checkpoint = {k: old_hold.counts.pop(k) for k in list(old_hold.counts) if k >= open_k}
            state_tuples = sum(n for s, n in old_hold.per_slot.items() if s >= open_k)
            run.serialized_state_tuples += state_tuples
            run.serialized_state_entries += sum(len(v) for v in checkpoint.values())
            delay = state_transfer_s(
                state_tuples, tuple_bytes, bandwidth_mb_per_s, transfer_latency_s
            )
            arrive = tick + round(delay * _TICKS_PER_S)
            new_hold.emit_from, new_hold.buffering = open_k, True
            run.durations_s.append((arrive - tick) / _TICKS_PER_S)
            push(arrive, "checkpoint", (b, new_hold, checkpoint))
        holds.setdefault((new, b), []).append(new_hold)

    def finish(tick: int, b: int) -> None:
        busy[b] = False
        if pending[b]:
            _, new = pending[b].pop(0)
            start_move(tick, b, new)

    def advance(until: int) -> None:
        while events and events[0][0] <= until:
            tick, _, kind, payload = heapq.heappop(events)
            emit(tick)
            if kind == "move":
                start_move(tick, *payload)
            elif kind == "window_end":
                both_until[payload] = -_FAR
                emit(tick)
                finish(tick, payload)
            else:
                b, hold, checkpoint = payload
                for k, window in checkpoint.items():
                    hold.counts[k].update(window)
                hold.buffering = False
                for t, key in hold.buffer:
                    add(hold, t, key)
                hold.buffer.clear()
                emit(tick)
                finish(tick, b)
        emit(until)

    last_slot = None
    for tick, key, b in zip(ticks.tolist(), keys.tolist(), bucket_of.tolist(), strict=True):
        if (events and events[0][0] <= tick) or tick // slide != last_slot:
            advance(tick)
            last_slot = tick // slide
        dests = [int(owner[b])]
        if tick < both_until[b]:
            # Window recreation: the splitter sends to both tasks until endTS.
            dests = [int(previous_owner[b]), int(owner[b])]
            run.duplicated_tuples += 1
        for task in dests:
            for h in holds.get((task, b), []):
                if h.accept_from <= tick < h.accept_to:
                    if h.buffering:
                        h.buffer.append((tick, key))
                        run.buffered_tuples += 1
                    else:
                        add(h, tick, key)
    advance(_FAR)
    return run


def reference_windowed_count(
    event_time_s: np.ndarray, keys: np.ndarray, *, window_s: float, slide_s: float
) -> Counter:
    """The answer with no parallelism at all: ``(window index, key, count)`` multiset."""
    slide = round(slide_s * _TICKS_PER_S)
    m = round(window_s / slide_s)
    ticks = np.rint(np.asarray(event_time_s, dtype=np.float64) * _TICKS_PER_S).astype(np.int64)
    counts: Counter = Counter()
    for tick, key in zip(ticks.tolist(), np.asarray(keys).tolist(), strict=True):
        slot = tick // slide
        for k in range(slot - m + 1, slot + 1):
            counts[(k, int(key))] += 1
    return Counter((k, key, n) for (k, key), n in counts.items())
