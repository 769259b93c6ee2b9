"""spark-submit entry point: run one model sweep (papers 001-004) and log it to MLflow.

    spark-submit --master 'local[*]' spark_apps/run_model_sweep.py --spec '<ModelSweepSpec JSON>'

The spec (``balancebench.experiment.model_experiment.ModelSweepSpec``) names the dataset, the sweep
Params and the MLflow parent run; every (strategy, point, repetition) is one Spark task.
"""

from __future__ import annotations

import argparse
import sys

from balancebench.experiment.model_experiment import ModelSweepSpec, run_model_sweep
from balancebench.state.tracking import stops_when_unreachable


@stops_when_unreachable
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="ModelSweepSpec as JSON")
    args = parser.parse_args(argv)
    out = run_model_sweep(ModelSweepSpec.from_json(args.spec))
    print(f"{out['points']} points; summary {out['csv']}; figure {out['figure']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
