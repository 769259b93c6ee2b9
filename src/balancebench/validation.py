"""Great Expectations validation of a dataset before any Spark job starts.

Suites are plain JSON files in ``expectations/`` (``<generator>.json``), loaded into an
ephemeral GX context on each run, so validation never writes into the repository.
Values that depend on the dataset (row count, key domain) are GX suite parameters
(``{"$PARAMETER": "row_count"}``) filled from the manifest. The full GX result is saved
as JSON next to the run's other local state and returned with a readable summary.

GX silently drops an expectation whose type it does not know (the suite still
passes), so :func:`load_suite` checks that every expectation in the file was loaded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from balancebench.generators.common import Manifest, load_manifest
from balancebench.paths import expectations_dir


@dataclass(frozen=True)
class ValidationReport:
    suite: str
    success: bool
    failed: list[str]
    evaluated: int
    result_path: Path

    def message(self) -> str:
        if self.success:
            return f"{self.suite}: all {self.evaluated} expectations passed"
        lines = "\n".join(f"  - {f}" for f in self.failed)
        return (
            f"{self.suite}: {len(self.failed)} of {self.evaluated} expectations failed "
            f"(full GX result: {self.result_path}):\n{lines}"
        )


def _quiet_gx() -> None:
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


def load_suite(name: str, directory: Path | None = None) -> Any:
    """The GX ``ExpectationSuite`` stored as ``<directory>/<name>.json``."""
    _quiet_gx()
    import great_expectations as gx

    path = (directory or expectations_dir()) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"suite: no expectation suite {path}")
    spec = json.loads(path.read_text())
    try:
        suite = gx.ExpectationSuite(**spec)
    except Exception as exc:  # GX raises on the first unknown expectation type
        raise ValueError(f"suite {path}: cannot load: {exc}") from exc
    if len(suite.expectations) != len(spec.get("expectations", [])):
        raise ValueError(
            f"suite {path}: {len(spec['expectations'])} expectations in the file but "
            f"{len(suite.expectations)} loaded (unknown expectation type?)"
        )
    return suite


def suite_parameters(manifest: Manifest) -> dict[str, Any]:
    """Manifest-derived values the suites refer to with ``$PARAMETER``."""
    p = manifest.params
    return {
        "row_count": manifest.row_count,
        "max_tuple_id": manifest.row_count - 1,
        "n_keys": p.get("n_keys"),
        "max_key": p["n_keys"] - 1 if "n_keys" in p else None,
    }


def validate_dataset(dataset_dir: str | Path, result_path: str | Path) -> ValidationReport:
    """Run the generator's suite on the dataset; save the full GX result to ``result_path``."""
    dataset_dir = Path(dataset_dir)
    manifest = load_manifest(dataset_dir)
    suite = load_suite(manifest.generator)
    files = [str(dataset_dir / f) for f in manifest.files]
    frame = pq.ParquetDataset(files).read().to_pandas()

    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    suite = context.suites.add(suite)
    batch = (
        context.data_sources.add_pandas("dataset")
        .add_dataframe_asset(manifest.generator)
        .add_batch_definition_whole_dataframe("whole")
    )
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name=f"validate_{manifest.generator}", data=batch, suite=suite)
    )
    result = definition.run(
        batch_parameters={"dataframe": frame},
        expectation_parameters=suite_parameters(manifest),
    )
    result_path = Path(result_path)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result.to_json_dict(), indent=2, default=str))
    failed = []
    for r in result.results:
        if not r.success:
            cfg = r.expectation_config
            kwargs = {k: v for k, v in cfg.kwargs.items() if k != "batch_id"}
            if "observed_value" in r.result:
                found = f"observed {r.result['observed_value']!r}"
            else:
                sample = r.result.get("partial_unexpected_list", [])[:5]
                found = f"{r.result.get('unexpected_count')} unexpected values, e.g. {sample}"
            failed.append(f"{cfg.type}({kwargs}): {found}")
    return ValidationReport(
        suite=manifest.generator,
        success=bool(result.success),
        failed=failed,
        evaluated=len(result.results),
        result_path=result_path,
    )
