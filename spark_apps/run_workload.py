"""spark-submit entry point: the cell groups of one Spark application, each in paired,
rotated rounds of its strategies on one loaded dataset, every run logged to MLflow.

    spark-submit --master 'local[*]' spark_apps/run_workload.py --groups-file groups.json

The file holds a list of ``balancebench.experiment.run_spec.GroupSpec``: a group's cells (one
``RunSpec`` per strategy: the dataset, the experiment Params and the cell's MLflow run)
and its rounds' policy (``balancebench.experiment.rounds``), run in that order
(``experiment.run_groups``). All logic lives in the library.
"""

from __future__ import annotations

import argparse
import sys

from balancebench.experiment.rounds import headline_text
from balancebench.experiment.run_spec import GroupSpec
from balancebench.experiment.runs import run_groups
from balancebench.state.tracking import stops_when_unreachable


@stops_when_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups-file", required=True, help="a JSON file of GroupSpecs")
    args = parser.parse_args(argv)
    for record in run_groups(GroupSpec.read(args.groups_file)):
        said = headline_text(record["summary"])  # words and units, not a raw dict
        print(f"{record['strategy']} (run {record['run_id'][:8]}): {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
