"""Modules imported on first use, so that reading a Param spec, a DAG file or the CLI's
help does not load pandas, PySpark, MLflow or numba (issue 46: Airflow's DAG processor
gives a DAG file 30 s, and a busy machine had them taking 25-31 s).

:func:`lazy_module` is the standard library's :class:`importlib.util.LazyLoader`: the
module object is created and put in ``sys.modules`` at once, its code runs on the first
attribute read. A module whose real import fails raises then, at its first use.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module whose code runs on its first attribute read (the module itself
    where it is already imported)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def is_loaded(name: str) -> bool:
    """Whether ``name``'s code has run (a lazy module not yet read has not)."""
    module = sys.modules.get(name)
    return module is not None and not isinstance(module, importlib.util._LazyModule)  # type: ignore[attr-defined]
