"""A sweep's cell group runs in one Spark application (``experiment.run_group``): a run's
deterministic outputs must not depend on whether it ran alone or after other runs in the
same application (cached frames, checkpoints, routing tables and state left behind)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from balancebench.experiment import RunSpec, rotated_rounds
from balancebench.generators import generate, generator_params
from balancebench.local_env import airflow_env
from balancebench.params import validate_params
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
    params = validate_params(
        {**TINY, "strategies": ["hash", "mnrt"], "experiment": "e2e-shared-application"}
    )
    folder, _ = generate(
        params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
    )

    def spec(strategy: str, label: str) -> RunSpec:
        return RunSpec(
            dataset_dir=str(folder),
            strategy=strategy,
            params=params,
            run_name=label,
            result_path=str(tmp_path / f"{label}.json"),
        )

    alone = spec("mnrt", "alone")
    _submit(alone.to_args())
    # The order a sweep gives two strategies over two repetitions: hash, mnrt, mnrt, hash.
    order = list(rotated_rounds(["hash", "mnrt"], 2))
    shared = [spec(name, f"shared-{i}-{name}") for i, name in enumerate(order, 1)]
    log = _submit(RunSpec.group_args(shared, tmp_path / "group.json"))

    def record(s: RunSpec) -> dict:
        return json.loads(open(s.result_path).read())

    records = [record(s) for s in shared]
    assert [r["run_index"] for r in records] == [1, 2, 3, 4]
    # mnrt (which migrates state) after hash, and after itself: as when it ran alone.
    expected = deterministic_outputs(record(alone))
    assert expected["migrated_tuples_total"] > 0  # the comparison covers a migration
    for r in records:
        if r["strategy"] == "mnrt":
            assert deterministic_outputs(r) == expected
    hashes = [deterministic_outputs(r) for r in records if r["strategy"] == "hash"]
    assert hashes[0] == hashes[1]
    # The task log says where the application is, with the time left after a run.
    assert "application setup (session, dataset load)" in log
    assert "run 1 of 4: shared-1-hash" in log
    assert "run 4 of 4: shared-4-hash; about " in log
