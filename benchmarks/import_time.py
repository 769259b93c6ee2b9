"""What starting costs: each DAG file's import CPU beyond Airflow's own, and the CLI's CPU
to print its help and to refuse a bad CONF (issue 46: the DAG processor gives a file
30 s; a busy machine took 25-31 s).

    uv run python benchmarks/import_time.py              # 5 fresh interpreters each
    uv run python benchmarks/import_time.py --repeats 9

Each figure is the median over ``--repeats`` fresh interpreters of the child's CPU time
(user + system, ``os.wait4``), run one after another on an otherwise idle machine. A DAG
file is imported as Airflow's DAG processor does (``dags/`` and ``plugins/`` on the
path); Airflow's own import (``airflow.sdk`` and the Spark provider's operator, which
every DAG file needs) is measured alone and subtracted. Targets: <= 1 s beyond Airflow
per DAG file; <= 2 s for a refused CONF.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from balancebench.core.schema import positive_int

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = (
    "import airflow.sdk\n"
    "from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator\n"
)


def child_cpu_s(argv: list[str]) -> float:
    """CPU seconds (user + system) of one run of ``argv``, its output discarded."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime


def median_cpu_s(argv: list[str], repeats: int) -> float:
    return statistics.median(child_cpu_s(argv) for _ in range(repeats))


def dag_import(dag_file: Path) -> list[str]:
    code = (
        "import sys, runpy\n"
        "sys.path[:0] = ['dags', 'plugins']\n"
        f"{AIRFLOW}runpy.run_path({str(dag_file)!r})\n"
    )
    return [sys.executable, "-c", code]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=positive_int, default=5)
    args = parser.parse_args()
    n = args.repeats
    cli = str(Path(sys.executable).parent / "balancebench")
    airflow = median_cpu_s([sys.executable, "-c", AIRFLOW], n)
    print(f"CPU s, median of {n} fresh interpreters each")
    print(f"  Airflow's own import (airflow.sdk + SparkSubmitOperator): {airflow:.2f} s")
    for dag_file in sorted((ROOT / "dags").glob("*.py")):
        total = median_cpu_s(dag_import(dag_file), n)
        beyond = total - airflow
        met = "met" if beyond <= 1.0 else "MISSED"
        print(
            f"  {dag_file.name:>24}: {total:.2f} s, {beyond:.2f} s beyond Airflow "
            f"(target <= 1 s: {met})"
        )
    help_s = median_cpu_s([cli, "--help"], n)
    print(f"  balancebench --help: {help_s:.2f} s")
    refused = median_cpu_s([cli, "run", "--conf", '{"n_nodes": 0}'], n)
    met = "met" if refused <= 2.0 else "MISSED"
    print(
        f"  balancebench run --conf '{{\"n_nodes\": 0}}' (refused): {refused:.2f} s "
        f"(target <= 2 s: {met})"
    )


if __name__ == "__main__":
    main()
