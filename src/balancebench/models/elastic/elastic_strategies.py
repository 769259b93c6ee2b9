"""The model's strategies, one ``ElasticStrategy`` each, registered by name in ``STRATEGIES``
(the one registry; the model's ``strategies`` are its keys).

The simulation asks a strategy only what is here: whether the master runs the controller
(``controls``), how provisioning and offload spread buckets (``provision``, ``offload``,
after ``spread_by``) and whether BalanceLoad runs after the new configuration
(``balances``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from balancebench.models.elastic.reconfiguration_rules import offload_buckets, provision_by_count


@dataclass(frozen=True)
class ElasticStrategy:
    """What one strategy does at the end of a statistics period (protocol 2 of the paper)."""

    name: str
    #: The master runs the controller (new-configuration rule, provision or
    #: offload-then-decommission, BalanceLoad if ``balances``) at every period's end but the
    #: last; ``False``: the initial nodes and hashed buckets stay.
    controls: bool
    #: How buckets are spread when the node count changes. ``"count"`` (load-oblivious):
    #: provisioning moves buckets from the nodes holding the most to the new nodes until
    #: counts are even, offload sends each bucket to the kept node with the fewest buckets.
    #: ``"load"``: new nodes start empty (BalanceLoad fills them), offload sends the highest
    #: rate first, each to the least loaded kept node.
    spread_by: Literal["count", "load"]
    #: BalanceLoad (``balancebench.strategies.balanceload.balance_load``) after the new
    #: configuration, when the std of utilisation exceeds UIT.
    balances: bool
    #: Marker of the strategy's lines in the model's figure.
    marker: str

    def provision(self, owner: np.ndarray, active: np.ndarray, added: np.ndarray) -> np.ndarray:
        """Owners after the nodes ``added`` join the ``active`` ones."""
        if self.spread_by == "count":
            return provision_by_count(owner, active, added)
        return owner

    def offload(
        self, owner: np.ndarray, rate: np.ndarray, removed: np.ndarray, keep: np.ndarray
    ) -> np.ndarray:
        """Owners after every bucket of the ``removed`` nodes went to the ``keep`` nodes."""
        return offload_buckets(owner, rate, removed, keep, self.spread_by)


#: Paper 001 without elasticity: ``initial_nodes`` nodes, hashed buckets, no controller
#: (so ``spread_by`` and ``balances`` never apply).
ELASTIC_STATIC = ElasticStrategy(
    "elastic_static", controls=False, spread_by="count", balances=False, marker="D"
)
#: Elastic scaling alone **[interpreted]**: load-oblivious provisioning and offload.
ELASTIC_SCALING = ElasticStrategy(
    "elastic_scaling", controls=True, spread_by="count", balances=False, marker="o"
)
#: Paper 001 §4: scaling by load, then BalanceLoad when U_sd > UIT.
ELASTIC_BALANCELOAD = ElasticStrategy(
    "elastic_balanceload", controls=True, spread_by="load", balances=True, marker="s"
)

#: Strategy name -> strategy: the one registry (the model's strategies, in this order).
STRATEGIES: dict[str, ElasticStrategy] = {
    s.name: s for s in (ELASTIC_STATIC, ELASTIC_SCALING, ELASTIC_BALANCELOAD)
}
