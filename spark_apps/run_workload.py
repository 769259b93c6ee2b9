"""spark-submit entry point: replay one dataset under one strategy, or under the runs of a
sweep's application (its cell groups' datasets in turn), and log each run to MLflow.

    spark-submit --master 'local[*]' spark_apps/run_workload.py --spec '<RunSpec JSON>'
    spark-submit --master 'local[*]' spark_apps/run_workload.py --specs-file runs.json

A spec (``balancebench.experiment.RunSpec``) names the dataset, the strategy, the
experiment Params and the MLflow parent run; a specs file holds a list of them, run in
that order (``experiment.run_group``). All logic lives in the library.
"""

from __future__ import annotations

import argparse
import sys

from balancebench.experiment import RunSpec, run_group


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--spec", help="one RunSpec as JSON")
    given.add_argument("--specs-file", help="a JSON file of RunSpecs, run in one application")
    args = parser.parse_args(argv)
    specs = [RunSpec.from_json(args.spec)] if args.spec else RunSpec.read_group(args.specs_file)
    for record in run_group(specs):
        print(f"{record['strategy']}: run {record['run_id']} {record['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
