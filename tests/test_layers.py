"""The package's tree is its architecture: every module sits in a layer
(``balancebench.LAYERS``, bottom first) and imports only from its own layer and those
below, whether the import is at the top of the file or inside a function; the package
root holds at most 10 modules; no two modules share a base name (``__init__`` aside).
The functions are ``benchmarks/package_shape.py``'s, which prints the same figures."""

from __future__ import annotations

from pathlib import Path

import pytest

import balancebench
from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(balancebench.__file__).parents[1]


@pytest.fixture(scope="module")
def shape():
    return load_benchmark("package_shape")


def test_no_module_imports_from_a_layer_above_its_own(shape):
    edges = shape.internal_imports(shape.modules(SRC))
    assert len(edges) > 100  # the check sees the package's imports
    assert shape.imports_that_point_up(edges, balancebench.LAYERS) == []


def test_the_check_finds_an_import_that_points_up(shape, tmp_path):
    # A core module that imports the CLI, inside a function, is found.
    module = tmp_path / "fake.py"
    module.write_text("def f():\n    from balancebench.orchestration import cli\n")
    mods = {"balancebench.core.fake": module, "balancebench.orchestration.cli": module}
    edges = shape.internal_imports(mods)
    assert shape.imports_that_point_up(edges, balancebench.LAYERS) == [
        "balancebench.core.fake -> balancebench.orchestration.cli"
    ]


def test_the_root_is_small_and_every_base_name_is_unique():
    package = SRC / "balancebench"
    root = [p.name for p in package.glob("*.py")]
    assert len(root) <= 10, root
    names = [p.name for p in package.rglob("*.py") if p.name != "__init__.py"]
    assert sorted({n for n in names if names.count(n) > 1}) == []
