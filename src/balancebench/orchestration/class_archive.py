"""A class-data-sharing archive of the Spark driver JVM's classes (the JDK's AppCDS).

Every Spark driver JVM loads, parses and verifies the same several thousand classes from
PySpark's jars when it starts and while its first jobs plan and compile; a run of a few
batches paid that again in each application. The JDK can map them from an archive
instead (``-XX:SharedArchiveFile``). Measured on this machine, JVM CPU of one spark-submit
(``benchmarks/cpu_by_worker.py``; C1-only JIT as in ``make test-faults``): a session that
starts and stops 12-13 core-seconds without the archive, 6 with it; a 40,000-tuple,
3-batch ``balancebench run`` of hash 42-43 without, 25 with.

- ``make setup`` builds it (:func:`build`): one small application (:func:`exercise`: a
  round of three TOPK strategies on 20,000 tuples, the path every run takes) runs under
  ``spark-submit`` with ``-XX:ArchiveClassesAtExit``, into ``.local/jvm``; nothing built
  is committed. Its name holds :func:`archive_key`, a digest of what the JDK checks
  when it maps an archive (the ``java`` binary, the launcher's class path: the jars'
  names, sizes and times), so a new JDK or PySpark is never given a stale archive: the
  next ``make setup`` builds a new one and removes the old.
- :func:`driver_java_options` are the spark-submit JVMs' options (``local_env`` puts them
  in ``SPARK_SUBMIT_OPTS``): the log4j configuration (``infra/spark-conf``) and, when the
  archive for this key exists, the archive. Without it (a failed build, a JDK without
  CDS) a run starts as before, only slower.
- An archive cannot record a class path holding a non-empty folder, and Spark's launcher
  puts ``SPARK_CONF_DIR`` first on it: the drivers' ``SPARK_CONF_DIR`` is an empty folder
  (:func:`conf_dir`), and the log4j file comes as ``-Dlog4j2.configurationFile``. The
  standalone cluster's daemons and executors keep ``infra/spark-conf``
  (``infra/spark-standalone.sh``) and no archive.

What it changes is start-up only: the same classes, bytecode and JIT; no strategy's
figure includes a JVM's start (it is the harness's), so no measured figure moves by it.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from balancebench.state.paths import project_root, pyspark_jars, source_root

#: Where the drivers' log4j configuration lives (the cluster's daemons read it there too).
LOG4J_FILE = Path("infra") / "spark-conf" / "log4j2.properties"
#: What a built archive's name starts with (``spark-classes-<key>.jsa``).
PREFIX = "spark-classes-"
#: The exercise, run by ``spark-submit`` (a thin entry point to :func:`exercise`).
EXERCISE_APP = Path("spark_apps") / "exercise_classes.py"


def jvm_dir() -> Path:
    """The checkout's compiled JVM files (beside ``jvm_routing``'s jar)."""
    return project_root() / ".local" / "jvm"


def conf_dir() -> Path:
    """The drivers' ``SPARK_CONF_DIR``: an empty folder (see the module's docstring)."""
    return jvm_dir() / "spark-conf"


def _java() -> Path | None:
    """The ``java`` Spark's launcher runs (``$JAVA_HOME/bin/java``, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_key() -> str | None:
    """A digest of what the JDK checks before it maps the archive; None without a JVM."""
    java = _java()
    if java is None:
        return None
    digest = hashlib.sha256()
    for path in (java, java.parent.parent / "lib" / "server" / "libjvm.so"):
        stat = path.stat() if path.exists() else None
        digest.update(f"{path} {stat and (stat.st_size, stat.st_mtime_ns)}\n".encode())
    digest.update(f"conf {conf_dir()}\n".encode())
    for jar in sorted(pyspark_jars().glob("*.jar")):
        stat = jar.stat()
        digest.update(f"{jar} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    # What the exercise loads decides what the archive holds.
    digest.update(f"{EXERCISED} {inspect.getsource(exercise)}".encode())
    return digest.hexdigest()[:16]


def archive_path() -> Path | None:
    key = archive_key()
    return None if key is None else jvm_dir() / f"{PREFIX}{key}.jsa"


def log4j_option() -> str:
    return f"-Dlog4j2.configurationFile={source_root() / LOG4J_FILE}"


def driver_java_options() -> str:
    """The spark-submit JVMs' options: log4j's file and, when built, the archive."""
    options = [log4j_option()]
    archive = archive_path()
    if archive is not None and archive.exists() and conf_dir().is_dir():
        options.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)


