"""The Params of the ``balance_experiment`` DAG, defined once as JSON schema.

The DAG builds its Airflow ``Param`` objects from :data:`EXPERIMENT_PARAMS`, and the
library (CLI, Spark entry point) validates with the same schema, so a bad value gets
the same message everywhere: the field, the value and what is allowed, before any work.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Final

from balancebench.core.cost_model import DEFAULT_BANDWIDTH_MB_PER_S
from balancebench.core.schema import MAX_NODES, NAME_PATTERN, check_values, spec_defaults
from balancebench.core.workloads import (
    WORKLOADS,
    Workload,
    check_dataset,
    check_strategy,
    get_workload,
)
from balancebench.experiment.validation import VALIDATION_DEFAULTS
from balancebench.generators import DATASET_PARAMS, GENERATORS
from balancebench.strategies import (
    STRATEGIES,
    check_scale_out,
    strategy_param_name,
    strategy_settings,
)


def _workloads_in_words() -> str:
    """The workloads by kind, from the registry (a new workload appears on its own)."""
    aggregations = [n for n, w in sorted(WORKLOADS.items()) if not w.is_join]
    joins = [n for n, w in sorted(WORKLOADS.items()) if w.is_join]
    return f"{', '.join(aggregations)} (aggregations); {', '.join(joins)} (joins)."


def _default_datasets_in_words() -> str:
    """Each workload's own dataset, from the registry."""
    return ", ".join(f"{n}: {w.default_dataset}" for n, w in sorted(WORKLOADS.items()))


