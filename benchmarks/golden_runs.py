"""Golden runs: what a fixed seed must reproduce exactly, before and after a change that
should not change behaviour (a restructuring, a rename).

    uv run python benchmarks/golden_runs.py --write .local/golden/before.json
    uv run python benchmarks/golden_runs.py --check .local/golden/before.json

For topk, eq5 and band (seed 7, small streams, the strategies that migrate, split and
replicate) and for one model (back-pressure, both strategies): the dataset digest and,
per batch, the tuples in, the tuples each node received and holds, the rows of the
answer, the routing table, the migrated tuples, the oracle's verdict and the answer
itself; per model point, every metric that is not a timing. ``--check`` prints the first
differences and exits 1 on any. Timed figures are left out: they are the machine's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

#: (workload, strategies): one that migrates, one that splits keys, one that replicates.
RUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("topk", ("hash", "mnrt", "qmmp", "pkg")),
    ("eq5", ("mnrt", "qmmp", "bi6")),
    ("band", ("mnrt", "dynamic")),
)
SEED = 7
#: Model metrics that are timings of this machine, not the model's outputs.
TIMED_MODEL_METRICS = ("plan_time", "wall", "_per_wall_s")


def _workload_runs(spark: Any) -> dict[str, Any]:
    from balancebench.experiment.params import ExperimentSpec
    from balancebench.experiment.runs import LoadedCell

    out: dict[str, Any] = {}
    for workload, strategies in RUNS:
        small = {"n_tuples": 60_000, "n_keys": 500} if workload == "topk" else {}
        if workload != "topk":
            small = {"tpch_scale_factor": 0.005}
        params = ExperimentSpec.checked(
            {
                "workload": workload,
                "strategies": list(strategies),
                "seed": SEED,
                "zipf_s": 1.2,
                "n_nodes": 12 if "bi6" in strategies else 6,
                "n_batches": 4,
                "warmup_batches": 0,
                **small,
            }
        )
        cell = LoadedCell(spark, params)
        try:
            runs = {}
            for name in strategies:
                batches, _ = cell.run(spark, name)
                runs[name] = [
                    {
                        "input_tuples": b.input_tuples,
                        "node_received": b.node_received.tolist(),
                        "node_state": b.node_state.tolist(),
                        "result_rows": b.result_rows,
                        "routing_table_entries": b.routing_table_entries,
                        "migrated_tuples": b.migrated_tuples,
                        "oracle_passed": b.oracle_passed,
                        "answer": b.answer if isinstance(b.answer, list | str) else None,
                    }
                    for b in batches
                ]
            out[workload] = {"dataset_digest": cell.stream.dataset_digest, "runs": runs}
        finally:
            cell.release()
        print(f"{workload}: {len(strategies)} strategies run", flush=True)
    return out


def _model_runs() -> dict[str, Any]:
    from balancebench.experiment.model_sweep import (
        model_points,
        run_points_local,
        validate_model_params,
    )

    params = validate_model_params({"model": "backpressure", "seed": SEED, "repetitions": 1})
    out = {}
    for point, result, _ in run_points_local(model_points(params, None)):
        out[point.label()] = {
            k: v
            for k, v in sorted(result.metrics.items())
            if not any(t in k for t in TIMED_MODEL_METRICS)
        }
    print(f"backpressure: {len(out)} points run", flush=True)
    return out


def golden() -> dict[str, Any]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.session import get_session

    spark = get_session("balancebench-golden-runs", master="local[2]")
    try:
        workloads = _workload_runs(spark)
    finally:
        spark.stop()
    return {"seed": SEED, "workloads": workloads, "model_backpressure": _model_runs()}


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        found = [f"{where}/{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            found += _differences(a[k], b[k], f"{where}/{k}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in _differences(x, y, f"{where}[{i}]")
        ]
    return [] if a == b else [f"{where}: {str(a)[:80]} != {str(b)[:80]}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--write", type=Path, help="write the golden outputs here")
    given.add_argument("--check", type=Path, help="compare with golden outputs written before")
    args = parser.parse_args()
    now = json.loads(json.dumps(golden(), sort_keys=True, default=str))
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(json.dumps(now, sort_keys=True, indent=1))
        print(f"golden outputs written to {args.write}")
        return
    before = json.loads(args.check.read_text())
    found = _differences(before, now)
    same = json.dumps(before, sort_keys=True) == json.dumps(now, sort_keys=True)
    print(
        f"golden outputs {'identical' if same else 'DIFFERENT'} to {args.check}"
        + (f": {len(found)} difference(s)" if found else "")
    )
    for line in found[:20]:
        print("  " + line)
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
