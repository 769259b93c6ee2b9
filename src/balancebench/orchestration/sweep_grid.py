"""The nightly sweep: its Params, its cells and its cell groups.

A sweep is a grid of workloads x strategies x ``zipf_s`` x ``n_nodes``. A cell group
(:attr:`Cell.group`: the cells that differ only in the strategy) shares one dataset and
runs in paired, rotated rounds like ``balance_experiment``'s strategies
(``balancebench.experiment.rounds``: at least ``min_rounds``, more until its verdicts are decided),
each round of a cell a run of the same :class:`~balancebench.experiment.run_spec.RunSpec`; the cell
groups of one workload and node count share one Spark application
(:attr:`Cell.application`, ``experiment.run_groups``), which loads their datasets in
turn. A cell's rounds share the seeded dataset, so their spread is the timing noise of
the machine and of the run's position; every timed figure is reported as its mean over
the rounds with a Student-t 95% interval, and every strategy against the group's
baseline as a verdict on the paired rounds (``balancebench.core.stats``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import product
from typing import Any, Final

from balancebench.core.schema import check_grid_size, check_values
from balancebench.core.workloads import get_workload
from balancebench.experiment.paper000_figures import FIGURES, NO_FIGURE, get_figure, with_figure
from balancebench.experiment.params import EXPERIMENT_PARAMS, ExperimentSpec, param_section
from balancebench.experiment.regression import TIMED
from balancebench.experiment.rounds import choose_baseline
from balancebench.generators import DATASET_PARAMS
from balancebench.strategies import STRATEGIES

#: Grid axes taken from the grid, not from the experiment Params.
GRID_AXES: Final[tuple[str, ...]] = ("workloads", "strategies", "zipf_s", "n_nodes")

_FROM_GRID = {"workload", "strategies", "zipf_s", "n_nodes"}
_VALUE_RULES = ("type", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _value_rules(spec: dict[str, Any]) -> dict[str, Any]:
    """What one value of a Param must be (its type, enum and bounds), from its own spec."""
    return {rule: spec[rule] for rule in _VALUE_RULES if rule in spec}


#: One spec per grid axis: the items of the JSON ``grid``'s axis and of its own Param,
#: taken from the experiment Param the axis sets (one rule, one place: the Param's).
_AXIS_ITEMS: dict[str, dict[str, Any]] = {
    "workloads": _value_rules(EXPERIMENT_PARAMS["workload"]),
    "strategies": _value_rules(EXPERIMENT_PARAMS["strategies"]["items"]),
    "zipf_s": _value_rules(EXPERIMENT_PARAMS["zipf_s"]),
    "n_nodes": _value_rules(EXPERIMENT_PARAMS["n_nodes"]),
    "tolerance": _value_rules(EXPERIMENT_PARAMS["tolerance"]),
}
DEFAULT_GRID: Final[dict[str, list[Any]]] = {
    "workloads": ["topk"],
    "strategies": ["hash", "qmmp", "mnrt"],
    "zipf_s": [0.6, 1.0, 1.4],
    "n_nodes": [8],
}
_AXIS_TITLES = {
    "workloads": "Grid: workloads",
    "strategies": "Grid: strategies",
    "zipf_s": "Grid: zipf_s values",
    "n_nodes": "Grid: N (nodes)",
}


def _axis(axis: str) -> dict[str, Any]:
    return {"type": "array", "items": _AXIS_ITEMS[axis], "minItems": 1, "uniqueItems": True}


#: The numeric axes' Params are typed as text, numbers separated by commas: Airflow's form
#: shows a list of numbers in a code editor that closes brackets as you type.
_NUMBER_LISTS: dict[str, tuple[type, str, str]] = {
    # Anchored: Airflow's form and REST API check a pattern with re.search.
    "zipf_s": (float, "numbers", r"^\s*(\d+\.?\d*|\.\d+)(\s*,\s*(\d+\.?\d*|\.\d+))*\s*$"),
    "n_nodes": (int, "whole numbers", r"^\s*\d+(\s*,\s*\d+)*\s*$"),
}


def _axis_param(axis: str) -> dict[str, Any]:
    """``grid_<axis>``: one axis as its own Param, so the form shows a multi-select (a
    list of names, ``dags/dag_support/params.py``) or a line of numbers, not one JSON
    object its editor reformats while you type."""
    if axis in _NUMBER_LISTS:
        example = ", ".join(str(v) for v in DEFAULT_GRID[axis])
        spec = {
            "type": "string",
            "pattern": _NUMBER_LISTS[axis][2],
            "x-allowed": f"{_NUMBER_LISTS[axis][1]} separated by commas",
            "maxLength": 1000,
            "default": example,
        }
        how = f"{_NUMBER_LISTS[axis][1]} separated by commas, e.g. {example}; "
    else:
        spec = {**_axis(axis), "default": list(DEFAULT_GRID[axis])}
        how = ""
    return {
        **spec,
        "title": _AXIS_TITLES[axis],
        "description": f"The sweep's {axis} axis: {how}ignored when the JSON grid is given.",
        "section": "Sweep",
    }


def _axis_values(params: dict[str, Any], axis: str) -> list[Any]:
    """The values of ``grid_<axis>``: a numeric axis's text split into checked numbers."""
    value = params[f"grid_{axis}"]
    if axis not in _NUMBER_LISTS:
        return value
    name = f"grid_{axis}"
    parsed = [_NUMBER_LISTS[axis][0](v) for v in value.split(",")]
    return check_values({name: _axis(axis)}, {name: parsed}, what="sweep params")[name]


