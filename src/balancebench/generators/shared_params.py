"""Dataset Params shared by several generators (same name, same meaning, one spec).

A generator's own Params are named ``<generator>_<param>`` and live in its class
(``Generator.own_params``); ``DATASET_PARAMS`` in ``generators`` is the union.
"""

from __future__ import annotations

from typing import Any

SHARED_DATASET_PARAMS: dict[str, dict[str, Any]] = {
    "n_tuples": {
        "type": "integer",
        "minimum": 1,
        "maximum": 2_000_000_000,
        "default": 2_000_000,
        "title": "Tuples",
        "description": "Length of a generated stream (tuples).",
    },
    "n_keys": {
        "type": "integer",
        "minimum": 1,
        "maximum": 100_000_000,
        "default": 10_000,
        "title": "Distinct keys",
        "description": "Size of the key domain of a generated stream (keys, topics, numbers).",
    },
    "zipf_s": {
        "type": "number",
        "minimum": 0,
        "maximum": 5,
        "default": 0.8,
        "title": "Zipf exponent",
        "description": "Key popularity p(rank) ~ rank^-s (0 is uniform). Paper 000's default "
        "skew is 0.8, swept 0-1.5; also the word-frequency exponent of generated text.",
    },
    "input_rate_tuples_per_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1e12,
        "default": 500_000,
        "title": "Input rate (tuples/s)",
        "description": "Mean Poisson arrival rate of a generated stream (sets event time).",
    },
    "seed": {
        "type": "integer",
        "minimum": 0,
        "maximum": 2**63 - 1,
        "default": 42,
        "title": "Seed",
        "description": "Seeds the generator: same seed and params give the same dataset digest.",
    },
}
