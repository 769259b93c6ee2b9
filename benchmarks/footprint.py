"""What balancebench takes on disk after `make setup` and one `make run` (issue 60, the
requirements the README gives up front): the locked environment (``.venv``), the pinned
uv (``.local/bootstrap``), the JVM router and the class archive (``.local/jvm``), and the
default run's dataset, in MiB.

    uv run python benchmarks/footprint.py

The default dataset is generated first if it is not there (about 15 s), so the figure is
what a first ``make run`` writes. A run's MLflow store, results and logs add a few MiB
more per run, not counted here.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from balancebench.experiment.params import ExperimentSpec
from balancebench.generators import generate, generator_params
from balancebench.state.paths import datasets_dir, local_dir

ROOT = Path(__file__).resolve().parents[1]


def mib(folder: Path) -> float:
    """The bytes of every file under ``folder`` (links not followed), in MiB."""
    total = sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return total / 2**20


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    spec = ExperimentSpec.checked({})
    dataset, manifest = generate(spec.dataset, datasets_dir(), generator_params(spec.dataset, spec))
    rows = [
        (".venv (the locked environment)", mib(ROOT / ".venv")),
        (".local/bootstrap (the pinned uv)", mib(local_dir() / "bootstrap")),
        (".local/jvm (JVM router, class archive)", mib(local_dir() / "jvm")),
        (f"default dataset ({manifest.row_count:,} tuples)", mib(Path(dataset))),
    ]
    print(f"disk footprint, {time.strftime('%Y-%m-%d %H:%M UTC')}")
    for name, size in rows:
        print(f"  {name:<42} {size:>8,.0f} MiB")
    print(f"  {'in all':<42} {sum(s for _, s in rows):>8,.0f} MiB")


if __name__ == "__main__":
    main()