SWEEP_PARAMS: dict[str, dict[str, Any]] = {
    **{f"grid_{axis}": _axis_param(axis) for axis in GRID_AXES},
    "grid": {
        "type": ["object", "null"],
        "properties": {axis: _axis(axis) for axis in (*GRID_AXES, "tolerance")},
        # Every axis or none ({}: Airflow's form shows null as {}), checked in _one_grid.
        "additionalProperties": False,
        "default": None,
        "title": "Grid as JSON (scripts)",
        "description": "null or {} (the form shows null as {}): the grid is the grid_* "
        "Params above. Otherwise the whole grid "
        'as one JSON object, e.g. {"workloads": ["topk"], "strategies": ["hash"], '
        '"zipf_s": [1.0], "n_nodes": [8]}, optionally with a "tolerance" axis '
        "(without it every cell uses the Param tolerance); then the grid_* Params must keep "
        "their defaults. A strategy that cannot serve a workload's operator skips that "
        "workload's cells.",
        "section": "Sweep",
    },
    "figure": {
        "type": "string",
        "enum": [NO_FIGURE, *FIGURES],
        "default": NO_FIGURE,
        "title": "Paper 000 figure",
        "description": "none: the grid of the 'Grid:' fields (workloads, strategies, "
        "zipf_s values, N). Otherwise one of paper 000's experiments "
        "(3a, 3b: execution time; 4-5: nodes used and balance-adjustment time under "
        "scale-out; 6a, 6b: tuples per node; 7: plan time against the tolerance; 8: TOPK "
        "throughput and latency): "
        "the figure fixes the grid and its Params (balancebench.experiment.paper000_figures "
        "says which and how they are scaled) and the sweep draws the paper-style figure.",
        "section": "Sweep",
    },
    "max_runs": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100_000,
        "default": 500,
        "title": "Largest sweep (runs)",
        "description": "A sweep that could run more (workload x strategy x zipf_s x n_nodes "
        "x max_rounds) runs than this is refused before any work.",
        "section": "Sweep",
    },
    "regression_metrics": {
        "type": "array",
        "items": {"type": "string", "enum": list(TIMED)},
        "minItems": 1,
        "uniqueItems": True,
        "default": list(TIMED),
        "title": "Regression check: figures",
        "description": "The timed figures compared with each cell's history (each with its "
        "good direction); deterministic figures are always checked exactly.",
        "section": "Sweep",
    },
    **{k: v for k, v in EXPERIMENT_PARAMS.items() if k not in _FROM_GRID},
}
# A nightly run is smaller than `make run`'s default: 27 runs must fit in a night.
SWEEP_PARAMS["n_tuples"] = {
    **SWEEP_PARAMS["n_tuples"],
    "default": 1_000_000,
    "description": f"{SWEEP_PARAMS['n_tuples']['description']} The sweep's default is 1M.",
}
# ... at the generators' rate, as before `make run`'s default rose to 750k tuples/s: the
# nightly history stays comparable (same streams, same batches).
SWEEP_PARAMS["input_rate_tuples_per_s"] = {
    **SWEEP_PARAMS["input_rate_tuples_per_s"],
    "default": 500_000,
    "description": f"{DATASET_PARAMS['input_rate_tuples_per_s']['description']} "
    "The sweep's default is 500k.",
}
SWEEP_PARAMS["experiment"] = {**SWEEP_PARAMS["experiment"], "default": "balancebench-nightly"}
# A night has time for more rounds than `make run`'s five minutes: the default grid's
# 3 cell groups of 1M tuples at 10 rounds stay within 10 minutes.
SWEEP_PARAMS["max_rounds"] = {
    **SWEEP_PARAMS["max_rounds"],
    "default": 10,
    "description": f"{SWEEP_PARAMS['max_rounds']['description']} The sweep's default is 10.",
}


