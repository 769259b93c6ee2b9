"""Every DAG imports; balance_experiment's Params validate and reject bad values clearly."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from balancebench.experiment.params import EXPERIMENT_PARAMS

DAGS = Path(__file__).resolve().parents[1] / "dags"


@pytest.fixture(scope="module")
def dagbag(local_state):
    from balancebench.orchestration.local_env import airflow_env

    os.environ.update(airflow_env())
    from airflow.dag_processing.dagbag import BundleDagBag

    # As the DAG processor, `airflow dags test` and the task runner read them: the bundle's
    # folder on sys.path, so the DAG files import dag_support.
    return BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS)


@pytest.mark.parametrize("path", sorted(p.name for p in DAGS.glob("*.py")))
def test_dag_files_import_without_errors(dagbag, path):
    errors = {Path(k).name: v for k, v in dagbag.import_errors.items()}
    assert path not in errors, errors.get(path)


def test_balance_experiment_shape(dagbag):
    dag = dagbag.dags["balance_experiment"]
    assert dag is not None
    assert set(dag.task_ids) == {"generate", "validate", "run_rounds", "compare"}
    assert dag.doc_md and "balance_experiment" in dag.doc_md
    assert set(dag.params.keys()) == set(EXPERIMENT_PARAMS)
    assert dag.get_task("run_rounds").downstream_task_ids == {"compare"}
    # Defaults validate.
    dag.params.validate()


@pytest.mark.parametrize(
    ("name", "value", "needle"),
    [
        ("zipf_s", -1, "-1 is less than the minimum of 0"),
        ("strategies", ["hash", "nope"], "'nope' is not one of"),
        ("n_nodes", 0, "0 is less than the minimum of 1"),
        ("tolerance", "tight", "'tight' is not of type 'number'"),
    ],
)
def test_bad_params_are_rejected_with_a_clear_message(dagbag, name, value, needle):
    from airflow.sdk.exceptions import ParamValidationError

    params = copy.deepcopy(dagbag.dags["balance_experiment"].params)
    with pytest.raises(ParamValidationError) as err:
        params[name] = value
    assert f"Invalid input for param {name}: " in str(err.value)
    assert needle in str(err.value)


def test_generate_dataset_shape_and_params(dagbag):
    from airflow.sdk.exceptions import ParamValidationError

    from balancebench.experiment.params import DATASET_DAG_PARAMS
    from balancebench.generators import GENERATORS

    dag = dagbag.dags["generate_dataset"]
    assert set(dag.task_ids) == {"generate", "validate"}
    assert set(dag.params.keys()) == set(DATASET_DAG_PARAMS)
    assert DATASET_DAG_PARAMS["dataset"]["enum"] == sorted(GENERATORS)
    dag.params.validate()
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError, match="'nope' is not one of"):
        params["dataset"] = "nope"


def test_model_experiment_shape_and_params(dagbag):
    from airflow.sdk.exceptions import ParamValidationError

    from balancebench.experiment.model_sweep import MODEL_EXPERIMENT_PARAMS

    dag = dagbag.dags["model_experiment"]
    assert set(dag.task_ids) == {"generate", "validate", "run_sweep", "compare"}
    assert dag.doc_md and "model_experiment" in dag.doc_md
    assert set(dag.params.keys()) == set(MODEL_EXPERIMENT_PARAMS)
    assert dag.get_task("run_sweep").downstream_task_ids == {"compare"}
    dag.params.validate()
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError) as err:
        params["model"] = "ns3"
    assert "Invalid input for param model: " in str(err.value)


@pytest.mark.parametrize(
    "dag_id", ["balance_experiment", "model_experiment", "nightly_sweep", "generate_dataset"]
)
def test_every_dag_triggers_on_its_defaults_with_sectioned_fields(dagbag, dag_id):
    """The UI's trigger form: the defaults validate, nothing is an empty string (the form
    treats "" as a missing required field and disables Trigger), every field has a section."""
    dag = dagbag.dags[dag_id]
    dag.params.validate()
    for name, param in dag.params.items():
        assert param.value != "", f"{dag_id}.{name}: empty-string default blocks the form"
        assert param.schema.get("section"), f"{dag_id}.{name} has no section"
    sections = {p.schema["section"] for p in dag.params.values()}
    assert len(sections) >= 2
    # The form opens one section, Airflow's "Run Parameters" (the rest start collapsed):
    # what a user sets for a first run, at most 20 fields, before every other.
    names = list(dag.params)
    by_name = dict(dag.params.items())
    opened = [n for n in names if by_name[n].schema["section"] == "Run Parameters"]
    assert 3 <= len(opened) <= 20, (dag_id, opened)
    assert names[: len(opened)] == opened, dag_id
    # No test hook in a production form (issue 60): the tests get theirs another way.
    assert not [n for n in dag.params if n.startswith("test_")], dag_id
    assert "Testing" not in sections, dag_id
    # Every list of names is a multi-select of the valid names (``examples``).
    for name, param in dag.params.items():
        items = param.schema.get("items")
        if isinstance(items, dict) and "enum" in items:
            assert param.schema.get("examples") == items["enum"], f"{dag_id}.{name}"


def test_nightly_sweep_shape_schedule_and_timed_concurrency(dagbag):
    dag = dagbag.dags["nightly_sweep"]
    assert set(dag.task_ids) == {
        "generate",
        "validate",
        "run_application",
        "summarize",
        "check_regressions",
    }
    # A cron trigger (no data intervals, no catchup) at 02:00 by default.
    assert type(dag.timetable).__name__ == "CronTriggerTimetable"
    assert dag.timetable.expression == "0 2 * * *"
    assert dag.catchup is False
    for dag_id, task_id in (
        ("nightly_sweep", "run_application"),
        ("balance_experiment", "run_rounds"),
    ):
        mapped = dagbag.dags[dag_id].get_task(task_id)
        # Timed runs do not share the machine unless the user asks for it.
        assert mapped.partial_kwargs["max_active_tis_per_dag"] == 1
        assert mapped.partial_kwargs["map_index_template"] == "{{ task.name }}"


def test_starting_the_service_never_starts_a_past_nightly_slot(dagbag, monkeypatch):
    """`make airflow` at 02:16 UTC started the 02:00 sweep at once (Airflow's
    run_immediately buffer of 10% of a day): the first run is the next 02:00."""
    import datetime

    import airflow.timetables.trigger as trigger
    from airflow.timetables.base import TimeRestriction

    started = datetime.datetime(2026, 11, 26, 2, 16, tzinfo=datetime.UTC)
    monkeypatch.setattr(trigger, "utcnow", lambda: started)
    from airflow.serialization.encoders import coerce_to_core_timetable

    # The timetable as the scheduler holds it (the DAG file's, turned into core's).
    timetable = coerce_to_core_timetable(dagbag.dags["nightly_sweep"].timetable)
    first = timetable.next_dagrun_info(
        last_automated_data_interval=None,
        restriction=TimeRestriction(earliest=None, latest=None, catchup=False),
    )
    assert first.run_after == datetime.datetime(2026, 11, 27, 2, 0, tzinfo=datetime.UTC)


def test_the_schedules_say_their_time_zone(dagbag):
    # Airflow's own schedule text ("At 02:00") names no time zone; the description does
    assert dagbag.dags["nightly_sweep"].description == (
        "Scheduled at cron '0 2 * * *' in UTC (BALANCEBENCH_NIGHTLY_CRON); runs when triggered too."
    )
    assert "no schedule: BALANCEBENCH_MODEL_CRON is none" in (
        dagbag.dags["model_experiment"].description
    )
