"""A sweep's application runs its cell groups in one Spark application, their datasets
loaded in turn (``experiment.run_group``): a run's deterministic outputs must not depend
on whether it ran alone or after other runs in the same application, on its dataset or on
another (cached frames, checkpoints, routing tables, state and oracle references left
behind)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from balancebench.experiment import RunSpec, rotated_rounds
from balancebench.experiment_params import ExperimentSpec
from balancebench.generators import generate, generator_params
from balancebench.local_env import airflow_env
from balancebench.paths import datasets_dir
from tests.e2e.conftest import BIN, ROOT, TINY, deterministic_outputs

pytestmark = pytest.mark.slow


def _submit(args: list[str]) -> str:
    done = subprocess.run(
        [
            str(BIN / "spark-submit"),
            "--master",
            "local[2]",
            str(ROOT / "spark_apps" / "run_workload.py"),
            *args,
        ],
        env={**os.environ, **airflow_env()},
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout


def test_a_run_gives_the_same_results_alone_and_inside_a_shared_application(local_state, tmp_path):
    base = {**TINY, "strategies": ["hash", "mnrt"], "experiment": "e2e-shared-application"}
    # Two cell groups' datasets (two skews), as a sweep's application loads them in turn.
    params = {z: ExperimentSpec.checked({**base, "zipf_s": z}) for z in (0.8, 1.2)}
    folders = {
        z: generate(p["dataset"], datasets_dir(), generator_params(p["dataset"], p))[0]
        for z, p in params.items()
    }

    # A cell of the second dataset that differs from it in the tolerance only.
    loose = ExperimentSpec.checked({**base, "zipf_s": 1.2, "tolerance": 0.5})

    def spec(z: float, strategy: str, label: str, own: ExperimentSpec | None = None) -> RunSpec:
        return RunSpec(
            dataset_dir=str(folders[z]),
            strategy=strategy,
            params=own or params[z],
            run_name=label,
            result_path=str(tmp_path / f"{label}.json"),
        )

    # The second dataset's mnrt alone in its application, at both tolerances ...
    alone = spec(1.2, "mnrt", "alone")
    _submit(alone.to_args())
    alone_loose = spec(1.2, "mnrt", "alone-loose", loose)
    _submit(alone_loose.to_args())
    # ... and after the first dataset's runs, in the order a sweep gives two strategies
    # over two repetitions on each dataset: hash, mnrt, mnrt, hash; then the loose cell.
    order = list(rotated_rounds(["hash", "mnrt"], 2))
    shared = [
        spec(z, name, f"shared-{z}-{i}-{name}") for z in params for i, name in enumerate(order, 1)
    ]
    shared.append(spec(1.2, "mnrt", "shared-loose-mnrt", loose))
    log = _submit(RunSpec.group_args(shared, tmp_path / "group.json"))

    def record(s: RunSpec) -> dict:
        return json.loads(open(s.result_path).read())

    records = [record(s) for s in shared]
    assert [r["run_index"] for r in records] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # The loose cell shares the second dataset's load (a tolerance is not the data's) ...
    assert [r["dataset_run_index"] for r in records] == [1, 2, 3, 4, 1, 2, 3, 4, 5]
    # ... and plans with its own tolerance, as when it ran alone
    planned_loose = deterministic_outputs(records[8])
    assert planned_loose == deterministic_outputs(record(alone_loose))
    records = records[:8]
    # mnrt (which migrates state) after another dataset's runs, after hash and after
    # itself: as when it ran alone.
    expected = deterministic_outputs(record(alone))
    assert expected["migrated_tuples_total"] > 0  # the comparison covers a migration
    second = records[4:]
    for r in second:
        if r["strategy"] == "mnrt":
            assert deterministic_outputs(r) == expected
    hashes = [deterministic_outputs(r) for r in second if r["strategy"] == "hash"]
    assert hashes[0] == hashes[1]
    # The first dataset's runs are of their own data (a left-over stream would repeat it).
    first = [deterministic_outputs(r) for r in records[:4] if r["strategy"] == "mnrt"]
    assert first[0] == first[1] != expected
    assert planned_loose != expected  # the tolerance changed mnrt's plans here
    # The task log says where the application is, with the time left after a run.
    assert "application setup (session)" in log and "9 runs on 2 dataset(s)" in log
    assert log.count("dataset load (") == 2
    assert "run 1 of 9: shared-0.8-1-hash" in log
    assert "run 8 of 9: shared-1.2-4-hash; about " in log
