"""Model sweeps: the grid of points, one Spark task per point, one MLflow child per
(strategy, parameter point).

The ``model_experiment`` DAG (and ``balancebench run-model``) take these Params:

- ``model``: which paper's model (``balancebench models`` lists them);
- ``strategies``: the model's strategies to compare (empty = all of them);
- ``grid``: the varied parameters, ``{"<model>_<param>": [values, ...]}`` (empty = the
  single default point); every value is checked against the param's spec;
- ``repetitions``: independent repetitions per point; repetition ``r`` of every strategy
  uses the same seed (common random numbers), derived from ``seed`` and ``r``;
- the model's own Params ``<model>_<param>`` and the Params of its dataset.

:func:`model_points` expands them into :class:`ModelPoint` s; :func:`run_points_on_spark`
runs each as one Spark task (``parallelize(points, len(points)).map(run_point)``), so on
a cluster the points spread over executors; :func:`log_sweep` writes one MLflow child
per (strategy, parameter point): the sweep's Params that apply to its model
(:func:`sweep_params`), the point's values, the metrics averaged over repetitions (with
``<metric>_rep_std`` and the Student-t 95% interval), repetition 0's series with ``step`` =
sample index (``series_time_s`` gives the simulated time of each step), and every
repetition's raw result in one JSON file under the artifact folder ``results/``.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any, Final

import numpy as np

from balancebench.core.metric_definitions import METRIC_DEFINITIONS
from balancebench.core.schema import NAME_PATTERN, check_grid_size, check_values, spec_defaults
from balancebench.core.stats import repetition_stats
from balancebench.experiment.params import EXPERIMENT_PARAMS
from balancebench.generators import DATASET_PARAMS
from balancebench.models import MODELS, get_model, model_strategies
from balancebench.models.contract import ModelPoint, ModelResult
from balancebench.state import reaper, tracking

#: Definitions of what the sweep itself adds to every model child run.
SWEEP_METRIC_DEFINITIONS: dict[str, str] = {
    "model_wall_s": "Wall time of Model.run summed over the point's repetitions (seconds).",
    "model_events": "Simulated events the model processed, summed over repetitions.",
    "model_events_per_s": "model_events / model_wall_s: the model's speed, to size sweeps.",
    "series_time_s": "[series] simulated time (s) of each series step (step = sample index).",
    "repetitions": "Repetitions of the (strategy, point) the other figures summarise (count).",
    "<metric>_rep_std": "Standard deviation (ddof 1) of <metric> over the repetitions.",
    "<metric>_ci95_lo": "Student-t 95% interval of <metric>'s mean, lower end.",
    "<metric>_ci95_hi": "Student-t 95% interval of <metric>'s mean, upper end.",
}


def model_param_name(model: str, param: str) -> str:
    return f"{model}_{param}"


def _model_params() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in MODELS:
        model = get_model(name)
        for param, spec in model.param_schema.items():
            out[model_param_name(name, param)] = {
                **spec,
                "title": f"{name}: {spec.get('title', param)}",
                "description": f"[{name}] {spec.get('description', '')}".strip(),
            }
    return out


MODEL_EXPERIMENT_PARAMS: dict[str, dict[str, Any]] = {
    "model": {
        "type": "string",
        "enum": sorted(MODELS),
        "default": "scheduling",
        "title": "Model",
        "description": "scheduling (paper 002), elastic (paper 001), backpressure (paper 003), "
        "overlay (paper 004).",
    },
    "strategies": {
        "type": "array",
        "items": {"type": "string", "enum": sorted(model_strategies())},
        "uniqueItems": True,
        "default": [],
        "title": "Strategies",
        "description": "The model's strategies to compare; empty = all of the model's.",
    },
    "grid": {
        "type": "object",
        "additionalProperties": {"type": "array", "minItems": 1, "maxItems": 1000},
        "default": {},
        "title": "Grid",
        "description": 'Varied model Params, e.g. {"overlay_target_load": [0.2, 0.4, 0.8]}; '
        "every combination is a point; empty = the single default point.",
    },
    "repetitions": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000,
        "default": 2,
        "title": "Repetitions",
        "description": "Independent repetitions per point (seeds derived from seed).",
    },
    "max_runs": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000_000,
        "default": 100_000,
        "title": "Largest sweep (runs)",
        "description": "A sweep of more (strategy x grid point x repetition) runs than this "
        "is refused before any work.",
    },
    "experiment": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "pattern": NAME_PATTERN,
        "default": "balancebench-models",
        "title": "MLflow experiment",
        "description": "Experiment the parent and child runs are logged to.",
    },
    # The same spec as balance_experiment's (one definition).
    "zipf_fit_tolerance": EXPERIMENT_PARAMS["zipf_fit_tolerance"],
    **DATASET_PARAMS,
    **_model_params(),
}


#: What a user sets first: the part of model_experiment's form that opens.
FIRST_MODEL_FIELDS: Final[tuple[str, ...]] = (
    "model",
    "strategies",
    "grid",
    "repetitions",
    "seed",
    "experiment",
)


def model_param_section(name: str) -> str:
    """The trigger-form section of a ``model_experiment`` Param."""
    for model in MODELS:
        if name.startswith(f"{model}_") and name in MODEL_EXPERIMENT_PARAMS:
            return f"Model: {model}"
    if name in DATASET_PARAMS or name == "zipf_fit_tolerance":
        return "Dataset"
    return "Experiment"


def model_defaults() -> dict[str, Any]:
    return spec_defaults(MODEL_EXPERIMENT_PARAMS)


def validate_model_params(values: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in, every value checked (also the grid's values and that every
    strategy belongs to the model); ``ValueError`` names each bad field and what is allowed."""
    params = check_values(MODEL_EXPERIMENT_PARAMS, values, what="model experiment params")
    model = get_model(params["model"])
    if not params["strategies"]:
        params["strategies"] = list(model.strategies)
    problems = []
    for name in params["strategies"]:
        if name not in model.strategies:
            problems.append(
                f"strategies: {name!r} is not a {model.name} strategy; allowed values: "
                f"{list(model.strategies)}"
            )
    own = {model_param_name(model.name, p) for p in model.param_schema}
    for key, values_ in params["grid"].items():
        if key not in own:
            problems.append(f"grid: {key!r} is not a {model.name} Param; allowed: {sorted(own)}")
            continue
        for value in values_:
            try:
                check_values({key: MODEL_EXPERIMENT_PARAMS[key]}, {key: value}, what="grid")
            except ValueError as exc:
                problems.append(f"grid.{key}: {exc}")
    if not problems:
        problems = model.check_sweep(params)
    if problems:
        raise ValueError("model experiment params:\n  " + "\n  ".join(problems))
    sizes = {f"{key} values": len(v) for key, v in sorted(params["grid"].items())}
    sizes.update(strategies=len(params["strategies"]), repetitions=params["repetitions"])
    check_grid_size(sizes, params["max_runs"], "max_runs")
    # Each grid point must pass the model's own cross-field checks too.
    for overrides in grid_points(params["grid"]):
        model.check_params({**point_params(params, model.name), **_strip(model.name, overrides)})
    return params


