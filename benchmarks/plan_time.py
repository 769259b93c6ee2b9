"""Plan-generation time (paper 000's O1) of every planning strategy, against a numpy floor.

    uv run python benchmarks/plan_time.py            # the full grid (a few minutes)
    uv run python benchmarks/plan_time.py --quick    # K <= 1e5, fewer repeats

Statistics: one window of ``K`` keys with Zipf(s) loads (``100 * K`` tuples), keys
hashed to their home node ``F(k)`` (a fresh system routed by hash; ``balanceload`` gets
its bucket map's placement instead), in the layout the engine delivers: its statistics
job (``spark.engine.Engine._stats``) joins the per-(key, node) counts and collects them
in the join's order, which is random with respect to both key and node, so the rows
come in random order (not grouped by node). For each (K, s, N, tolerance) and strategy:
the median plan time over ``--repeats`` fresh strategies, the imbalance after, the
routing-table entries, the split keys and the migrated tuples; and, as the floor, the
median time of what any planner needs at least on that layout: one stable sort of the
node column plus one ``np.bincount`` (the node loads).

The targets of issue 12 are checked at K = 1e6, N = 64, tolerance 0.05 and printed last:
qmmp <= 2x the floor, mnrt <= 2x qmmp.
The table is also written to ``.local/benchmarks/plan_time.csv``.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.hashing import home_nodes
from balancebench.core.loads import KeyLoads
from balancebench.core.routing_table import BucketMap
from balancebench.core.schema import positive_int
from balancebench.state.paths import local_dir
from balancebench.strategies import get_strategy

PLANNERS = ["qmmp", "mnrt", "readj", "balanceload"]


def window(n_keys: int, zipf_s: float, n_nodes: int, seed: int, buckets: bool) -> KeyLoads:
    rng = np.random.default_rng(seed)
    weights = np.arange(1, n_keys + 1, dtype=np.float64) ** -zipf_s
    load = np.maximum(np.rint(weights / weights.sum() * 100.0 * n_keys), 1.0)
    keys = rng.permutation(n_keys).astype(np.int64)  # rank -> key id
    if buckets:
        node = BucketMap.default(n_nodes, 1024).storage_nodes(keys)
    else:
        node = home_nodes(keys, n_nodes)
    order = rng.permutation(n_keys)  # as the engine's statistics job delivers them
    return KeyLoads.trusted(keys[order], node[order].astype(np.int32), load[order], load[order])


def floor_pass(loads: KeyLoads, n_nodes: int) -> np.ndarray:
    """The least a planner does on unsorted statistics: group rows by node, sum loads."""
    np.argsort(loads.node, kind="stable")
    return np.bincount(loads.node, weights=loads.load, minlength=n_nodes)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = plan_clock()  # the planners' own clock (their plan_time_ms)
        fn()
        times.append((plan_clock() - t) * 1e3)
    return float(np.median(times))


def measure(name: str, loads: KeyLoads, n_nodes: int, tol: float, repeats: int) -> dict:
    plans = [get_strategy(name, n_nodes=n_nodes).plan(loads, n_nodes, tol) for _ in range(repeats)]
    last = plans[-1]
    return {
        "plan_ms": float(np.median([p.plan_time_ms for p in plans])),
        "imbalance_before": last.imbalance_before,
        "imbalance_after": last.imbalance_after,
        "entries": last.routing_table_entries,
        "split_keys": last.split_keys,
        "migrated_tuples": last.migrated_state_tuples,
        "reached": last.reached_tolerance,
        "stopped": last.info.get("stopped", ""),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K <= 1e5, 3 repeats")
    parser.add_argument("--repeats", type=positive_int, default=5)
    args = parser.parse_args()
    ks = [10**3, 10**4, 10**5] if args.quick else [10**3, 10**4, 10**5, 10**6]
    repeats = 3 if args.quick else args.repeats
    rows = []
    # Warm-up: first calls pay imports and allocator growth.
    for name in PLANNERS:
        measure(name, window(1000, 1.0, 8, 0, name == "balanceload"), 8, 0.05, 1)
    header = (
        f"{'K':>8} {'s':>4} {'N':>4} {'tol':>5} {'strategy':>11} {'plan_ms':>9} "
        f"{'x floor':>8} {'imb_before':>10} {'imb_after':>9} {'entries':>8} {'split':>6} "
        f"{'migrated':>10} reached"
    )
    print(header)
    grid = [
        (k, s, n, t)
        for k in ks
        for s in (0.8, 1.2)
        for n in (8, 32, 128)
        for t in (0.01, 0.05, 0.2)
    ]
    targets = [(10**6, s, 64, 0.05) for s in (0.8, 1.2)] if not args.quick else []
    for k, s, n, tol in grid + targets:
        loads = window(k, s, n, seed=k + n, buckets=False)
        floor = median_ms(lambda lo=loads, nn=n: floor_pass(lo, nn), 21)
        for name in PLANNERS:
            lo = window(k, s, n, seed=k + n, buckets=True) if name == "balanceload" else loads
            r = measure(name, lo, n, tol, 3 if name == "readj" else repeats)
            row = {
                "K": k,
                "s": s,
                "N": n,
                "tolerance": tol,
                "strategy": name,
                "floor_ms": floor,
                **r,
                "target_point": (k, s, n, tol) in targets,
            }
            rows.append(row)
            print(
                f"{k:>8} {s:>4} {n:>4} {tol:>5} {name:>11} {r['plan_ms']:>9.2f} "
                f"{r['plan_ms'] / floor:>8.1f} {r['imbalance_before']:>10.3f} "
                f"{r['imbalance_after']:>9.3f} {r['entries']:>8} {r['split_keys']:>6} "
                f"{r['migrated_tuples']:>10.0f} {r['reached']} {r['stopped']}",
                flush=True,
            )
        print(f"{k:>8} {s:>4} {n:>4} {tol:>5} {'floor':>11} {floor:>9.2f}", flush=True)
    out = local_dir() / "benchmarks" / "plan_time.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    if targets:
        print("\nTargets at K = 1e6, N = 64, tolerance 0.05:")
        for s in (0.8, 1.2):
            pick = {r["strategy"]: r for r in rows if r["target_point"] and r["s"] == s}
            q, m, rj = pick["qmmp"], pick["mnrt"], pick["readj"]
            print(
                f"  s={s}: floor {q['floor_ms']:.2f} ms; qmmp {q['plan_ms']:.2f} ms = "
                f"{q['plan_ms'] / q['floor_ms']:.1f}x floor (target <= 2x); mnrt "
                f"{m['plan_ms']:.2f} ms = {m['plan_ms'] / q['plan_ms']:.1f}x qmmp (target "
                f"<= 2x); split keys mnrt {m['split_keys']} vs qmmp {q['split_keys']}; "
                f"entries mnrt {m['entries']} vs qmmp {q['entries']}; readj "
                f"{rj['plan_ms']:.0f} ms, reached_tolerance={rj['reached']} ({rj['stopped']})"
            )
        print(
            "\nreadj as the slow anchor: more tracked keys (smaller min_share) at the target "
            "point, budget 10 s"
        )
        for s in (0.8, 1.2):
            loads = window(10**6, s, 64, seed=10**6 + 64, buckets=False)
            for share in (1e-4, 1e-5, 1e-6):
                p = get_strategy("readj", n_nodes=64, min_share=share).plan(loads, 64, 0.05)
                print(
                    f"  s={s} min_share={share:g}: {p.plan_time_ms:8.0f} ms, tracked keys "
                    f"{p.info['tracked_keys']}, imbalance {p.imbalance_before:.3f} -> "
                    f"{p.imbalance_after:.3f}, reached_tolerance={p.reached_tolerance} "
                    f"({p.info['stopped']}, {p.info['iterations']} moves/swaps)",
                    flush=True,
                )
    print(f"\nCSV: {Path(out)}")


if __name__ == "__main__":
    main()
