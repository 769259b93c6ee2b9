"""Per-tuple strategies: ``pkg``, ``dchoices``, ``wchoices``. No plan, no migration.

- ``pkg`` (Partial Key Grouping, Nasir et al., ICDE 2015; reference code
  github.com/gdfm/partial-key-grouping): each key has two candidate nodes, ``F(k)`` and a
  second hash ``H2(k)``; each of the ``N_U`` senders sends a tuple to the candidate it has
  sent fewer tuples to so far (its *local* load estimate; ties go to ``F(k)``). A key
  lands on at most two nodes, so an aggregation merges at most two partials per key.
  It cannot serve joins that need a key's whole history on one node.
- ``dchoices`` / ``wchoices`` (Nasir et al., ICDE 2016, "When two choices are not
  enough"), beyond paper 000: each sender detects heavy hitters with a Space-Saving
  sketch; a key whose estimated frequency is at least ``heavy_share`` of the tuples the
  sender has seen gets ``d`` candidates (``dchoices``) or every node (``wchoices``); the
  others keep two.

The sketch is updated once per chunk of ``sketch_chunk`` tuples, before that chunk is
routed, by merging the chunk's exact counts into the summary (the mergeable-summary
update of Space-Saving: a key new to a full summary starts from its minimum count; the
``capacity`` largest counters are kept). Choosing among candidates is sequential per
sender (each choice changes the sender's load vector): a loop over the tuples, compiled
with numba (:func:`choice_kernels.choose_nodes`, imported on the first route, so that
reading the registry or a Param spec does not load numba; the same loop in plain Python
took 0.3 us per tuple, as much as the whole JVM routing stage of ``hash``). The
candidates and the sketch stay vectorised numpy. This is the reference: the Spark engine
runs the same decisions in the JVM where ``make setup`` compiled them
(``spark/jvm/PerSenderRouting.java``, tested against this module tuple for tuple) and
this code in Python workers elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from balancebench.core.hashing import home_nodes, salted_nodes
from balancebench.core.operators import AGGREGATIONS
from balancebench.core.schema import MAX_NODES
from balancebench.strategies.base import Strategy

#: Salts of the extra hash functions H2, H3, ... (H1 is F(k)).
CHOICE_SALTS = tuple(0x9C1 + 7919 * i for i in range(64))


@dataclass
class SenderState:
    """What one upstream instance knows: tuples it sent per node, and its sketch."""

    sent: np.ndarray
    seen: int = 0
    sketch_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    sketch_counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def candidates(keys: np.ndarray, n_nodes: int, d: int) -> np.ndarray:
    """``(len(keys), d)`` candidate nodes: ``F(k)``, then ``d - 1`` salted hashes."""
    keys = np.asarray(keys, dtype=np.int64)
    cols = [home_nodes(keys, n_nodes)]
    cols += [salted_nodes(keys, CHOICE_SALTS[j], n_nodes) for j in range(d - 1)]
    return np.stack(cols, axis=1)


def compiled_candidates(keys: np.ndarray, n_nodes: int, d: int) -> np.ndarray:
    """:func:`candidates` in one compiled pass over the keys (int64 nodes)."""
    keys = np.ascontiguousarray(keys, dtype=np.int64)
    if not keys.flags.writeable:  # Arrow's zero-copy arrays are read-only
        keys = keys.copy()
    from balancebench.strategies.choice_kernels import candidates_kernel

    out = np.empty((len(keys), d), dtype=np.int64)
    candidates_kernel(keys, n_nodes, np.array(CHOICE_SALTS[: d - 1], dtype=np.int64), out)
    return out


def _sorted_member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted ``sorted_set`` (a binary search)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[pos] == values


def space_saving_merge(
    keys: np.ndarray, counts: np.ndarray, chunk: np.ndarray, capacity: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge a chunk's exact counts into a Space-Saving summary of ``capacity`` counters."""
    uk, uc = np.unique(chunk, return_counts=True)
    floor = int(counts.min()) if len(counts) >= capacity else 0
    known = _sorted_member(uk, keys)  # the summary's keys are kept sorted
    merged_keys = np.concatenate((keys, uk[~known]))
    merged_counts = np.concatenate((counts, uc[~known] + floor))
    if known.any():
        pos = np.searchsorted(keys, uk[known]) if len(keys) else np.zeros(0, np.int64)
        merged_counts[pos] += uc[known]
    if len(merged_keys) > capacity:
        # The largest counts; among equal counts the smaller keys (a rule the JVM router,
        # spark/jvm/PerSenderRouting.java, repeats: argpartition's choice among ties was
        # arbitrary; the recorded decisions did not change).
        top = np.lexsort((merged_keys, -merged_counts))[:capacity]
        merged_keys, merged_counts = merged_keys[top], merged_counts[top]
    order = np.argsort(merged_keys)
    return merged_keys[order], merged_counts[order]


@dataclass(frozen=True)
class ChoiceSettings:
    """A sender's decision rule on N nodes: ``d`` candidates of a heavy key, or every node
    (``all_nodes``); with a sketch (``sketch_chunk`` > 0), heavy hitters are the keys whose
    counter among ``capacity`` holds at least ``theta`` of the tuples seen."""

    d: int
    all_nodes: bool
    theta: float = 0.0
    capacity: int = 0
    sketch_chunk: int = 0