def sweep_params(params: dict[str, Any]) -> dict[str, Any]:
    """The Params that matter to this sweep: the common ones, the model's own and its
    dataset's (other models' Params are left out of the MLflow runs)."""
    from balancebench.generators import get_generator

    model = get_model(params["model"])
    dataset = set(get_generator(model.dataset).params)
    own = f"{model.name}_"
    others = tuple(f"{m}_" for m in MODELS if m != model.name)
    return {
        k: v
        for k, v in params.items()
        if k.startswith(own)
        or k in dataset
        or (k not in DATASET_PARAMS and not k.startswith(others))
    }


def _strip(model: str, overrides: dict[str, Any]) -> dict[str, Any]:
    prefix = f"{model}_"
    return {k[len(prefix) :]: v for k, v in overrides.items()}


def point_params(params: dict[str, Any], model: str) -> dict[str, Any]:
    """The model's own params (unprefixed) from the sweep Params."""
    prefix = f"{model}_"
    schema = get_model(model).param_schema
    return {p: params[prefix + p] for p in schema if prefix + p in params}


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in a stable order."""
    keys = sorted(grid)
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(grid[k] for k in keys))
    ]


def repetition_seed(seed: int, repetition: int) -> int:
    return int(np.random.SeedSequence([int(seed), int(repetition)]).generate_state(1)[0])


def model_points(params: dict[str, Any], dataset_dir: str | None) -> list[ModelPoint]:
    """Strategy x grid point x repetition, with the model's params filled in."""
    model = get_model(params["model"])
    base = point_params(params, model.name)
    points = []
    for overrides in grid_points(params["grid"]):
        values = model.check_params({**base, **_strip(model.name, overrides)})
        for strategy in params["strategies"]:
            for rep in range(params["repetitions"]):
                points.append(
                    ModelPoint(
                        model=model.name,
                        strategy=strategy,
                        params=values,
                        repetition=rep,
                        seed=repetition_seed(params["seed"], rep),
                        dataset_dir=dataset_dir,
                    )
                )
    return points