EXPERIMENT_PARAMS: dict[str, dict[str, Any]] = {
    "workload": {
        "type": "string",
        "enum": sorted(WORKLOADS),
        "default": "topk",
        "title": "Workload",
        "description": _workloads_in_words(),
    },
    "dataset": {
        "type": "string",
        "enum": ["auto", *sorted(GENERATORS)],
        "default": "auto",
        "title": "Dataset",
        "description": "Generator of the input (balancebench datasets lists them); auto = the "
        f"workload's own ({_default_datasets_in_words()}). Its Params are the dataset Params "
        "below.",
    },
    "strategies": {
        "type": "array",
        "items": {"type": "string", "enum": sorted(STRATEGIES)},
        "minItems": 1,
        "uniqueItems": True,
        "default": ["hash", "qmmp", "mnrt"],
        "title": "Strategies",
        "description": "Strategies to compare (key-level planners, per-tuple routers, join "
        "architectures, operator-set joins, Spark-native baselines), one Spark run and MLflow "
        "child each.",
    },
    "n_nodes": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_NODES,
        "default": 8,
        "title": "Parallel nodes",
        "description": "Downstream parallel nodes N_D (one Spark partition each).",
    },
    "n_senders": {
        "type": "integer",
        "minimum": 1,
        "maximum": MAX_NODES,
        "default": 8,
        "title": "Senders",
        "description": "Upstream instances that route the stream to the nodes (tuple i is sent "
        "by instance i mod n_senders); the routing work of a batch is shared among them.",
    },
    "tolerance": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 10,
        "default": 0.05,
        "title": "Tolerance tau_max",
        "description": "Planning strategies bring every node to at most (1 + tau) x mean load.",
    },
    "n_batches": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100_000,
        "default": 6,
        "title": "Micro-batches",
        "description": "The stream is replayed in this many equal event-time windows.",
    },
    "max_estimated_hours": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 168,
        "default": 2.0,
        "title": "Most hours a run may take",
        "description": "A run whose min_rounds are estimated on this machine (strategies x "
        "rounds x batches x tuples, see balancebench.experiment.params.estimate_run_s) above "
        "this is refused before it starts, with the estimate; a round beyond min_rounds starts "
        "only while the rounds so far plus one more fit in it (a sweep's cell groups share it "
        "evenly). Raise it for a long run on purpose.",
    },
    "min_rounds": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 5,
        "title": "Rounds: at least",
        "description": "A round runs every strategy once on the same loaded data, in a rotated "
        "order, inside one Spark application; each strategy is compared with the baseline on "
        "the paired per-round figures (balancebench.core.stats). At least this many rounds run; "
        "2 are needed for an interval, 5 for a verdict worth reading.",
        "section": "Rounds",
    },
    "max_rounds": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1000,
        # make run's default run (3 strategies, 4.5M tuples) takes about 27 s a round
        # here: 6 rounds keep it within 5 minutes (measured 2026-11-28).
        "default": 6,
        "title": "Rounds: at most",
        "description": "After min_rounds, rounds are added one at a time until every "
        "headline figure's verdict is decided (faster, slower, or equivalent within "
        "equivalence_margin), until this many, or until max_estimated_hours would be passed; "
        "a verdict still open then reads 'undecided after n rounds'. Equal to min_rounds: a "
        "fixed number of rounds. Must be at least min_rounds.",
        "section": "Rounds",
    },
    "equivalence_margin": {
        "type": "number",
        "minimum": 0,
        "maximum": 0.5,
        "default": 0.03,
        "title": "Rounds: equivalence margin",
        "description": "Two strategies are 'equivalent within ±m' on a figure when the whole "
        "interval of their ratio lies inside [1 - m, 1 + m] (0.03 = ±3%).",
        "section": "Rounds",
    },
    "baseline": {
        "type": "string",
        "enum": ["auto", *sorted(STRATEGIES)],
        "default": "auto",
        "title": "Rounds: baseline",
        "description": "The strategy every other is compared with: auto = hash when it runs, "
        "else the first strategy (the registry's order). Must be one of the strategies.",
        "section": "Rounds",
    },
    "warmup_batches": {
        "type": "integer",
        "minimum": 0,
        "maximum": 3,
        "default": 2,
        "title": "Warm-up batches",
        "description": "Untimed batches each strategy replays under a fresh instance of itself "
        "before its first measured run in a Spark application, so the JVM's first-use costs "
        "(JIT, code generation) of every code path it takes, its plan's migration included "
        "(2 batches), do not land on measured batches; its later rounds in the same "
        "application find them paid. 0 = none (the first batches then pay them).",
    },
    "state_checkpoint": {
        "type": "string",
        "enum": ["auto", "local", "reliable"],
        "default": "auto",
        "title": "State checkpoints",
        "description": "Where the runs keep their state between micro-batches: 'local' = "
        "localCheckpoint (executors' memory; fast, lost with an executor), 'reliable' = "
        "checkpoint files (survive a lost executor; costs the write), 'auto' = reliable on a "
        "cluster (spark://...), local in local mode (where an executor cannot be lost alone).",
    },
    "window_s": {
        "type": "number",
        "minimum": 0,
        "maximum": 1e9,
        "default": 1.0,
        "title": "Window (s of event time)",
        "description": "0 = full history. Joins: pairs within window_s of each other; "
        "aggregations: the last ceil(window_s / batch interval) batches, sliding by one "
        "batch (paper 000: 180 s).",
    },
    "band_width": {
        "type": "integer",
        "minimum": 0,
        "maximum": 1000,
        "default": 1,
        "title": "Band width",
        "description": "Band joins (band): an R tuple meets the S tuples whose key is within "
        "this of its own (L1.orderkey of L2.orderkey; paper: 1).",
    },
    "join_arrival": {
        "type": "string",
        "enum": ["interleaved", "s_first"],
        "default": "interleaved",
        "title": "Join arrival order",
        "description": "Joins built from TPC-H (eq5, band): 'interleaved' = both sides in one "
        "seeded random order; 's_first' = every S tuple (eq5: the suppliers) arrives before "
        "the R tuples (a dimension table loaded before the facts stream), each side in its "
        "interleaved order, at the same arrival times. With s_first a full-history eq5 "
        "produces the same result rows per batch (each lineitem meets its one supplier), so "
        "node work per batch shows what the history costs the engine.",
    },
    "top_k": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000,
        "default": 10,
        "title": "TOPK size",
        "description": "Keys reported per window by the TOPK workload.",
    },
    "node_capacity_state_tuples": {
        "type": ["integer", "null"],
        "minimum": 1,
        "maximum": 1_000_000_000,
        "default": None,
        "title": "Node capacity (state tuples; scale-out)",
        "description": "Memory-driven scale-out (paper 000 Figs. 4-5; joins only; hash, qmmp, "
        "mnrt, readj, dynamic, bi, bi6): the stored tuples a node holds before nodes join "
        "the running job. The run starts on the strategy's smallest layout (one node; "
        "Dynamic 1; Bi one per side, Bi6 one per subgroup) and grows up to n_nodes. "
        "null = every node from the start.",
    },
    "network_bandwidth_mb_per_s": {
        "type": ["number", "null"],
        "exclusiveMinimum": 0,
        "maximum": 1e6,
        "default": DEFAULT_BANDWIDTH_MB_PER_S,
        "title": "Network bandwidth (MB/s)",
        "description": "Link speed of the cost model (default 125 = 1 GbE; 1250 = 10 GbE): "
        "bytes a sender writes or a node reads from the exchange (tuples, partials, a "
        "migration's rows) / this = the link's time, which overlaps the CPU beside it "
        "(the longer one counts). null = a CPU-only model (no transfer charged).",
    },
    "experiment": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        # A name, not a path: it names folders under .local (no "/", no leading ".").
        "pattern": NAME_PATTERN,
        "default": "balancebench",
        "title": "MLflow experiment",
        "description": "Experiment the parent and child runs are logged to.",
    },
}

