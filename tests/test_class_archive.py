"""The Spark driver JVMs' class archive: named after what the JDK checks, offered only
when it exists, kept with the user's own JVM options, and mapped by a real spark-submit
JVM started the way runs start (``local_env.airflow_env``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from balancebench.orchestration import class_archive, local_env


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A checkout and PySpark's jars under ``tmp_path`` (the real ones are left alone)."""
    jars = tmp_path / "jars"
    jars.mkdir()
    for name in ("spark-core.jar", "spark-sql.jar"):
        (jars / name).write_bytes(b"jar")
    monkeypatch.setattr(class_archive, "pyspark_jars", lambda: jars)
    monkeypatch.setattr(class_archive, "jvm_dir", lambda: tmp_path / "jvm")
    return tmp_path


def test_a_new_jar_or_a_changed_one_names_a_new_archive(checkout):
    jars = checkout / "jars"
    first = class_archive.archive_key()
    assert first == class_archive.archive_key()  # stable while nothing changes
    (jars / "spark-sql.jar").write_bytes(b"a jar of another size")
    changed = class_archive.archive_key()
    (jars / "spark-extra.jar").write_bytes(b"jar")
    added = class_archive.archive_key()
    assert len({first, changed, added}) == 3


def test_the_archive_is_offered_only_when_built(checkout):
    options = class_archive.driver_java_options()
    assert "-Dlog4j2.configurationFile=" in options and "SharedArchiveFile" not in options
    archive = class_archive.archive_path()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    class_archive.conf_dir().mkdir()
    assert f"-XX:SharedArchiveFile={archive}" in class_archive.driver_java_options()


def test_an_up_to_date_archive_is_not_rebuilt_and_a_stale_one_is_removed(checkout, monkeypatch):
    archive = class_archive.archive_path()
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"archive")
    assert "up to date" in class_archive.build()
    stale = archive.with_name(f"{class_archive.PREFIX}0123456789abcdef.jsa")
    stale.write_bytes(b"old")
    half = archive.with_name(archive.name + ".tmp-99999999")  # a stopped build's
    half.write_bytes(b"half")
    archive.unlink()
    # A build whose application fails: no archive, the stale ones gone, and the reason.
    monkeypatch.setattr(
        class_archive.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "the exercise failed"),
    )
    message = class_archive.build()
    assert "not built" in message and "the exercise failed" in message
    assert list(archive.parent.glob("*.jsa")) == []


def test_the_users_jvm_options_follow_ours_once(monkeypatch):
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")
    first = local_env.airflow_env()["SPARK_SUBMIT_OPTS"]
    assert first.startswith(class_archive.driver_java_options())
    assert first.endswith(" -XX:TieredStopAtLevel=1")  # the JVM takes a flag's last value
    # A process started with that environment builds it again: nothing is added twice.
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", first)
    assert local_env.airflow_env()["SPARK_SUBMIT_OPTS"] == first


@pytest.mark.slow
def test_a_spark_submit_jvm_maps_its_classes_from_the_archive(tmp_path):
    """``make setup`` built the archive, and a JVM started as runs start maps it:
    ``-Xshare:on`` makes a JVM that cannot use it refuse to start, and the class-load log
    shows Spark's classes coming from it."""
    archive = class_archive.archive_path()
    assert archive is not None and archive.exists(), "make setup builds the class archive"
    env = {**os.environ, **local_env.airflow_env()}
    log = tmp_path / "classes.log"
    env["SPARK_SUBMIT_OPTS"] += f" -Xshare:on -Xlog:class+load=info:file={log}"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = log.read_text().splitlines()
    shared = [line for line in lines if "source: shared objects file (top)" in line]
    assert any("org.apache.spark.deploy.SparkSubmit " in line for line in shared), lines[-20:]
    assert "Unable to use shared archive" not in done.stdout + done.stderr


def test_the_code_it_names_comes_from_the_checkout_wherever_the_state_lives(tmp_path, monkeypatch):
    """``BALANCEBENCH_HOME`` moves the project's state (``.local``), not its code: log4j's
    file and the exercise are the checkout's."""
    monkeypatch.setenv("BALANCEBENCH_HOME", str(tmp_path))
    log4j = class_archive.log4j_option().removeprefix("-Dlog4j2.configurationFile=")
    assert Path(log4j).is_file(), log4j
    app = Path(class_archive.exercise_command()[3])
    assert app.is_file() and app.name == "exercise_classes.py", app
    assert class_archive.jvm_dir() == tmp_path / ".local" / "jvm"  # the state moved