def run_point(point_json: str) -> str:
    """Run one point (an executor's work): the point, its result and wall time, as JSON."""
    point = ModelPoint.from_json(point_json)
    started = time.perf_counter()
    result = get_model(point.model).run(point)
    wall_s = time.perf_counter() - started
    return json.dumps(
        {"point": json.loads(point_json), "result": result.to_dict(), "wall_s": wall_s}
    )


def _decode(text: str) -> tuple[ModelPoint, ModelResult, float]:
    data = json.loads(text)
    return ModelPoint(**data["point"]), ModelResult.from_dict(data["result"]), data["wall_s"]


def run_points_local(points: list[ModelPoint]) -> list[tuple[ModelPoint, ModelResult, float]]:
    """The same as :func:`run_points_on_spark`, in this process (tests, benchmarks)."""
    return [_decode(run_point(p.to_json())) for p in points]


def run_points_on_spark(
    spark: Any, points: list[ModelPoint]
) -> list[tuple[ModelPoint, ModelResult, float]]:
    """One Spark task per point; results come back in the points' order."""
    payload = [p.to_json() for p in points]
    rdd = spark.sparkContext.parallelize(payload, max(1, len(payload)))
    return [_decode(text) for text in rdd.map(run_point).collect()]


def point_key(point: ModelPoint, varied: list[str]) -> tuple:
    return (point.strategy, *(json.dumps(point.params[v]) for v in varied))


#: Columns a (strategy, point) summary adds to each metric's mean over the repetitions.
REPETITION_SUFFIXES: tuple[str, ...] = ("_rep_std", "_ci95_lo", "_ci95_hi")


def summarize_point(runs: list[tuple[ModelPoint, ModelResult, float]]) -> dict[str, float]:
    """Metrics of one (strategy, point) over its repetitions: the mean, and with more than
    one repetition ``_rep_std`` and the Student-t 95% interval of the mean (``_ci95_lo``,
    ``_ci95_hi``: :func:`balancebench.core.stats.repetition_stats`); ``repetitions`` counts
    them."""
    names = sorted(set().union(*(r.metrics for _, r, _ in runs)))
    out: dict[str, float] = {"repetitions": float(len(runs))}
    for name in names:
        values = [r.metrics[name] for _, r, _ in runs if name in r.metrics]
        stats = repetition_stats(values)
        out[name] = stats["mean"]
        if len(runs) > 1:
            out[f"{name}_rep_std"] = stats["std"]
            out[f"{name}_ci95_lo"], out[f"{name}_ci95_hi"] = stats["ci95_lo"], stats["ci95_hi"]
    wall = float(sum(w for _, _, w in runs))
    events = float(sum(r.events for _, r, _ in runs))
    out["model_wall_s"] = wall
    out["model_events"] = events
    out["model_events_per_s"] = events / wall if wall > 0 else 0.0
    return out


