"""Speed of the paper 001-004 models: simulated events per second of wall time.

    uv run python benchmarks/model_speed.py                    # every model, default Params
    uv run python benchmarks/model_speed.py --models overlay --repeats 3

For each model the default dataset is generated (or reused) under ``.local/datasets``,
then every strategy runs the default point ``--repeats`` times in this process (no
Spark: the speed of one Spark task of a sweep). Printed per (model, strategy): events
per run, wall time per run (median), events/s, and the points per core-hour that gives,
so a sweep can be sized (points x repetitions / (cores x points per core-hour)).
"""

from __future__ import annotations

import argparse
import statistics

from balancebench.core.schema import positive_int
from balancebench.experiment.model_sweep import model_defaults, model_points, run_points_local
from balancebench.generators import generate, generator_params
from balancebench.models import MODELS, get_model
from balancebench.state.paths import datasets_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--repeats", type=positive_int, default=3)
    args = parser.parse_args()
    print(f"each model's default point, every strategy, the median of {args.repeats} runs")
    print(
        f"{'model':>12} {'strategy':>20} {'events':>10} {'wall_s':>8} {'events/s':>11} "
        f"{'pts/core-h':>10}"
    )
    for name in args.models:
        model = get_model(name)
        params = {**model_defaults(), "model": name, "strategies": list(model.strategies)}
        params["repetitions"] = args.repeats
        folder, _ = generate(model.dataset, datasets_dir(), generator_params(model.dataset, params))
        # scheduling without Spark: task costs from the model's documented per-word cost.
        points = model_points(params, str(folder))
        results = run_points_local(points)
        for strategy in model.strategies:
            mine = [(r, w) for p, r, w in results if p.strategy == strategy]
            wall = statistics.median(w for _, w in mine)
            events = statistics.median(r.events for r, _ in mine)
            rate = events / wall if wall > 0 else float("nan")
            print(
                f"{name:>12} {strategy:>20} {events:>10,.0f} {wall:>8.3f} {rate:>11,.0f} "
                f"{3600 / wall:>10,.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
