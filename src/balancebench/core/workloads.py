"""The workloads of the papers: what is computed, on which data, with which state.

A workload fixes the stateful operator (``aggregate``, ``equi_join``, ``band_join``),
the datasets that can feed it, and the meaning of its window. The Spark engine
(``balancebench.spark``) executes it; this module only describes it, so the DAG and the
CLI can check a (workload, dataset, strategy) choice before any work starts.

- ``topk`` (paper 000 §5.1.3): top 10 keys by count per window, on the drifting topic
  stream (or any stream dataset).
- ``phone`` (paper 001 §5): per-number counts per window on the phone stream.
- ``wordcount`` (paper 002): word counts over a text (``tasks`` text or a user's text
  file, or any stream whose keys are words).
- ``eq5`` (paper 000 §5.1.3): ``Region ⋈ Nation ⋈ Supplier ⋈ Lineitem``; the skewed,
  balanced stage is ``Supplier ⋈ Lineitem`` on ``suppkey``, both sides streamed; the
  dimension part ``Region ⋈ Nation ⋈ Supplier`` is joined onto each supplier tuple first.
- ``band`` (paper 000 §5.1.3, ``B_NCI``): ``L1 ⋈ L2`` on ``|L1.orderkey - L2.orderkey|
  <= band_width`` with ``L1.shipmode = 'TRUCK'``, ``L2.shipinstruct = 'NONE'``,
  ``L2.quantity > 48``.

Windows (``window_s``): 0 means full history (a join stores every tuple forever; an
aggregation counts from the stream's start). A positive ``window_s`` is a window in event
time, shaped by the workload's operator (``operators.Window``, ``operators.TimeBounds``):
for every workload here, a join pair qualifies when ``|t_r - t_s| <= window_s`` and an
aggregation answers, after each micro-batch, over the last ``ceil(window_s / interval)``
batches (the window slides by one batch).
"""

from __future__ import annotations

from dataclasses import dataclass

from balancebench.core.operators import AGGREGATE, BAND_JOIN, EQUI_JOIN, Operator, names


@dataclass(frozen=True)
class Workload:
    name: str
    operator: Operator
    #: Datasets (generators) that can feed it; "stream" = any stream-kind dataset.
    datasets: tuple[str, ...]
    default_dataset: str
    reference: str
    description: str
    #: Whether only the Param ``top_k`` keys by count are reported per window (TOPK); False =
    #: the whole count table.
    top_k: bool = False
    #: How its stream is built from a dataset that is not a stream
    #: (``streams.STREAM_BUILDERS``: ``eq5``, ``band`` or ``wordcount``); None = a stream.
    stream_from: str | None = None

    @property
    def is_join(self) -> bool:
        return self.operator.is_join


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "topk",
            AGGREGATE,
            ("stream",),
            "topic_stream",
            "paper 000 §5.1.3 TOPK",
            "top top_k keys by count per window",
            top_k=True,
        ),
        Workload(
            "phone",
            AGGREGATE,
            ("phone_stream", "stream"),
            "phone_stream",
            "paper 001 §5",
            "per-number counts per window",
        ),
        Workload(
            "wordcount",
            AGGREGATE,
            ("tasks", "stream"),
            "tasks",
            "paper 002 §4 WordCount",
            "word counts (full history unless window_s > 0)",
            stream_from="wordcount",
        ),
        Workload(
            "eq5",
            EQUI_JOIN,
            ("tpch",),
            "tpch",
            "paper 000 §5.1.3 EQ5",
            "Region ⋈ Nation ⋈ Supplier ⋈ Lineitem; Supplier ⋈ Lineitem on suppkey balanced",
            stream_from="eq5",
        ),
        Workload(
            "band",
            BAND_JOIN,
            ("tpch",),
            "tpch",
            "paper 000 §5.1.3 B_NCI",
            "L1 ⋈ L2 on |orderkey diff| <= band_width with the paper's filters",
            stream_from="band",
        ),
    )
}


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise ValueError(f"workload: unknown {name!r}; allowed values: {sorted(WORKLOADS)}")
    return WORKLOADS[name]


def check_dataset(workload: str, dataset: str, dataset_kind: str) -> None:
    """``ValueError`` naming the field unless ``dataset`` can feed ``workload``."""
    w = get_workload(workload)
    if dataset in w.datasets or (dataset_kind == "stream" and "stream" in w.datasets):
        return
    allowed = [d for d in w.datasets if d != "stream"]
    if "stream" in w.datasets:
        allowed.append("any stream dataset")
    raise ValueError(
        f"dataset: {dataset!r} cannot feed workload {workload!r}; allowed values: {allowed}"
    )


def check_strategy(workload: str, strategy: str, operators: frozenset[Operator]) -> None:
    """``ValueError`` naming the field unless ``strategy`` serves the workload's operator."""
    w = get_workload(workload)
    if w.operator not in operators:
        raise ValueError(
            f"strategies: {strategy!r} cannot serve workload {workload!r} (operator "
            f"{w.operator.name!r}; {strategy!r} serves {names(operators)}). Remove it from "
            "strategies or pick another workload."
        )