def repetition_rows(
    params: dict[str, Any], results: list[tuple[ModelPoint, ModelResult, float]]
) -> list[dict[str, Any]]:
    """One row per (strategy, point, repetition) with its scalar metrics: the paired
    values (repetition ``r`` of every strategy shares its seed) that verdicts between
    strategies are computed from (``balancebench.core.stats.verdict``)."""
    model = get_model(params["model"])
    varied = [k[len(model.name) + 1 :] for k in sorted(params["grid"])]
    rows = []
    for point, result, _ in sorted(results, key=lambda x: (x[0].strategy, x[0].repetition)):
        rows.append(
            {
                "strategy": point.strategy,
                **{v: point.params[v] for v in varied},
                "repetition": point.repetition,
                **result.metrics,
            }
        )
    return rows


def metric_definitions(model: str) -> dict[str, str]:
    return {**METRIC_DEFINITIONS, **SWEEP_METRIC_DEFINITIONS, **get_model(model).metric_definitions}


def log_sweep(
    params: dict[str, Any],
    results: list[tuple[ModelPoint, ModelResult, float]],
    parent_run_id: str | None,
    run_params: dict[str, str],
    out_dir: Path,
) -> list[dict[str, Any]]:
    """One MLflow child per (strategy, parameter point); returns the summary rows."""
    mlflow = tracking.store()
    client = mlflow.MlflowClient()
    model = get_model(params["model"])
    varied = [k[len(model.name) + 1 :] for k in sorted(params["grid"])]
    experiment_id = (
        client.get_run(parent_run_id).info.experiment_id
        if parent_run_id
        else tracking.ensure_experiment(params["experiment"])
    )
    groups: dict[tuple, list[tuple[ModelPoint, ModelResult, float]]] = {}
    for item in results:
        groups.setdefault(point_key(item[0], varied), []).append(item)
    definitions = metric_definitions(model.name)
    rows = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for key, runs in groups.items():
        first_point, first_result, _ = min(runs, key=lambda r: r[0].repetition)
        summary = summarize_point(runs)
        label = first_point.label(tuple(varied))
        tags = {
            tracking.ROLE_TAG: "child",
            "model": model.name,
            "strategy_reference": model.reference,
        }
        if parent_run_id:
            tags["mlflow.parentRunId"] = parent_run_id
        run = client.create_run(experiment_id, run_name=label, tags={**tags, **reaper.owner_tags()})
        rid = run.info.run_id
        child_params = {
            **run_params,
            "strategy": first_point.strategy,
            "model": model.name,
            **{f"point.{v}": json.dumps(first_point.params[v]) for v in varied},
        }
        entities = mlflow.entities
        now = int(time.time() * 1000)
        metrics = [entities.Metric(k, v, now, 0) for k, v in summary.items()]
        for name, values in first_result.series.items():
            metrics += [entities.Metric(name, float(x), now, i) for i, x in enumerate(values)]
        metrics += [
            entities.Metric("series_time_s", float(t), now, i)
            for i, t in enumerate(first_result.time_s)
        ]
        param_list = [entities.Param(k, v[:6000]) for k, v in child_params.items()]
        for start in range(0, len(param_list), 100):
            client.log_batch(rid, params=param_list[start : start + 100])
        for start in range(0, len(metrics), 1000):
            client.log_batch(rid, metrics=metrics[start : start + 1000])
        raw = out_dir / f"{'_'.join(str(k) for k in key).replace('/', '-')}.json"
        raw.write_text(
            json.dumps(
                [
                    {"point": p.__dict__, "result": r.to_dict(), "wall_s": w}
                    for p, r, w in sorted(runs, key=lambda x: x[0].repetition)
                ],
                default=str,
            )
        )
        client.log_artifact(rid, str(raw), "results")
        client.log_dict(rid, definitions, "metric_definitions.json")
        client.set_terminated(rid, "FINISHED")
        rows.append(
            {
                "run_id": rid,
                "strategy": first_point.strategy,
                **{v: first_point.params[v] for v in varied},
                **summary,
            }
        )
    return rows


def sweep_figure(
    model_name: str,
    results: list[tuple[ModelPoint, ModelResult, float]],
    path: Path,
    caption: str | None = None,
) -> Path:
    """The model's paper-style figure of these results, saved as PNG, with ``caption``
    (its repetitions and wall time) under its title when given."""
    fig = get_model(model_name).figure([(p, r) for p, r, _ in results])
    if caption:
        fig.suptitle(caption, fontsize=8, y=1.02)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path
