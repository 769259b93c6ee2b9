"""The settings read from the environment (``balancebench.state.environment``): each bad value is
refused at the door, naming the variable and what it allows, by the CLI, ``make airflow``
and the DAG files alike; the registry is the README's table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from balancebench.state.environment import SETTINGS, SettingError, check_environment, setting

ROOT = Path(__file__).resolve().parents[1]

#: The reproductions of issue 48 (and one more per variable).
BAD = [
    ("BALANCEBENCH_TIMED_CONCURRENCY", "abc"),
    ("BALANCEBENCH_TIMED_CONCURRENCY", "0"),
    ("BALANCEBENCH_DRIVER_MEMORY", "lots"),
    ("BALANCEBENCH_DRIVER_MEMORY", "4 g"),
    # below what a Spark driver starts with (issue 62: 1k failed 26 s later in the JVM)
    ("BALANCEBENCH_DRIVER_MEMORY", "1k"),
    ("BALANCEBENCH_DRIVER_MEMORY", "449m"),
    ("BALANCEBENCH_SPARK_MASTER", "bogus"),
    ("BALANCEBENCH_SPARK_MASTER", "spark://host:99999"),
    ("BALANCEBENCH_NIGHTLY_CRON", "every full moon"),
    ("BALANCEBENCH_NIGHTLY_CRON", "0 2 * *"),
    ("BALANCEBENCH_MODEL_CRON", "61 * * * *"),
    ("BALANCEBENCH_MLFLOW_UI", "127.0.0.1:5000"),
]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return str(path)


@pytest.mark.parametrize(("name", "value"), BAD)
def test_a_bad_value_is_refused_naming_the_variable_and_what_it_allows(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingError) as found:
        check_environment()
    assert str(found.value).startswith(f"{name}: ")
    assert f"allowed: {SETTINGS[name].allowed}" in str(found.value)


@pytest.mark.parametrize(
    "name", ["BALANCEBENCH_CHECKPOINT_DIR", "BALANCEBENCH_LOCAL", "BALANCEBENCH_HOME"]
)
def test_a_file_where_a_folder_belongs_is_refused(monkeypatch, a_file, name):
    monkeypatch.setenv(name, a_file)
    with pytest.raises(SettingError, match=f"^{name}: .*not a file"):
        setting(name)
    monkeypatch.setenv(name, a_file + "/below")
    with pytest.raises(SettingError, match=f"^{name}: "):
        setting(name)


def test_good_values_and_the_defaults(monkeypatch, tmp_path):
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    assert setting("BALANCEBENCH_NIGHTLY_CRON") == "0 2 * * *"
    assert setting("BALANCEBENCH_MODEL_CRON") is None
    assert setting("BALANCEBENCH_TIMED_CONCURRENCY") == 1
    assert setting("BALANCEBENCH_DRIVER_MEMORY") == "4g"
    assert setting("BALANCEBENCH_DRIVER_MEMORY", default="2g") == "2g"  # the model sweep's
    monkeypatch.setenv("BALANCEBENCH_DRIVER_MEMORY", "3g")
    assert setting("BALANCEBENCH_DRIVER_MEMORY", default="2g") == "3g"  # the user's wins
    monkeypatch.delenv("BALANCEBENCH_DRIVER_MEMORY")
    assert setting("BALANCEBENCH_SPARK_MASTER") == "local[*]"
    assert setting("BALANCEBENCH_CHECKPOINT_DIR") is None
    for name, value, parsed in [
        ("BALANCEBENCH_NIGHTLY_CRON", " none ", None),
        ("BALANCEBENCH_NIGHTLY_CRON", "30 3 * * 1-5", "30 3 * * 1-5"),
        ("BALANCEBENCH_TIMED_CONCURRENCY", "2", 2),
        ("BALANCEBENCH_DRIVER_MEMORY", "512m", "512m"),
        ("BALANCEBENCH_DRIVER_MEMORY", "450m", "450m"),  # the floor, measured to start
        ("BALANCEBENCH_SPARK_MASTER", "spark://node-1:7077", "spark://node-1:7077"),
        ("BALANCEBENCH_MLFLOW_UI", "https://mlflow.example/", "https://mlflow.example"),
    ]:
        monkeypatch.setenv(name, value)
        assert setting(name) == parsed
    monkeypatch.setenv("BALANCEBENCH_CHECKPOINT_DIR", str(tmp_path / "new" / "folder"))
    assert setting("BALANCEBENCH_CHECKPOINT_DIR") == tmp_path / "new" / "folder"
    check_environment()


def test_every_variable_the_code_reads_is_in_the_registry_and_the_readme():
    read = set()
    for folder in ("src", "dags", "plugins", "infra", "spark_apps"):
        for path in (ROOT / folder).rglob("*.py"):
            read |= set(re.findall(r'setting\(\s*"(BALANCEBENCH_[A-Z_]+)"', path.read_text()))
            direct = re.findall(
                r'environ(?:\.get)?[(\[]\s*"(BALANCEBENCH_[A-Z_]+)"', path.read_text()
            )
            # Only the owner variables the service and the CLI set for their children
            assert set(direct) <= {"BALANCEBENCH_OWNER_PID", "BALANCEBENCH_OWNER_PIDFILE"}, path
    assert read <= set(SETTINGS)
    readme = (ROOT / "README.md").read_text()
    for name, spec in SETTINGS.items():
        assert f"`{name}`" in readme, name
        assert spec.allowed in readme, name


def _env(**bad: str) -> dict[str, str]:
    return {**os.environ, **bad}


def test_the_cli_refuses_a_bad_setting_before_any_work(tmp_path):
    cli = str(Path(sys.executable).parent / "balancebench")
    env = _env(BALANCEBENCH_DRIVER_MEMORY="lots", BALANCEBENCH_LOCAL=str(tmp_path / "local"))
    done = subprocess.run([cli, "datasets"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "BALANCEBENCH_DRIVER_MEMORY: 'lots' is not allowed; allowed: " in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "local").exists()  # nothing was made


def test_make_airflow_refuses_a_bad_cron_before_anything_starts(tmp_path):
    env = _env(
        BALANCEBENCH_NIGHTLY_CRON="every full moon", BALANCEBENCH_LOCAL=str(tmp_path / "local")
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "service.py"), "start"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "BALANCEBENCH_NIGHTLY_CRON: 'every full moon' is not allowed; allowed: "
        f"{SETTINGS['BALANCEBENCH_NIGHTLY_CRON'].allowed}; nothing was started"
    )
    assert not (tmp_path / "local" / "service").exists()


def test_a_dag_file_parsed_with_a_bad_setting_names_it():
    code = (
        "import sys, runpy\nsys.path[:0] = ['dags', 'plugins']\n"
        "runpy.run_path('dags/nightly_sweep.py')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(BALANCEBENCH_TIMED_CONCURRENCY="abc"),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode != 0
    assert "SettingError: BALANCEBENCH_TIMED_CONCURRENCY: 'abc' is not allowed" in done.stderr