# Dataset Params: shared ones (n_tuples, zipf_s, seed, ...) and <generator>_<param>.
EXPERIMENT_PARAMS.update(DATASET_PARAMS)
# The DAGs' defaults ask a question where skew matters, time figures mean something and
# the answer can be decided on this machine within a `make run` (issue 59): at Zipf 1.2
# (paper 000 sweeps 0-1.5) hash's busiest node receives about 3x the mean of the tuples
# (tuple imbalance 2.1 over the batches; 1.1 at 1.0), and the planners' node service is
# about a quarter below hash's, which 5-6 rounds decide against a round-to-round noise of
# 5-15% (three runs on 2026-12-02: capacity and node service of qmmp and mnrt decided by
# round 3, 5 and 7). At 1.0 (the default before) the difference was 10-20% and most
# verdicts stayed undecided after 6 rounds; it stays one CONF away: {"zipf_s": 1.0}. 4.5M
# tuples at 750k/s in 6 batches of 1 s give the slowest node about 60-100 ms of work per
# batch (fixed per-task costs are a few ms).
_DAG_DEFAULTS = {
    "zipf_s": (
        1.2,
        "The DAGs' default is 1.2, where hashing is clearly imbalanced and the default "
        "run's verdicts decide in a few rounds (1.0 leaves most undecided here).",
    ),
    "n_tuples": (4_500_000, "The DAGs' default is 4.5M (750k tuples per default batch)."),
    "input_rate_tuples_per_s": (
        750_000,
        "The DAGs' default is 750k: 6 default batches of 1 s, 750k tuples each.",
    ),
    # A hot set that drifts every batch (the generator's 1 s at the default 1 s batches)
    # makes every plan stale on arrival: the question would be drift, not skew.
    "topic_stream_drift_period_s": (
        3.0,
        "The DAGs' default is 3 s: three default batches per hot set, so a plan made "
        "from one batch meets the same hot set in the next.",
    ),
}
for _name, (_default, _why) in _DAG_DEFAULTS.items():
    EXPERIMENT_PARAMS[_name] = {
        **DATASET_PARAMS[_name],
        "default": _default,
        "description": f"{DATASET_PARAMS[_name]['description']} {_why}",
    }
EXPERIMENT_PARAMS["zipf_fit_tolerance"] = {
    "type": "number",
    "minimum": 0,
    "maximum": 5,
    "default": VALIDATION_DEFAULTS["zipf_fit_tolerance"],
    "title": "Validation: Zipf fit tolerance",
    "description": "The exponent fitted from the data may differ from the requested zipf_s by "
    "this much plus the sampling band (see balancebench.core.profiles).",
}

