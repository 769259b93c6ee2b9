"""spark-submit entry point: the small application whose classes ``make setup`` archives
for the Spark driver JVMs (``balancebench.orchestration.class_archive``; all logic lives there),
and that ``benchmarks/class_archive.py`` times with and without the archive.

    spark-submit --master 'local[2]' spark_apps/exercise_classes.py [--strategies S ...]
"""

from __future__ import annotations

import argparse

from balancebench.orchestration.class_archive import EXERCISED, exercise

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--strategies", nargs="+", default=list(EXERCISED), help="TOPK strategies to run"
    )
    exercise(tuple(parser.parse_args().strategies))
