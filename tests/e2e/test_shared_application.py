"""A sweep's application runs its cell groups in one Spark application, their datasets
loaded in turn, each group in rounds (``experiment.run_groups``): a run's deterministic
outputs must not depend on whether it ran alone or after other runs in the same
application, on its dataset or on another (cached frames, checkpoints, routing tables,
state and oracle references left behind)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import RoundPolicy
from balancebench.experiment.run_spec import GroupSpec, RunSpec
from balancebench.generators import generate, generator_params
from balancebench.orchestration.local_env import airflow_env
from balancebench.state.paths import datasets_dir
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

    def cells(z: float, names: list[str], own: ExperimentSpec | None = None) -> tuple:
        return tuple(
            RunSpec(dataset_dir=str(folders[z]), strategy=name, params=own or params[z])
            for name in names
        )

    def group(label: str, cells: tuple, rounds: int) -> GroupSpec:
        return GroupSpec(label, cells, RoundPolicy(rounds, rounds), str(tmp_path / label))

    def submit(*groups: GroupSpec) -> str:
        return _submit(GroupSpec.write(groups, tmp_path / f"{groups[0].label}.json"))

    def record(label: str, strategy: str, r: int) -> dict:
        return json.loads((tmp_path / label / f"{strategy}-round{r}.json").read_text())

    # The second dataset's mnrt alone in its application, at both tolerances ...
    submit(group("alone", cells(1.2, ["mnrt"]), 1))
    submit(group("alone-loose", cells(1.2, ["mnrt"], loose), 1))
    # ... and after the first dataset's group, as a sweep's application runs two
    # strategies in two rounds on each dataset (hash, mnrt, then mnrt, hash); then the
    # loose cell's group on the second dataset's load.
    log = submit(
        group("shared-0.8", cells(0.8, ["hash", "mnrt"]), 2),
        group("shared-1.2", cells(1.2, ["hash", "mnrt"]), 2),
        group("shared-loose", cells(1.2, ["mnrt"], loose), 1),
    )
    order = [("hash", 1), ("mnrt", 1), ("mnrt", 2), ("hash", 2)]
    records = [record(f"shared-{z}", s, r) for z in (0.8, 1.2) for s, r in order]
    records.append(record("shared-loose", "mnrt", 1))
    assert [r["run_index"] for r in records] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # The loose cell shares the second dataset's load (a tolerance is not the data's) ...
    assert [r["dataset_run_index"] for r in records] == [1, 2, 3, 4, 1, 2, 3, 4, 5]
    # ... and plans with its own tolerance, as when it ran alone
    planned_loose = deterministic_outputs(records[8])
    assert planned_loose == deterministic_outputs(record("alone-loose", "mnrt", 1))
    records = records[:8]
    # mnrt (which migrates state) after another dataset's runs, after hash and after
    # itself: as when it ran alone.
    expected = deterministic_outputs(record("alone", "mnrt", 1))
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
    # The task log says where the application is (round, run, strategy), with the time
    # left once a run has ended, and how each group's rounds ended.
    assert "application setup (session)" in log and "at least 9 runs on 2 dataset(s)" in log
    assert log.count("dataset load (") == 2
    assert "shared-0.8: round 1 (of 2-2), run 1 of at least 9: hash" in log
    assert "shared-1.2: round 2 (of 2-2), run 8 of at least 9: hash; at least about " in log
    assert "shared-1.2: rounds stopped: max_rounds (2) reached" in log


def test_per_sender_and_table_strategies_route_in_the_jvm_under_spark_submit(local_state, tmp_path):
    """``spark-submit`` starts the JVM before the session's settings apply: the jar gets
    there by ``ADD JAR`` (``jvm_routing.routing_path``), and the runs say so: the
    per-sender routers' and a planner's routing table alike."""
    from balancebench.spark import jvm_routing
    from balancebench.state import tracking

    if jvm_routing.jar_problem() is not None:
        pytest.skip(f"no JVM router here: {jvm_routing.jar_problem()}")
    params = ExperimentSpec.checked(
        {**TINY, "strategies": ["pkg", "wchoices", "qmmp"], "experiment": "e2e-jvm-routing"}
    )
    folder = generate(
        params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
    )[0]
    cells = tuple(
        RunSpec(dataset_dir=str(folder), strategy=name, params=params)
        for name in ("pkg", "wchoices", "qmmp")
    )
    group = GroupSpec("jvm", cells, RoundPolicy(1, 1), str(tmp_path / "jvm"))
    _submit(GroupSpec.write((group,), tmp_path / "jvm.json"))
    client = tracking.client()
    for name in ("pkg", "wchoices"):
        record = json.loads((tmp_path / "jvm" / f"{name}-round1.json").read_text())
        run = client.get_run(record["run_id"])
        # The oracle passed (the run would have failed), the routing ran in the JVM ...
        assert run.data.metrics["oracle_passed"] == 1.0
        assert run.data.tags[jvm_routing.PATH_TAG] == "jvm", name
        # ... and no Python worker routed (its CPU would be counted here)
        python_s = client.get_metric_history(record["run_id"], "batch/route_python_s")
        assert python_s and all(m.value == 0.0 for m in python_s)
        assert jvm_routing.TABLE_PATH_TAG not in run.data.tags
    record = json.loads((tmp_path / "jvm" / "qmmp-round1.json").read_text())
    run = client.get_run(record["run_id"])
    assert run.data.metrics["oracle_passed"] == 1.0
    assert run.data.tags[jvm_routing.TABLE_PATH_TAG] == "jvm"
    assert jvm_routing.PATH_TAG not in run.data.tags