#: What a user sets for a first sweep: the part of nightly_sweep's form that opens.
FIRST_SWEEP_FIELDS: Final[tuple[str, ...]] = (
    "grid_workloads",
    "grid_strategies",
    "grid_zipf_s",
    "grid_n_nodes",
    "n_tuples",
    "seed",
    "min_rounds",
    "max_rounds",
    "regression_metrics",
    "experiment",
)


def sweep_param_section(name: str) -> str:
    return str(SWEEP_PARAMS[name].get("section") or param_section(name))


@dataclass(frozen=True)
class Cell:
    workload: str
    strategy: str
    zipf_s: float
    n_nodes: int
    #: Set when the grid varies the tolerance (else the Param applies).
    tolerance: float | None = None

    @property
    def label(self) -> str:
        """What varies, as MLflow run names show it."""
        label = f"{self.workload} · {self.strategy} · s={self.zipf_s:g} · N={self.n_nodes}"
        return label if self.tolerance is None else f"{label} · tol={self.tolerance:g}"

    @property
    def group(self) -> str:
        """Its cell group: the cells that differ only in the strategy, whose runs share one
        dataset and one Spark application, in paired rounds (each strategy's verdict
        against the group's baseline)."""
        label = f"{self.workload} · s={self.zipf_s:g} · N={self.n_nodes}"
        return label if self.tolerance is None else f"{label} · tol={self.tolerance:g}"

    @property
    def application(self) -> str:
        """Its Spark application: the cell groups of one workload and node count, whose
        datasets it loads in turn (one JVM start and one warm-up per strategy for them)."""
        return f"{self.workload} · N={self.n_nodes}"


def application_label(grid_cells: Iterable[Cell]) -> str:
    """An application's cells in words: workload, N, and the skews and tolerances it
    holds (``topk · N=8 · s=0.6, 1, 1.4``)."""
    found = list(grid_cells)
    skews = ", ".join(f"{z:g}" for z in dict.fromkeys(c.zipf_s for c in found))
    label = f"{found[0].workload} · N={found[0].n_nodes} · s={skews}"
    tolerances = [c.tolerance for c in found if c.tolerance is not None]
    if tolerances:
        label += " · tol=" + ", ".join(f"{t:g}" for t in dict.fromkeys(tolerances))
    return label


def cells(grid: dict[str, list[Any]]) -> list[Cell]:
    """The grid's cells, strategies in registry order; a (workload, strategy) pair whose
    operator the strategy cannot serve is left out."""
    order = [s for s in STRATEGIES if s in grid["strategies"]]
    out = []
    tolerances = grid.get("tolerance") or [None]
    axes = product(grid["workloads"], order, grid["zipf_s"], grid["n_nodes"], tolerances)
    for w, s, z, n, tol in axes:
        if get_workload(w).operator in STRATEGIES[s].operators:
            out.append(Cell(w, s, float(z), int(n), None if tol is None else float(tol)))
    return out


