"""What a user or Airflow starts: the CLI (``cli``; its checks before any work, ``door``;
a DAG run it starts, follows and stops, ``dag_runner``), the DAG steps (``pipeline``,
``sweep_pipeline``), the sweep's grid (``sweep_grid``), the local environment for
``spark-submit`` (``local_env``) and the Spark driver's class archive. It may import
every layer below; nothing imports it."""