# Every strategy's own parameters, as Params named <strategy>_<param>.
for _name, _cls in STRATEGIES.items():
    for _param, _spec in _cls.param_schema.items():
        EXPERIMENT_PARAMS[strategy_param_name(_name, _param)] = {
            **_spec,
            "title": f"{_name}: {_param}",
            "description": f"[{_name}] {_spec.get('description', '')}".strip(),
        }


#: Params of the ``generate_dataset`` DAG: the dataset choice, its Params, validation.
DATASET_DAG_PARAMS: dict[str, dict[str, Any]] = {
    "dataset": {
        **EXPERIMENT_PARAMS["dataset"],
        "enum": sorted(GENERATORS),
        "default": "topic_stream",
        "description": "Generator of the dataset (balancebench datasets lists them); its "
        "Params are the dataset Params below.",
    },
    **{name: EXPERIMENT_PARAMS[name] for name in (*DATASET_PARAMS, "zipf_fit_tolerance")},
    "experiment": EXPERIMENT_PARAMS["experiment"],
}


def validate_dataset_params(values: dict[str, Any]) -> dict[str, Any]:
    """Like :func:`validate_params` for the ``generate_dataset`` DAG."""
    return check_values(DATASET_DAG_PARAMS, values, what="dataset params")


def defaults() -> dict[str, Any]:
    return spec_defaults(EXPERIMENT_PARAMS)


def validate_params(values: dict[str, Any], group: bool = True) -> dict[str, Any]:
    """Defaults filled in, every value checked, and the combination too: the dataset can
    feed the workload and every strategy serves its operator, the rounds' bounds are in
    order and (``group``: the Params are a cell group's, not one sweep cell's) the
    baseline is among the strategies. ``ValueError`` names each bad field and what is
    allowed; ``dataset: auto`` becomes the workload's dataset."""
    params = check_values(EXPERIMENT_PARAMS, values, what="experiment params")
    check_rounds(params, params["strategies"] if group else None)
    workload = get_workload(params["workload"])
    if params["dataset"] == "auto":
        params["dataset"] = workload.default_dataset
    check_dataset(workload.name, params["dataset"], GENERATORS[params["dataset"]].kind)
    for name in params["strategies"]:
        check_strategy(workload.name, name, STRATEGIES[name].operators)
        STRATEGIES[name].check_n_nodes(params["n_nodes"], strategy_settings(name, params))
        if params["node_capacity_state_tuples"] is not None:
            check_scale_out(name, workload.operator)
    check_work(params)
    return params


