"""Starting is light (issue 46): a DAG file, the CLI's help and a refused CONF load none of
PySpark, MLflow, numba, matplotlib, pandas or Great Expectations. Airflow's DAG processor
gives a file 30 s; with the library imported whole, a busy machine took 25-31 s and the
DAGs vanished from the UI. Each case runs in a fresh interpreter; a package counts as
loaded once its code ran (a lazy module not yet read has not: ``balancebench.core.lazy``).
The figures (CPU per file) are printed by ``benchmarks/import_time.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pyspark", "mlflow", "numba", "matplotlib", "pandas", "great_expectations")

#: Printed at exit by the child: which of HEAVY ran their code.
REPORT = f"""
import atexit, json, sys
from balancebench.core.lazy import is_loaded
HEAVY = {HEAVY!r}
atexit.register(lambda: print("LOADED=" + json.dumps([n for n in HEAVY if is_loaded(n)]),
                              file=sys.stderr))
"""


def loaded_by(code: str, expect_exit: int = 0) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", REPORT + code], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == expect_exit, proc.stderr[-2000:]
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LOADED="))
    return json.loads(line.removeprefix("LOADED="))


@pytest.mark.parametrize("dag_file", sorted(p.name for p in (ROOT / "dags").glob("*.py")))
def test_a_dag_file_imports_no_heavy_package(dag_file):
    code = f"sys.path[:0] = ['dags', 'plugins']\nimport runpy\nrunpy.run_path('dags/{dag_file}')\n"
    assert loaded_by(code) == []


@pytest.mark.parametrize(
    ("argv", "exit_code"),
    [(["--help"], 0), (["run", "--conf", '{"n_nodes": 0}'], 2), (["sweep", "--conf", "[]"], 2)],
)
def test_the_cli_reads_its_arguments_and_refuses_without_heavy_packages(argv, exit_code):
    cli = "from balancebench.orchestration.cli import app"
    code = f"sys.argv = ['balancebench', *{argv!r}]\n{cli}\napp()\n"
    assert loaded_by(code, expect_exit=exit_code) == []


def test_a_lazy_module_loads_on_first_use():
    # The check above can fail: reading pandas through the lazy module loads it
    code = "from balancebench.core.lazy import lazy_module\nlazy_module('pandas').DataFrame\n"
    assert loaded_by(code) == ["pandas"]
