"""Great Expectations validation of a dataset before any Spark job starts.

A dataset is checked frame by frame: its generator lists the frames
(``Generator.validation_frames``: every table, plus *profile* frames with statistics of
the distribution, see ``balancebench.core.profiles``), and each frame has one suite,
``expectations/<generator>/<frame>.json``. A frame without a suite or a suite without a
frame is an error, never a silent skip. Suites are plain JSON loaded into an ephemeral
GX context on each run, so validation never writes into the repository. Values that
depend on the dataset (row counts, params) are GX suite parameters
(``{"$PARAMETER": "rows_lineitem"}``) filled from the manifest
(``Generator.suite_parameters``). The full GX results go to one JSON file, returned with a
readable summary that names every failed expectation.

GX silently drops an expectation whose type it does not know (the suite still
passes), so :func:`load_suite` checks that every expectation in the file was loaded.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from balancebench.generators import get_generator, load_manifest
from balancebench.state.paths import expectations_dir

#: Validation settings (DAG Params) and their defaults.
VALIDATION_DEFAULTS: dict[str, Any] = {"zipf_fit_tolerance": 0.1}


@dataclass(frozen=True)
class ValidationReport:
    suite: str
    success: bool
    failed: list[str]
    evaluated: int
    result_path: Path
    #: frame -> number of expectations evaluated on it.
    frames: dict[str, int] | None = None

    def message(self) -> str:
        if self.success:
            frames = f" on {len(self.frames)} frames" if self.frames else ""
            return f"{self.suite}: all {self.evaluated} expectations passed{frames}"
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


def suite_names(generator: str, directory: Path | None = None) -> list[str]:
    """Frames that have a suite in ``<directory>/<generator>/``."""
    folder = (directory or expectations_dir()) / generator
    return sorted(p.stem for p in folder.glob("*.json"))


def validate_dataset(
    dataset_dir: str | Path,
    result_path: str | Path,
    settings: dict[str, Any] | None = None,
) -> ValidationReport:
    """Run the generator's suites on the dataset; save the full GX results to ``result_path``."""
    dataset_dir = Path(dataset_dir)
    manifest = load_manifest(dataset_dir)
    generator = get_generator(manifest.generator)
    settings = {**VALIDATION_DEFAULTS, **(settings or {})}
    frames = generator.validation_frames(dataset_dir, manifest, settings)
    suites = suite_names(manifest.generator)
    no_suite = sorted(set(frames) - set(suites))
    no_frame = sorted(set(suites) - set(frames))
    if no_suite or no_frame:
        raise ValueError(
            f"suite: expectations/{manifest.generator}/ does not match the dataset's frames "
            f"{sorted(frames)}: frames without a suite {no_suite}, suites without a frame "
            f"{no_frame}"
        )
    loaded = {f: load_suite(f"{manifest.generator}/{f}") for f in sorted(frames)}
    parameters = generator.suite_parameters(manifest)

    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas("dataset")
    results: dict[str, Any] = {}
    failed: list[str] = []
    evaluated: dict[str, int] = {}
    for frame_name, suite in loaded.items():
        frame = frames[frame_name]()
        suite = context.suites.add(suite)
        batch = source.add_dataframe_asset(frame_name).add_batch_definition_whole_dataframe("whole")
        definition = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"validate_{frame_name}", data=batch, suite=suite)
        )
        result = definition.run(
            batch_parameters={"dataframe": frame}, expectation_parameters=parameters
        )
        results[frame_name] = result.to_json_dict()
        evaluated[frame_name] = len(result.results)
        failed += [f"{frame_name}: {_describe(r)}" for r in result.results if not r.success]
        del frame
    result_path = Path(result_path)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    result_path.write_text(
        json.dumps(
            {
                "dataset_dir": str(dataset_dir),
                "generator": manifest.generator,
                "digest": manifest.digest,
                "success": not failed,
                "suite_parameters": parameters,
                "frames": results,
            },
            indent=2,
            default=str,
        )
    )
    return ValidationReport(
        suite=manifest.generator,
        success=not failed,
        failed=failed,
        evaluated=sum(evaluated.values()),
        result_path=result_path,
        frames=evaluated,
    )


def _raised(info: Any) -> str | None:
    """The exception message of an expectation that raised: GX keeps it either at the top
    of ``exception_info`` or under the id of the metric that failed."""
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for value in info.values():
        if isinstance(value, dict) and value.get("raised_exception"):
            return str(value.get("exception_message"))
    return None


def _describe(result: Any) -> str:
    """``type(kwargs): what was observed`` of one failed expectation."""
    cfg = result.expectation_config
    kwargs = {k: v for k, v in cfg.kwargs.items() if k != "batch_id"}
    res = result.result or {}
    raised = _raised(result.exception_info)
    if "observed_value" in res:
        found = f"observed {res['observed_value']!r}"
    elif raised:
        found = f"raised {raised}"
    else:
        sample = res.get("partial_unexpected_list", [])[:5]
        found = f"{res.get('unexpected_count')} unexpected values, e.g. {sample}"
    return f"{cfg.type}({kwargs}): {found}"