class ExperimentSpec(Mapping[str, Any]):
    """The Params of one experiment, checked once at the door and trusted after it.

    The doors are the places a user's values come in: the CLI, a DAG's generate step, the
    sweep grid's cells and the benchmarks, each calling :meth:`checked`. After the door
    the spec travels as its own JSON form (:meth:`to_json`, over XCom and across the
    spark-submit boundary) and is rebuilt by :meth:`from_json` with no second check: it
    was written by :meth:`to_json` of a checked spec.

    Frozen. The Params the engine, the runners and the strategies read are typed
    attributes; every other Param (a dataset's, a strategy's own) is read by name, as in
    a mapping, and every Param is there, with its default filled in.
    """

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any], *, _trusted: bool = False) -> None:
        if not _trusted:
            raise TypeError("an ExperimentSpec is made by ExperimentSpec.checked or from_json")
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("an ExperimentSpec is frozen; make a new one with checked()")

    @classmethod
    def checked(cls, values: Mapping[str, Any], group: bool = True) -> ExperimentSpec:
        """The door: ``values`` with defaults filled in, every value and their combination
        checked (:func:`validate_params`; ``group=False`` for one sweep cell, whose sweep
        checks its groups); ``ValueError`` names each bad field and what is allowed."""
        return cls(validate_params(dict(values), group), _trusted=True)

    @classmethod
    def from_json(cls, data: str | Mapping[str, Any]) -> ExperimentSpec:
        """A checked spec back from its JSON form (text or the decoded object)."""
        return cls(json.loads(data) if isinstance(data, str) else data, _trusted=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON form: every Param by name (a plain dict, for XCom and spec files)."""
        return dict(self._values)

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ExperimentSpec({self.workload.name}, {list(self.strategies)}, N={self.n_nodes})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExperimentSpec) and self._values == other._values

    @property
    def workload(self) -> Workload:
        return get_workload(self._values["workload"])

    @property
    def dataset(self) -> str:
        """The generator's name (``auto`` was resolved at the door)."""
        return str(self._values["dataset"])

    @property
    def strategies(self) -> tuple[str, ...]:
        return tuple(self._values["strategies"])

    @property
    def n_nodes(self) -> int:
        return int(self._values["n_nodes"])

    @property
    def n_senders(self) -> int:
        return int(self._values["n_senders"])

    @property
    def tolerance(self) -> float:
        return float(self._values["tolerance"])

    @property
    def n_batches(self) -> int:
        return int(self._values["n_batches"])

    @property
    def warmup_batches(self) -> int:
        return int(self._values["warmup_batches"])

    @property
    def state_checkpoint(self) -> str:
        return str(self._values["state_checkpoint"])

    @property
    def window_s(self) -> float:
        return float(self._values["window_s"])

    @property
    def band_width(self) -> int:
        return int(self._values["band_width"])

    @property
    def top_k(self) -> int:
        return int(self._values["top_k"])

    @property
    def node_capacity_state_tuples(self) -> int | None:
        return self._values["node_capacity_state_tuples"]

    @property
    def network_bandwidth_mb_per_s(self) -> float | None:
        value = self._values["network_bandwidth_mb_per_s"]
        return None if value is None else float(value)

    @property
    def experiment(self) -> str:
        return str(self._values["experiment"])


#: The cost model of ``estimate_run_s``, measured on the 2-core machine (2026-11-28,
#: ``make run``: the default run's strategies in rounds in one application): the
#: application's start (spark-submit, session, the dataset's load) ~30 s; a strategy's
#: first run (its warm-up and the JIT's first work) ~10 s more than the others; a run
#: 7-10 s over 6 batches of 750k tuples, about 1 s a batch of the engine's fixed work
#: (jobs, the oracle, statistics) and the rest per tuple.
APP_FIXED_S = 30.0
FIRST_RUN_S = 10.0
BATCH_FIXED_S = 1.0
TUPLE_S = 0.5e-6


def estimate_run_s(params: dict[str, Any], rounds: int | None = None) -> float:
    """Seconds a ``balance_experiment`` run of these Params takes here, roughly (within
    about x2): the application's start, each strategy's first run, and ``rounds`` (default
    ``min_rounds``) rounds of every strategy, a run costing a fixed part per batch plus a
    part per tuple (``n_tuples``; a user file's length is not known before it is read)."""
    tuples = 0 if params["dataset"] == "user_file" else params["n_tuples"]
    run_s = params["n_batches"] * BATCH_FIXED_S + tuples * TUPLE_S
    rounds = params["min_rounds"] if rounds is None else rounds
    return APP_FIXED_S + len(params["strategies"]) * (FIRST_RUN_S + rounds * run_s)


def check_work(params: dict[str, Any]) -> None:
    """Refuse a run whose ``min_rounds`` are estimated above ``max_estimated_hours``,
    naming the estimate and the Params that set it (more rounds only run while they fit)."""
    seconds, limit_h = estimate_run_s(params), params["max_estimated_hours"]
    if seconds / 3600 > limit_h:
        # Both in the unit that shows them apart (0.0 h against 1e-07 h contradicted it).
        estimate, limit = (
            (f"{seconds / 3600:.3g} h", f"{limit_h:g} h")
            if limit_h >= 1
            else (f"{seconds:.3g} s", f"{limit_h * 3600:.3g} s = {limit_h:g} h")
        )
        raise ValueError(
            f"max_estimated_hours: {params['n_batches']:,} micro-batches of "
            f"{params['n_tuples']:,} tuples x {len(params['strategies'])} strategies x "
            f"{params['min_rounds']} rounds would take about {estimate} here; allowed: at "
            f"most max_estimated_hours = {limit}. Lower n_batches, n_tuples, the strategies "
            "or min_rounds, or raise max_estimated_hours (up to 168) for a long run on purpose"
        )


def check_rounds(params: Mapping[str, Any], strategies: list[str] | None) -> None:
    """``min_rounds <= max_rounds``, and the ``baseline`` is one of the group's
    ``strategies`` (or ``auto``; None: not a group's Params, not checked)."""
    if params["min_rounds"] > params["max_rounds"]:
        raise ValueError(
            f"max_rounds: {params['max_rounds']} is below min_rounds {params['min_rounds']}; "
            "allowed: at least min_rounds"
        )
    if strategies is not None:
        from balancebench.experiment.rounds import choose_baseline

        choose_baseline(list(strategies), params["baseline"])


def check_inputs(params: dict[str, Any]) -> None:
    """The dataset's inputs outside the Params (a user file exists and has the named
    columns), checked as its generator will before writing: an entry point that hands the
    Params to a DAG calls this first, so a missing file is refused before the run starts."""
    generator = GENERATORS[params["dataset"]]
    generator.check({k: params[k] for k in generator.params if k in params})


# ---- what applies to what (trigger-form sections, the Params a child run carries) ----

#: Params that guard a run without changing it: not part of what a run carries (nor of
#: a sweep cell's key, so raising one keeps the cell's history comparable).
GUARD_ONLY = ("max_estimated_hours",)

#: Params that only some workloads read.
WORKLOAD_ONLY: dict[str, tuple[str, ...]] = {
    # Said by the workload (its operator's predicate, its top list, its joined sides).
    "band_width": tuple(w.name for w in WORKLOADS.values() if w.operator.uses_band_width),
    "top_k": tuple(w.name for w in WORKLOADS.values() if w.top_k),
    "join_arrival": tuple(w.name for w in WORKLOADS.values() if w.is_join),
}
_STRATEGY_PARAMS = {
    strategy_param_name(s, p): s for s, cls in STRATEGIES.items() for p in cls.param_schema
}
_GENERATOR_OWN = {p: g for g, gen in GENERATORS.items() for p in gen.own_params}


#: What a user sets for a first comparison: the part of balance_experiment's form that
#: opens (the rest sits in collapsed sections), in this order.
FIRST_FIELDS: Final[tuple[str, ...]] = (
    "workload",
    "dataset",
    "strategies",
    "zipf_s",
    "n_tuples",
    "n_keys",
    "n_nodes",
    "n_batches",
    "seed",
    "min_rounds",
    "max_rounds",
    "baseline",
    "equivalence_margin",
    "experiment",
)
#: The same for generate_dataset's form.
FIRST_DATASET_FIELDS: Final[tuple[str, ...]] = ("dataset", "n_tuples", "n_keys", "zipf_s", "seed")


def param_section(name: str) -> str:
    """The trigger-form section of an experiment Param: what it configures."""
    if name in _STRATEGY_PARAMS:
        return f"Strategy: {_STRATEGY_PARAMS[name]}"
    if name in _GENERATOR_OWN:
        return f"Dataset: {_GENERATOR_OWN[name]}"
    if name in DATASET_PARAMS:
        return "Dataset"
    if name == "zipf_fit_tolerance":
        return "Validation"
    return str(EXPERIMENT_PARAMS.get(name, {}).get("section", "Experiment"))


def applicable_params(params: dict[str, Any], strategies: list[str]) -> dict[str, Any]:
    """The Params that apply to runs of ``strategies`` on ``params``'s workload and
    dataset: another dataset's, another strategy's or another workload's Params are left
    out (an MLflow run then shows what set it up, not all ~90 fields)."""
    dataset = params["dataset"]
    reads = set(GENERATORS[dataset].params) if dataset in GENERATORS else set(DATASET_PARAMS)
    out = {}
    for name, value in params.items():
        if name in GUARD_ONLY:
            continue
        if name in _STRATEGY_PARAMS and _STRATEGY_PARAMS[name] not in strategies:
            continue
        if name in DATASET_PARAMS and name not in reads:
            continue
        if name in WORKLOAD_ONLY and params["workload"] not in WORKLOAD_ONLY[name]:
            continue
        out[name] = value
    if "strategies" in out:
        out["strategies"] = [s for s in out["strategies"] if s in strategies]
    return out
