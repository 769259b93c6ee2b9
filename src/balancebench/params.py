"""The Params of the ``balance_experiment`` DAG, defined once as JSON schema.

The DAG builds its Airflow ``Param`` objects from :data:`EXPERIMENT_PARAMS`, and the
library (CLI, Spark entry point) validates with the same schema, so a bad value gets
the same message everywhere: the field, the value and what is allowed, before any work.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from balancebench.strategies import STRATEGIES, strategy_param_name

EXPERIMENT_PARAMS: dict[str, dict[str, Any]] = {
    "strategies": {
        "type": "array",
        "items": {"type": "string", "enum": sorted(STRATEGIES)},
        "minItems": 1,
        "uniqueItems": True,
        "default": ["hash", "qmmp", "mnrt"],
        "title": "Strategies",
        "description": "Key-level strategies to compare, one Spark run and MLflow child each.",
    },
    "zipf_s": {
        "type": "number",
        "minimum": 0,
        "maximum": 5,
        "default": 1.0,
        "title": "Zipf exponent",
        "description": "Key popularity p(rank) ~ rank^-s; 0 is uniform.",
    },
    "n_keys": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100_000_000,
        "default": 10_000,
        "title": "Distinct keys",
        "description": "Size of the key domain the Zipf ranks map onto.",
    },
    "n_tuples": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2_000_000_000,
        "default": 2_000_000,
        "title": "Tuples",
        "description": "Length of the generated stream.",
    },
    "n_nodes": {
        "type": "integer",
        "minimum": 1,
        "maximum": 1024,
        "default": 8,
        "title": "Parallel nodes",
        "description": "Downstream parallel nodes N_D (one Spark partition each).",
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
        "default": 10,
        "title": "Micro-batches",
        "description": "The stream is replayed in this many equal event-time windows.",
    },
    "input_rate_tuples_per_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "default": 500_000,
        "title": "Input rate (tuples/s)",
        "description": "Mean Poisson arrival rate of the generated stream (sets event time).",
    },
    "top_k": {
        "type": "integer",
        "minimum": 1,
        "maximum": 10_000,
        "default": 10,
        "title": "TOPK size",
        "description": "Keys reported per window by the TOPK workload.",
    },
    "seed": {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**63 - 1,
        "default": 42,
        "title": "Seed",
        "description": "Seeds the generator: same seed and params give the same dataset digest.",
    },
    "experiment": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "default": "balancebench",
        "title": "MLflow experiment",
        "description": "Experiment the parent and child runs are logged to.",
    },
}

# Every strategy's own parameters, as Params named <strategy>_<param>.
for _name, _cls in STRATEGIES.items():
    for _param, _spec in _cls.param_schema.items():
        EXPERIMENT_PARAMS[strategy_param_name(_name, _param)] = {
            **_spec,
            "title": f"{_name}: {_param}",
            "description": f"[{_name}] {_spec.get('description', '')}".strip(),
        }

_SCHEMA = {
    "type": "object",
    "properties": EXPERIMENT_PARAMS,
    "additionalProperties": False,
}


def defaults() -> dict[str, Any]:
    return {name: copy.deepcopy(spec["default"]) for name, spec in EXPERIMENT_PARAMS.items()}


def validate_params(values: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in and every value checked; ``ValueError`` names each bad field."""
    merged = defaults()
    merged.update(values)
    validator = jsonschema.Draft202012Validator(_SCHEMA)
    errors = sorted(validator.iter_errors(merged), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            if err.validator == "additionalProperties":
                extra = sorted(set(merged) - set(EXPERIMENT_PARAMS))
                lines.append(f"unknown param(s) {extra}; allowed: {sorted(EXPERIMENT_PARAMS)}")
                continue
            field = ".".join(str(p) for p in err.absolute_path) or "params"
            lines.append(f"{field}: {err.message}")
        raise ValueError("invalid experiment params: " + "; ".join(lines))
    return merged
