"""What a strategy run is: :class:`RunSpec` (one run, or a cell of a group) and
:class:`GroupSpec` (a cell group run in rounds inside one Spark application), as they
travel to ``spark-submit`` in a groups file; the MLflow tags that say where a run ran.
How a run runs is :mod:`balancebench.experiment.runs`; how it is logged and reported,
:mod:`balancebench.experiment.run_log`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import RoundPolicy
from balancebench.state import tracking


@dataclass(frozen=True)
class RunSpec:
    """Everything a strategy run needs: a cell group's cell (:class:`GroupSpec`, written to
    the groups file spark-submit reads) and, made from it, each of its rounds
    (:meth:`GroupSpec.round_spec`). Its ``params`` were checked at the door
    (:meth:`ExperimentSpec.checked`) and travel as their JSON form."""

    dataset_dir: str
    strategy: str
    params: ExperimentSpec
    parent_run_id: str | None = None
    dag_id: str = ""
    dag_run_id: str = ""
    #: Where the JSON summary goes (default ``.local/results/<parent run>/<strategy>.json``).
    result_path: str | None = None
    #: MLflow run name (default: the strategy) and extra tags (a sweep's cell, the round).
    run_name: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: Timed runs of this DAG run allowed at once on the machine (logged as a param).
    concurrency: int = 1
    #: Test hook of the nightly sweep's regression check (``Strategy.extra_plan_work_ms``).
    plan_extra_work_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "params": self.params.to_json()}

    @classmethod
    def from_json(cls, data: str | dict[str, Any]) -> RunSpec:
        fields = json.loads(data) if isinstance(data, str) else dict(data)
        return cls(**{**fields, "params": ExperimentSpec.from_json(fields["params"])})


#: Params a run reads and its loaded dataset does not (the strategy, and the balance
#: tolerance its planner is given): runs that differ only in these share one load.
RUN_ONLY_PARAMS: Final[frozenset[str]] = frozenset({"strategies", "tolerance"})


def loaded_params(params: ExperimentSpec) -> dict[str, Any]:
    """The Params a loaded dataset is made with: all but :data:`RUN_ONLY_PARAMS`."""
    return {k: v for k, v in params.to_json().items() if k not in RUN_ONLY_PARAMS}


#: A run's position in its Spark application (1 = the first, which pays its first-use
#: costs).
RUN_INDEX_TAG = "balancebench.run_index"


#: A run's position among the runs on its loaded dataset (1 = the first after the load).
DATASET_RUN_INDEX_TAG = "balancebench.dataset_run_index"


#: The Spark application a sweep's run ran in (its Airflow task's name):
#: ``application k of K: ...``.
APPLICATION_TAG = "balancebench.application"


#: A round run's round (from 0) and its cell group.
ROUND_TAG, GROUP_TAG = "balancebench.round", "balancebench.group"


#: What a cell run says when its group's rounds ended: how many, and why they stopped.
ROUNDS_DONE_TAG, ROUNDS_STOPPED_TAG = "balancebench.rounds_done", "balancebench.rounds_stopped"


#: The prefix of the per-round figures logged on a cell run (``step`` = round).
ROUND_PREFIX = "round/"


@dataclass(frozen=True)
class GroupSpec:
    """A cell group, run in rounds inside one Spark application (:func:`run_groups`):
    one :class:`RunSpec` per strategy, its *cell* (``parent_run_id`` is the cell's MLflow
    run, which every round's run is a child of), in the order of the first round; the
    rounds' policy; the folder the rounds' JSON records go to. Round ``r`` of a cell is
    :meth:`round_spec`."""

    label: str
    cells: tuple[RunSpec, ...]
    policy: RoundPolicy
    results_dir: str

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "cells": [c.to_json() for c in self.cells],
            "policy": self.policy.to_json(),
            "results_dir": self.results_dir,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GroupSpec:
        return cls(
            data["label"],
            tuple(RunSpec.from_json(c) for c in data["cells"]),
            RoundPolicy.from_json(data["policy"]),
            data["results_dir"],
        )

    def round_spec(self, cell: RunSpec, r: int) -> RunSpec:
        """Round ``r`` (from 0) of ``cell``: its own record file, name and tags."""
        name = cell.run_name or cell.strategy
        record = f"{cell.parent_run_id or cell.strategy}-round{r + 1}.json"
        return replace(
            cell,
            result_path=str(Path(self.results_dir) / record),
            run_name=f"{name} · round {r + 1}",
            tags={
                **cell.tags,
                tracking.ROLE_TAG: "round",
                ROUND_TAG: str(r + 1),  # from 1, as the run's name
                GROUP_TAG: self.label,
            },
        )

    @staticmethod
    def write(groups: Sequence[GroupSpec], path: Path) -> list[str]:
        """The spark-submit arguments of groups that share one application: the groups go
        to a file (``path``), as Linux caps one argument at 128 KiB."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps([g.to_json() for g in groups], sort_keys=True))
        return ["--groups-file", str(path)]

    @classmethod
    def read(cls, path: str) -> list[GroupSpec]:
        return [cls.from_json(g) for g in json.loads(Path(path).read_text())]


@dataclass(frozen=True)
class Position:
    """Where a run ran: its position in its Spark application (1 = first, which pays the
    application's first-use costs) and among the runs on its loaded dataset (1 = first
    after the load)."""

    in_application: int
    on_dataset: int
