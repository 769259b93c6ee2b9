"""spark-submit entry point: replay one dataset under one strategy and log it to MLflow.

    spark-submit --master 'local[*]' spark_apps/run_workload.py --spec '<RunSpec JSON>'

The spec (``balancebench.experiment.RunSpec``) names the dataset, the strategy, the
experiment Params and the MLflow parent run. All logic lives in the library.
"""

from __future__ import annotations

import argparse
import sys

from balancebench.experiment import RunSpec, run_strategy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="RunSpec as JSON")
    args = parser.parse_args(argv)
    record = run_strategy(RunSpec.from_json(args.spec))
    print(f"{record['strategy']}: run {record['run_id']} {record['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
