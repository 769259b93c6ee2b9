"""Join architectures of paper 000's comparison: ``dynamic``, ``bi``, ``bi6`` (being written)."""

from __future__ import annotations

from typing import ClassVar

from balancebench.strategies.base import Strategy


class _JoinArchitecture(Strategy):
    kind: ClassVar[str] = "join_architecture"
    plans = False
    operators = frozenset({"equi_join", "band_join"})


class DynamicJoin(_JoinArchitecture):
    name = "dynamic"
    reference = "paper 000 baseline Dynamic (matrix model, Elseidy et al. VLDB 2014)"


class BiStream(_JoinArchitecture):
    name = "bi"
    reference = "paper 000 baseline Bi (BiStream, Lin et al. SIGMOD 2015)"


class BiStream6(_JoinArchitecture):
    name = "bi6"
    reference = "paper 000 baseline Bi6 (BiStream with 6 subgroups)"
