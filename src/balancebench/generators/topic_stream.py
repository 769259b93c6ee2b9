"""``topic_stream``: (being written)."""

from __future__ import annotations

from typing import Any

from balancebench.generators.common import Generator, TableWriter


class TopicStream(Generator):
    name = "topic_stream"
    description = "(not implemented yet)"
    kind = "stream"
    main_table = "events"
    params = ("seed",)

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        raise NotImplementedError(f"dataset: generator {self.name!r} is not implemented yet")
