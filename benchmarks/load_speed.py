"""How fast a generated dataset loads into Spark (issue 59): ``replay_stream.load_replay``
(each batch read from the Parquet row groups its event times can hold, laid out over the
senders, sorted in arrival order and cached), in tuples per second, at the default run's
4.5M tuples and at 16M.

    uv run python benchmarks/load_speed.py                    # 4.5M and 16M tuples
    uv run python benchmarks/load_speed.py --tuples 4500000 --loads 3

Each size loads ``--loads`` times in a process of its own (a fresh JVM and Spark session,
``local[*]``), so the first load pays the JVM's warm-up (class loading, the JIT compiling
Parquet's reader, the shuffle, the sort and the cache builder: a ``make run`` loads its
dataset once, first thing) and the later ones show the rate once the JVM is warm; a last
load of the same tuples as one batch shows what the batches' own jobs cost. The
dataset is generated (or reused) before the clock starts; the default run's Params
otherwise (TOPK, 6 batches, 8 senders). Machine otherwise idle. Target: 1M tuples/s or
more on the first load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from balancebench.core.schema import positive_int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", nargs="*", type=positive_int, default=[4_500_000, 16_000_000])
    parser.add_argument("--loads", type=positive_int, default=3, help="loads per size")
    parser.add_argument("--one", type=positive_int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        load(args.one, args.loads)
        return
    print(f"dataset load (replay_stream.load_replay), {time.strftime('%Y-%m-%d %H:%M UTC')}")
    for n in args.tuples:  # a process, so a JVM, of its own per size
        command = [sys.executable, __file__, "--one", str(n), "--loads", str(args.loads)]
        subprocess.run(command, check=True)


def load(n: int, loads: int) -> None:
    """Generate (or reuse) the dataset of ``n`` tuples, then load it ``loads`` times."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.experiment.params import ExperimentSpec
    from balancebench.experiment.streams import build_stream
    from balancebench.generators import generate, generator_params
    from balancebench.spark.replay_stream import load_replay, release_replay
    from balancebench.spark.session import get_session
    from balancebench.state.paths import datasets_dir

    params = ExperimentSpec.checked({"n_tuples": n, "input_rate_tuples_per_s": n / 6})
    folder, _ = generate(params.dataset, datasets_dir(), generator_params(params.dataset, params))
    replay = build_stream(params.workload.name, folder, params)
    spark = get_session(f"balancebench-load-{n}", master="local[*]")

    def timed_load(label: str, n_batches: int) -> float:
        """Load the stream in ``n_batches``, release it; print and return its rate."""
        started = time.perf_counter()
        df, _ = load_replay(spark, replay, n_batches, params.n_senders)
        seconds = time.perf_counter() - started
        release_replay(df)
        print(
            f"  {replay.n_tuples:>11,} tuples, {label:<23}: {seconds:6.1f} s, "
            f"{replay.n_tuples / seconds / 1e6:5.2f} M tuples/s",
            flush=True,
        )
        return replay.n_tuples / seconds

    rates = [
        timed_load(f"load {i + 1} {'first (cold JVM)' if i == 0 else 'again'}", params.n_batches)
        for i in range(loads)
    ]
    # The same tuples as one batch, once more in the warm JVM: what the batches' own jobs
    # cost (each its row groups, its shuffle, its plan).
    timed_load("as 1 batch (warm)", 1)
    spark.stop()
    warm = max(rates[1:]) if len(rates) > 1 else rates[0]
    met = "met" if rates[0] >= 1e6 else "MISSED"
    print(
        f"  {n:,} tuples: first load {rates[0] / 1e6:.2f} M tuples/s (target >= 1M/s: {met}), "
        f"warm {warm / 1e6:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
