"""Models of papers 001-004 (see ``contract`` for the contract), registered by name.

>>> model = get_model("scheduling")
>>> result = model.run(ModelPoint("scheduling", "acts", model.check_params({})))  # doctest: +SKIP

Add a model by writing its module (a ``Model`` subclass) and listing it in ``_MODULES``.
"""

from __future__ import annotations

import importlib
from functools import cache

from balancebench.models.contract import Model, ModelPoint, ModelResult

#: name -> "module:Class" (imported on first use).
_MODULES: dict[str, str] = {
    "scheduling": "balancebench.models.scheduling:SchedulingModel",
    "elastic": "balancebench.models.elastic:ElasticModel",
    "backpressure": "balancebench.models.backpressure:BackpressureModel",
    "overlay": "balancebench.models.overlay:OverlayModel",
}
MODELS: tuple[str, ...] = tuple(_MODULES)


@cache
def get_model(name: str) -> Model:
    """The model registered as ``name``; an unknown name raises ``ValueError``."""
    if name not in _MODULES:
        raise ValueError(f"model: unknown {name!r}; allowed values: {sorted(_MODULES)}")
    module, cls = _MODULES[name].split(":")
    model = getattr(importlib.import_module(module), cls)()
    if model.name != name:
        raise RuntimeError(f"{_MODULES[name]} calls itself {model.name!r}, registered as {name!r}")
    return model


@cache
def model_strategies() -> dict[str, str]:
    """Every model strategy -> its model (names are unique across models)."""
    out: dict[str, str] = {}
    for name in MODELS:
        for strategy in get_model(name).strategies:
            if strategy in out:
                raise RuntimeError(f"strategy {strategy!r} is in models {out[strategy]} and {name}")
            out[strategy] = name
    return out


__all__ = ["MODELS", "Model", "ModelPoint", "ModelResult", "get_model", "model_strategies"]