def build() -> str:
    """Build the archive unless the one for this key exists; what happened. A failed
    build leaves none (runs start without it) and says why."""
    archive = archive_path()
    if archive is None:
        return "class archive: no java found; Spark JVMs start without one"
    if archive.exists():
        return f"class archive: {archive} is up to date"
    # Another key's archive, and what a stopped build left half written.
    for stale in [*jvm_dir().glob(f"{PREFIX}*.jsa"), *jvm_dir().glob(f"{PREFIX}*.jsa.tmp-*")]:
        stale.unlink(missing_ok=True)
    partial = archive.with_name(archive.name + f".tmp-{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="balancebench-class-archive-") as local:
        options = f"{log4j_option()} -XX:ArchiveClassesAtExit={partial}"
        done = subprocess.run(
            exercise_command(),
            env=exercise_env(local, options),
            capture_output=True,
            text=True,
            cwd=source_root(),
        )
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        return "class archive: not built; Spark JVMs start without one:\n  " + "\n  ".join(tail)
    partial.replace(archive)  # whole or not at all
    return f"class archive: built {archive} ({archive.stat().st_size / 2**20:.0f} MiB)"


#: The strategies the exercise runs by default: the TOPK path every quick run takes, a
#: planner that migrates state, and per-sender routing.
EXERCISED = ("hash", "qmmp", "pkg")


def exercise_command(strategies: tuple[str, ...] = ()) -> list[str]:
    """``spark-submit`` of the exercise (:data:`EXERCISED`, or ``strategies``)."""
    chosen = ["--strategies", *strategies] if strategies else []
    app = str(source_root() / EXERCISE_APP)
    spark_submit = str(Path(sys.executable).parent / "spark-submit")
    return [spark_submit, "--master", "local[2]", app, *chosen]


def spark_submit_env(java_options: str) -> dict[str, str]:
    """What a spark-submit JVM started here needs in its environment (``local_env``'s
    for runs, :func:`exercise_env`'s for the exercise): loopback, this interpreter for the
    Python driver and workers, the drivers' empty ``SPARK_CONF_DIR`` and
    ``java_options`` as the JVM's options."""
    conf_dir().mkdir(parents=True, exist_ok=True)
    return {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_CONF_DIR": str(conf_dir()),
        "SPARK_SUBMIT_OPTS": java_options,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def exercise_env(local: str, java_options: str) -> dict[str, str]:
    """The exercise's environment: a ``BALANCEBENCH_LOCAL`` of its own (its dataset and
    MLflow store; nothing of the user's) and :func:`spark_submit_env`."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")},
        "BALANCEBENCH_LOCAL": local,
        **spark_submit_env(java_options),
    }


def exercise(strategies: tuple[str, ...] = EXERCISED) -> None:
    """One round of each of ``strategies`` on 20,000 generated TOPK tuples, through the
    path every run takes (:func:`balancebench.experiment.runs.run_groups`: the session, the
    loaded stream, the measured batches, the oracle, the task metrics read from Spark's
    REST API, the MLflow runs), in the ``BALANCEBENCH_LOCAL`` of :func:`exercise_env`."""
    from balancebench.experiment.params import ExperimentSpec
    from balancebench.experiment.rounds import RoundPolicy
    from balancebench.experiment.run_spec import GroupSpec, RunSpec
    from balancebench.experiment.runs import run_groups
    from balancebench.generators import generate, generator_params
    from balancebench.state.paths import datasets_dir, local_dir

    params = ExperimentSpec.checked(
        {
            "workload": "topk",
            "strategies": list(strategies),
            "n_tuples": 20_000,
            "n_keys": 200,
            "n_batches": 2,
            "n_nodes": 4,
            "input_rate_tuples_per_s": 10_000.0,
            "warmup_batches": 0,
            "experiment": "class-archive",
        }
    )
    dataset = params["dataset"]
    folder, _ = generate(dataset, datasets_dir(), generator_params(dataset, params), checked=True)
    cells = tuple(RunSpec(str(folder), name, params) for name in strategies)
    group = GroupSpec("exercise", cells, RoundPolicy(1, 1), str(local_dir() / "exercise"))
    for record in run_groups([group]):
        if record["summary"]["oracle_passed"] != 1.0:
            raise RuntimeError(f"the exercise's {record['strategy']} run failed the oracle")


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m balancebench.orchestration.class_archive build")
    print(build())
