"""What reliable state costs: ``localCheckpoint`` against ``checkpoint`` files, side by side
in one run (issue 15: a run that survives a lost executor).

    uv run python benchmarks/state_checkpoint.py                 # topk and eq5, hash and mnrt
    uv run python benchmarks/state_checkpoint.py --tuples 500000 --sf 0.02

One Spark session (``local[*]``); every run goes through the runner registry as a DAG run
does (every batch checked by the oracle), once with ``state_checkpoint`` 'local' and once
'reliable' (files under ``.local/checkpoints``, removed after the run), alternating so
that neither always runs on a warmer JVM. Printed per (workload, strategy): the mean node
work per batch (the cost model's node service is its max over nodes; the checkpoint write
is done by the node tasks that computed the rows, so it is node work), the mean service
time per batch, and the driver wall per batch; then reliable / local.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

import numpy as np

from balancebench.core.schema import positive_int
from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.runs import engine_config, execute
from balancebench.experiment.streams import build_stream
from balancebench.generators import generate, generator_params
from balancebench.state.paths import datasets_dir
from balancebench.strategies import get_strategy, strategy_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=positive_int, default=1_000_000, help="topk stream tuples")
    parser.add_argument("--sf", type=float, default=0.05, help="TPC-H scale factor of eq5")
    parser.add_argument("--batches", type=positive_int, default=6)
    parser.add_argument("--nodes", type=positive_int, default=8)
    parser.add_argument("--skew", type=float, default=1.0, help="Zipf s")
    args = parser.parse_args()
    try:  # every input checked before any work: the message names the Param
        cells = [
            ExperimentSpec.checked(
                {
                    "workload": workload,
                    "strategies": ["hash", "mnrt"],
                    "n_nodes": args.nodes,
                    "n_batches": args.batches,
                    "zipf_s": args.skew,
                    **extra,
                }
            )
            for workload, extra in (
                ("topk", {"n_tuples": args.tuples}),
                ("eq5", {"tpch_scale_factor": args.sf}),
            )
        ]
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.replay_stream import load_replay, release_replay
    from balancebench.spark.session import get_session

    spark = get_session("balancebench-state-checkpoint", master="local[*]")
    rows = []
    for params in cells:
        workload = params["workload"]
        folder, _ = generate(
            params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
        )
        stream = build_stream(workload, folder, params)
        df, interval = load_replay(spark, stream, params["n_batches"], params["n_senders"])
        config = engine_config(params, interval, spark.sparkContext.master)
        # Warm the JVM once per workload (untimed), then alternate the two modes.
        execute(spark, df, replace(config, n_batches=1), get_strategy("hash"), "hash", params)
        for name in params["strategies"]:
            measured = {}
            for reliable in (False, True, True, False):
                strategy = get_strategy(name, n_nodes=args.nodes, **strategy_settings(name, params))
                batches = execute(
                    spark, df, replace(config, reliable_state=reliable), strategy, name, params
                )
                measured.setdefault(reliable, []).append(
                    (
                        np.mean([float(b.node_work_s.sum()) for b in batches]),
                        np.mean([b.costs().service_s for b in batches]),
                        np.mean([b.wall_s for b in batches]),
                    )
                )
            local, reliable = (np.mean(measured[m], axis=0) for m in (False, True))
            rows.append((workload, name, local, reliable))
            print(
                f"{workload:>5} {name:>5}: node work/batch {local[0] * 1e3:7.0f} ms local, "
                f"{reliable[0] * 1e3:7.0f} ms reliable ({reliable[0] / local[0]:.2f}x); "
                f"service/batch {local[1] * 1e3:6.0f} -> {reliable[1] * 1e3:6.0f} ms "
                f"({reliable[1] / local[1]:.2f}x); driver wall/batch {local[2]:.2f} -> "
                f"{reliable[2]:.2f} s ({reliable[2] / local[2]:.2f}x)",
                flush=True,
            )
        release_replay(df)
    spark.stop()


if __name__ == "__main__":
    main()
