"""``hash``: the base routing ``F(k) = pmod(murmur3(k), N_D)`` only (paper 000 baseline).

Never plans and never migrates: the floor every other strategy is compared with.
"""

from __future__ import annotations

from balancebench.strategies.base import Strategy


class HashStrategy(Strategy):
    """Every tuple of key ``k`` goes to its home node ``F(k)``."""

    name = "hash"
    scales_out = True
    reference = "paper 000 §5 baseline (hash partitioning)"
    plans = False
