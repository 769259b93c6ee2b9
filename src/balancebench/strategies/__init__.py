"""Key-level strategies, registered by name (see ``base.Strategy`` for the contract).

>>> strategy = get_strategy("mnrt", n_nodes=8)
>>> plan = strategy.plan(loads, n_nodes=8, tolerance=0.05)      # doctest: +SKIP
>>> nodes = strategy.routing.storage_nodes(keys, tuple_ids)     # doctest: +SKIP
"""

from __future__ import annotations

from balancebench.strategies.base import OPERATORS, Delta, MigrationPlan, PlanView, Strategy
from balancebench.strategies.hash import HashStrategy
from balancebench.strategies.mnrt import MnrtStrategy
from balancebench.strategies.qmmp import QmmpStrategy

#: name -> class; add a strategy by writing its module and listing it here.
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (HashStrategy, QmmpStrategy, MnrtStrategy)
}


def get_strategy(name: str, **params: object) -> Strategy:
    """A new strategy instance; an unknown name or parameter raises ``ValueError``."""
    if name not in STRATEGIES:
        raise ValueError(f"strategy: unknown {name!r}; allowed values: {sorted(STRATEGIES)}")
    cls = STRATEGIES[name]
    try:
        return cls(**params)
    except TypeError as exc:
        raise ValueError(f"strategy {name!r}: bad parameters {sorted(params)}: {exc}") from exc


__all__ = [
    "OPERATORS",
    "STRATEGIES",
    "Delta",
    "MigrationPlan",
    "PlanView",
    "Strategy",
    "get_strategy",
]
