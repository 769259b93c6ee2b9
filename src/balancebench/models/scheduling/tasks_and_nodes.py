"""The scheduling model's input: tasks (words per task) and nodes, from a generated
``tasks`` dataset or built from the ``input_*`` params."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from balancebench.generators.common import load_manifest, read_table
from balancebench.generators.tasks import CLUSTERS, word_shares


@dataclass
class SchedulingInput:
    """Tasks (words per task) and nodes (profile) the model schedules."""

    n_words: np.ndarray
    node_names: list[str]
    cores: list[int]
    memory_gb: list[float]
    capacity: list[float]
    cluster: str


def input_from_params(params: dict[str, Any]) -> SchedulingInput:
    """The ``tasks`` generator's tables without generating text: ``input_total_words``
    split by ``input_task_sizes`` (largest remainder), nodes of ``input_cluster``."""
    profile = CLUSTERS[params["input_cluster"]]
    return SchedulingInput(
        n_words=word_shares(params["input_task_sizes"], params["input_total_words"]).astype(
            np.float64
        ),
        node_names=[name for name, _, _ in profile],
        cores=[cores for _, cores, _ in profile],
        memory_gb=[mem for _, _, mem in profile],
        capacity=[float(cores) for _, cores, _ in profile],
        cluster=params["input_cluster"],
    )


def input_from_dataset(dataset_dir: str | Path) -> SchedulingInput:
    """``tasks`` (``n_words`` by ``task_id``) and ``nodes`` of a generated ``tasks`` dataset."""
    manifest = load_manifest(dataset_dir)
    tasks = read_table(dataset_dir, manifest, "tasks", ["task_id", "n_words"]).to_pandas()
    tasks = tasks.sort_values("task_id")
    nodes = read_table(dataset_dir, manifest, "nodes").to_pandas().sort_values("node")
    return SchedulingInput(
        n_words=tasks["n_words"].to_numpy(dtype=np.float64),
        node_names=nodes["name"].astype(str).tolist(),
        cores=nodes["cores"].astype(int).tolist(),
        memory_gb=nodes["memory_gb"].astype(float).tolist(),
        capacity=nodes["capacity"].astype(float).tolist(),
        cluster=str(manifest.params.get("tasks_cluster", "")),
    )