def cell_groups(grid_cells: Iterable[Cell]) -> dict[str, list[Cell]]:
    """The cells by cell group (:attr:`Cell.group`), in grid order."""
    out: dict[str, list[Cell]] = {}
    for cell in grid_cells:
        out.setdefault(cell.group, []).append(cell)
    return out


def cell_spec(params: dict[str, Any], cell: Cell) -> ExperimentSpec:
    """The experiment Params of one cell, checked at the door like balance_experiment's
    (:func:`checked_sweep` checks every cell's once, and its groups' baselines)."""
    base = {k: v for k, v in params.items() if k in EXPERIMENT_PARAMS and k != "dataset"}
    return ExperimentSpec.checked(
        {
            **base,
            "workload": cell.workload,
            "strategies": [cell.strategy],
            "zipf_s": cell.zipf_s,
            "n_nodes": cell.n_nodes,
            **({} if cell.tolerance is None else {"tolerance": cell.tolerance}),
        },
        group=False,
    )


def validate_sweep_params(values: dict[str, Any]) -> dict[str, Any]:
    """The sweep's Params checked (:func:`checked_sweep`), without its cells' specs."""
    return checked_sweep(values)[0]


def checked_sweep(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, ExperimentSpec]]:
    """The door of a sweep: defaults filled in, every value checked; every grid axis must
    be served (a strategy with no workload it can serve is named), and the sweep has a
    size limit. Returns the Params and every cell's checked experiment spec, by label
    (a strategy that cannot take its shape on a grid's N, bi6 below 12, is named)."""
    figure = values.get("figure", NO_FIGURE)
    if figure not in (None, NO_FIGURE):
        get_figure(figure)  # an unknown figure is named before its preset is looked up
    params = check_values(SWEEP_PARAMS, with_figure(values), what="sweep params")
    params["grid"] = grid = _one_grid(params)
    sizes = {axis: len(grid[axis]) for axis in (*GRID_AXES, "tolerance") if axis in grid}
    check_grid_size({**sizes, "max_rounds": params["max_rounds"]}, params["max_runs"], "max_runs")
    found = cells(grid)
    served = {c.strategy for c in found}
    idle = [s for s in grid["strategies"] if s not in served]
    if idle:
        raise ValueError(
            f"grid.strategies: {idle} serve none of grid.workloads {grid['workloads']}; "
            "remove them or add a workload they serve (balancebench strategies lists them)"
        )
    unserved = sorted({w for w in grid["workloads"]} - {c.workload for c in found})
    if unserved:
        raise ValueError(f"grid.workloads: no strategy of the grid serves {unserved}")
    for group, members in cell_groups(found).items():
        try:
            choose_baseline([c.strategy for c in members], params["baseline"])
        except ValueError as exc:
            raise ValueError(f"{exc} (cell group {group})") from exc
    return params, {c.label: cell_spec(params, c) for c in found}


def _one_grid(params: dict[str, Any]) -> dict[str, list[Any]]:
    """The sweep's grid: the JSON ``grid`` (a script's, or a figure's) or else the
    ``grid_*`` axis Params. Both at once is refused, naming the axes set."""
    axes = {axis: _axis_values(params, axis) for axis in GRID_AXES}
    if not params["grid"] or params["grid"] == axes:  # (checked Params checked again)
        return axes
    missing = [axis for axis in GRID_AXES if axis not in params["grid"]]
    if missing:
        raise ValueError(
            f"grid: {missing} missing; allowed: a grid with every axis of {list(GRID_AXES)} "
            "(and optionally tolerance), or null / {} for the grid_* Params"
        )
    changed = [f"grid_{axis}" for axis in GRID_AXES if axes[axis] != DEFAULT_GRID[axis]]
    if changed:
        source = "the figure" if params["figure"] != NO_FIGURE else "the JSON grid"
        raise ValueError(
            f"grid: {source} sets the whole grid, and {changed} are set too; allowed: "
            "one of them (leave grid null to use the grid_* Params)"
        )
    return params["grid"]
