"""spark-submit entry point: the small application whose classes ``make setup`` archives
for the Spark driver JVMs (``balancebench.spark.class_archive``; all logic lives there).

    spark-submit --master 'local[2]' spark_apps/exercise_classes.py
"""

from __future__ import annotations

from balancebench.spark.class_archive import exercise

if __name__ == "__main__":
    exercise()