class PkgStrategy(Strategy):
    """The PKG family's base (pkg, dchoices, wchoices): per-tuple routers whose decisions
    the JVM's per-sender router makes too, configured by :meth:`decision_settings`."""

    name = "pkg"
    reference = "Nasir et al., ICDE 2015 (paper 000 baseline PKG)"
    plans = False
    per_tuple = True
    jvm_router = True
    operators = AGGREGATIONS
    param_schema: dict[str, dict[str, Any]] = {
        "senders": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_NODES,
            "default": None,
            "description": "Upstream instances N_U, each with its own load estimates "
            "(tuple i is sent by sender i mod N_U); null = the run's n_senders (the "
            "stream's senders). Another number sends the batch to those senders first, "
            "through an exchange that is charged as routing.",
        },
    }

    def new_sender_state(self, n_nodes: int) -> SenderState:
        return SenderState(sent=np.zeros(n_nodes, dtype=np.int64))

    def n_choices(self, n_nodes: int) -> int:
        """Candidates of a heavy key (2 for plain PKG)."""
        return 2

    def heavy(self, keys: np.ndarray, state: SenderState, n_nodes: int) -> np.ndarray:
        """Which tuples of the next chunk belong to heavy hitters (none for plain PKG);
        called before ``state.seen`` counts the chunk."""
        return np.zeros(len(keys), dtype=bool)

    def decision_settings(self, n_nodes: int) -> ChoiceSettings:
        """How this strategy's senders decide on ``n_nodes`` nodes (one place for both
        routing paths: :meth:`route_sender` and the JVM router)."""
        d = min(self.n_choices(n_nodes), n_nodes)
        return ChoiceSettings(d=d, all_nodes=d == n_nodes and d > 2)

    def route_sender(self, keys: np.ndarray, state: SenderState) -> np.ndarray:
        """Nodes of one sender's tuples, in arrival order; updates ``state``."""
        from balancebench.strategies.choice_kernels import choose_nodes

        n_nodes = len(state.sent)
        keys = np.asarray(keys, dtype=np.int64)
        rule = self.decision_settings(n_nodes)
        d, all_nodes = rule.d, rule.all_nodes
        cand = compiled_candidates(keys, n_nodes, 2 if all_nodes else max(d, 2))
        out = np.empty(len(keys), dtype=np.int32)
        sent = np.array(state.sent, dtype=np.int64)
        chunk = rule.sketch_chunk or max(len(keys), 1)
        for start in range(0, len(keys), chunk):
            stop = min(start + chunk, len(keys))
            heavy = np.ascontiguousarray(self.heavy(keys[start:stop], state, n_nodes), dtype=bool)
            state.seen += stop - start
            choose_nodes(cand[start:stop], heavy, sent, all_nodes, d, out[start:stop])
        state.sent = sent
        return out

    def route(
        self, keys: np.ndarray, senders: np.ndarray, states: dict[int, SenderState], n_nodes: int
    ) -> np.ndarray:
        """Route tuples given in arrival order with their sender; ``states`` persist."""
        senders = np.asarray(senders)
        out = np.empty(len(keys), dtype=np.int32)
        for s in np.unique(senders).tolist():
            idx = np.flatnonzero(senders == s)
            state = states.setdefault(s, self.new_sender_state(n_nodes))
            out[idx] = self.route_sender(np.asarray(keys)[idx], state)
        return out


class _HeavyHitterStrategy(PkgStrategy):
    param_schema = {
        **PkgStrategy.param_schema,
        "heavy_share": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1,
            "default": None,
            "description": "Heavy-hitter threshold theta as a share of the tuples a sender "
            "has seen; null means 1 / (5 N).",
        },
        "capacity": {
            "type": ["integer", "null"],
            "minimum": 1,
            "default": None,
            "description": "Space-Saving counters per sender; null means ceil(10 / theta).",
        },
        "sketch_chunk": {
            "type": "integer",
            "minimum": 1,
            "default": 1024,
            "description": "Tuples per sketch update.",
        },
    }

    def theta(self, n_nodes: int) -> float:
        share = self.settings["heavy_share"]
        return float(share) if share is not None else 1.0 / (5 * n_nodes)

    def decision_settings(self, n_nodes: int) -> ChoiceSettings:
        theta = self.theta(n_nodes)
        return dataclasses.replace(
            super().decision_settings(n_nodes),
            theta=theta,
            capacity=self.settings["capacity"] or math.ceil(10 / theta),
            sketch_chunk=max(int(self.settings["sketch_chunk"]), 1),
        )

    def heavy(self, keys: np.ndarray, state: SenderState, n_nodes: int) -> np.ndarray:
        rule = self.decision_settings(n_nodes)
        state.sketch_keys, state.sketch_counts = space_saving_merge(
            state.sketch_keys, state.sketch_counts, keys, rule.capacity
        )
        seen = state.seen + len(keys)
        hot = state.sketch_keys[state.sketch_counts >= rule.theta * seen]
        return _sorted_member(keys, hot)


class DChoicesStrategy(_HeavyHitterStrategy):
    name = "dchoices"
    reference = "Nasir et al., ICDE 2016 (D-Choices), beyond paper 000"
    param_schema = {
        **_HeavyHitterStrategy.param_schema,
        "d": {
            "type": "integer",
            "minimum": 2,
            "maximum": 64,
            "default": 4,
            "description": "Candidates of a heavy hitter (capped at N).",
        },
    }

    def n_choices(self, n_nodes: int) -> int:
        return min(int(self.settings["d"]), n_nodes)


class WChoicesStrategy(_HeavyHitterStrategy):
    name = "wchoices"
    reference = "Nasir et al., ICDE 2016 (W-Choices), beyond paper 000"

    def n_choices(self, n_nodes: int) -> int:
        return n_nodes
