"""Sphinx extension: the reference pages, generated from the code on every build.

Writes ``reference/generated/{params,metrics,cli,dags,api}.md`` before Sphinx reads the
sources, from the objects the product itself uses: the Param specs the DAGs turn into
Airflow ``Param`` objects, ``METRIC_DEFINITIONS`` (and the models' own), the CLI's typer
application, each DAG file's docstring (its ``doc_md``; read with ``ast``, so Airflow is
not imported), and the public modules' docstrings (``autodoc``). A page that cannot drift
from the code needs no test of its own beyond the strict build.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
OUT = DOCS / "reference" / "generated"
DAGS = DOCS.parent / "dags"

#: The modules whose docstrings make the Python API page: what a user extending the
#: project calls or subclasses.
API_MODULES = (
    "balancebench.strategies.base",
    "balancebench.core.routing_table",
    "balancebench.core.stats",
    "balancebench.core.loads",
    "balancebench.core.hashing",
)


def _cell(text: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(value: Any) -> str:
    return f"`{json.dumps(value)}`".replace("|", "\\|")


def _allowed(spec: dict[str, Any]) -> str:
    """Every rule of a Param's schema the form and the CLI's door check, in words."""
    if "enum" in spec:
        return ", ".join(_code(v) for v in spec["enum"])
    rules = []
    items = spec.get("items", {})
    if "enum" in items:
        rules.append("list of: " + ", ".join(_code(v) for v in items["enum"]))
    for key, word in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
    ):
        if key in spec:
            rules.append(word.format(spec[key]) if "{}" in word else f"{word} {spec[key]}")
    if spec.get("uniqueItems"):
        rules.append("no item twice")
    if "pattern" in spec:
        rules.append(spec.get("x-allowed") or f"matching `{spec['pattern']}`")
    return "; ".join(rules)


def _type(spec: dict[str, Any]) -> str:
    kind = spec.get("type", "")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def params_page() -> str:
    from balancebench.experiment.model_sweep import MODEL_EXPERIMENT_PARAMS
    from balancebench.experiment.params import DATASET_DAG_PARAMS, EXPERIMENT_PARAMS
    from balancebench.orchestration.sweep_grid import SWEEP_PARAMS

    dags = (
        ("balance_experiment", EXPERIMENT_PARAMS),
        ("nightly_sweep", SWEEP_PARAMS),
        ("model_experiment", MODEL_EXPERIMENT_PARAMS),
        ("generate_dataset", DATASET_DAG_PARAMS),
    )
    lines = [
        "# Params",
        "",
        "Every Param of every DAG, from the specs the DAGs turn into Airflow `Param` objects",
        "(and the CLI's `--conf` checks before any work). Generated on every build.",
        "",
    ]
    from balancebench.experiment.model_sweep import model_param_section
    from balancebench.experiment.params import param_section
    from balancebench.orchestration.sweep_grid import sweep_param_section

    sections = {
        "balance_experiment": param_section,
        "nightly_sweep": sweep_param_section,
        "model_experiment": model_param_section,
        "generate_dataset": param_section,
    }
    for dag, specs in dags:
        lines += [f"## {dag}", ""]
        grouped: dict[str, list[str]] = {}
        # By their sections, in the specs' order (the form shows each DAG's first-run
        # fields first, in its one open section: dags/dag_support/params.py).
        for name in specs:
            grouped.setdefault(sections[dag](name), []).append(name)
        for section, names in grouped.items():
            lines += [f"### {dag}: {section}", ""]
            for name in names:
                spec = specs[name]
                allowed = _allowed(spec)
                # An anchor per Param and DAG: docs and messages can link to one field.
                lines.append(
                    f'- <span id="{dag}-{name}"></span>**`{name}`** ({_type(spec)}, default '
                    f"{_code(spec.get('default'))}"
                    + (f"; allowed: {allowed}" if allowed else "")
                    + f"): {_cell(spec.get('description', spec.get('title', '')))}"
                )
            lines.append("")
    return "\n".join(lines)


def _definitions(definitions: dict[str, str]) -> list[str]:
    """A ``| metric | definition |`` table of ``definitions``."""
    rows = [f"| `{k}` | {_cell(v)} |" for k, v in definitions.items()]
    return ["| metric | definition |", "|---|---|", *rows, ""]


def metrics_page() -> str:
    from balancebench.core.metric_definitions import METRIC_DEFINITIONS
    from balancebench.experiment.model_sweep import SWEEP_METRIC_DEFINITIONS
    from balancebench.models import MODELS, get_model

    lines = [
        "# Metrics",
        "",
        "Every metric logged to MLflow, with its unit in its name, from the definitions the",
        "runs also log as their MLflow description",
        "(`metric_definitions.METRIC_DEFINITIONS` and the models' own). `[per batch]` marks a",
        "series with one value per micro-batch.",
        "Generated on every build.",
        "",
        "## Workload runs",
        "",
        *_definitions(METRIC_DEFINITIONS),
        "## Model sweeps (papers 001-004)",
        "",
        *_definitions(SWEEP_METRIC_DEFINITIONS),
    ]
    for model in MODELS:
        lines += [f"### Model `{model}`", "", *_definitions(get_model(model).metric_definitions)]
    return "\n".join(lines)


def cli_page() -> str:
    import typer

    from balancebench.orchestration.cli import app

    group = typer.main.get_command(app)
    lines = [
        "# Command line",
        "",
        "`balancebench COMMAND [OPTIONS]` (`.venv/bin/balancebench`, or `uv run balancebench`).",
        "Each command's `--help` prints the same. Generated on every build.",
        "",
    ]
    lines[2] = f"{(group.help or '').strip()}: " + lines[2]
    for name, command in group.commands.items():
        lines += [f"## `balancebench {name}`", "", (command.help or "").strip(), ""]
        if command.context_settings.get("ignore_unknown_options") or getattr(
            command, "allow_extra_args", False
        ):
            lines += ["Arguments it does not know are passed on unchanged.", ""]
        params = [p for p in command.params if p.name != "help"]
        arguments = [p for p in params if p.param_type_name == "argument"]
        options = [p for p in params if p.param_type_name != "argument"]
        if arguments:
            lines += ["| argument | required | what it is |", "|---|---|---|"]
            for p in arguments:
                what = _cell(getattr(p, "help", "") or "")
                lines.append(
                    f"| `{(p.name or '').upper()}` | {'yes' if p.required else 'no'} | {what} |"
                )
            lines.append("")
        if options:
            lines += ["| option | default | what it is |", "|---|---|---|"]
            for p in options:
                flag = ", ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
                default = "" if p.default is None else f"`{p.default}`"
                what = _cell(getattr(p, "help", "") or "")
                if p.required:
                    what = f"**required.** {what}"
                lines.append(f"| {flag} | {_cell(default)} | {what} |")
            lines.append("")
    return "\n".join(lines)


def dags_page() -> str:
    lines = [
        "# DAGs",
        "",
        "Each DAG's documentation as Airflow shows it (its `doc_md`, the DAG file's",
        "docstring). Generated on every build.",
        "",
    ]
    for path in sorted(DAGS.glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        # Rendered as the Markdown Airflow renders it: its title (the DAG's name, this
        # section's heading already) left out, its other headings under this one.
        kept = [line for line in doc.splitlines() if line.lstrip("# ") != path.stem]
        shown = "\n".join(
            f"###{line.lstrip('#')}" if line.startswith("#") else line for line in kept
        )
        lines += [f"## `{path.stem}`", "", f"`dags/{path.name}`", "", shown, ""]
    return "\n".join(lines)


def api_page() -> str:
    lines = [
        "# Python API",
        "",
        "The library's public surface for a new strategy or analysis, from its docstrings.",
        "Generated on every build.",
        "",
    ]
    for module in API_MODULES:
        lines += [
            f"## `{module}`",
            "",
            "```{eval-rst}",
            f".. automodule:: {module}",
            "   :members:",
            "```",
            "",
        ]
    return "\n".join(lines)


PAGES = {
    "params": params_page,
    "metrics": metrics_page,
    "cli": cli_page,
    "dags": dags_page,
    "api": api_page,
}


def write_pages(*_: Any) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        text = page().rstrip() + "\n"
        target = OUT / f"{name}.md"
        # Unchanged pages keep their time stamp, so an incremental build skips them.
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", write_pages)
    return {"parallel_read_safe": True}
