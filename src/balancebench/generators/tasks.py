"""``tasks``: (being written)."""

from __future__ import annotations

from typing import Any

from balancebench.generators.common import Generator, TableWriter


class HeterogeneousTasks(Generator):
    name = "tasks"
    description = "(not implemented yet)"
    kind = "tasks"
    main_table = "tasks"
    params = ("seed",)

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        raise NotImplementedError(f"dataset: generator {self.name!r} is not implemented yet")
