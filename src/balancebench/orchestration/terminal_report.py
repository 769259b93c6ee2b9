"""What ``balancebench report`` (and ``run``, ``sweep`` once their DAG run ends) prints in
the terminal: the verdicts first, in words and units, then the details, where the results
are, and last the answer, one line per strategy (80 columns: nothing wraps)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from balancebench.core.metric_definitions import figure_words
from balancebench.core.schema import quoted, terminal_safe
from balancebench.experiment.compare import TABLE_METRICS, comparison_table
from balancebench.experiment.params import defaults
from balancebench.experiment.round_runs import experiment_comparison
from balancebench.state import reaper, tracking
from balancebench.state.paths import datasets_dir, results_dir, validation_dir

# soft_wrap: a message is never cut into lines (paths in it stay copy-pastable).
console = Console(soft_wrap=True, emoji=False)  # ":x:" in a file is text, not an emoji


def sweep_report(sweep: str) -> bool:
    """The report page's path and its text summary, for a nightly_sweep parent run."""
    from balancebench.state.paths import reports_dir

    try:
        run = tracking.store().get_run(sweep)
    except Exception as exc:  # MLflow raises its own exception type for an unknown id
        console.print(f"[red]sweep: no run {escape(sweep)!r}[/red] in {tracking.tracking_uri()}")
        raise typer.Exit(2) from exc
    if run.data.tags.get(tracking.ROLE_TAG) != "sweep":
        console.print(f"[red]run {sweep} is not a nightly_sweep parent run[/red]")
        raise typer.Exit(2)
    page = Path(run.data.tags.get("report_path", reports_dir() / sweep / "report.html"))
    summary = page.with_suffix(".txt")
    print(f"sweep {sweep} ({run.info.status}): {run.info.run_name}")
    print(summary.read_text() if summary.exists() else "(no summary yet: the sweep has not ended)")
    print(f"report page:  {page}")
    print(f"MLflow run:   {tracking.ui_link(run.info.experiment_id, sweep)}")
    return run.info.status == "FINISHED" and page.exists()


def run_report(experiment: str, parent: str | None) -> bool:
    """The comparison table of a ``balance_experiment`` parent run (default: the latest)
    and where its results are; whether the run finished with a table. A plain function:
    calling the ``report`` command from Python would pass typer's option objects for
    every argument left out."""
    if parent is None:
        if tracking.store().get_experiment_by_name(experiment) is None:
            console.print(
                f"[red]experiment: no experiment {escape(quoted(experiment))}[/red] in "
                f"{tracking.tracking_uri()}",
                highlight=False,
            )
            raise typer.Exit(2)
        latest = tracking.latest_parent_run(experiment)
        if latest is None:
            console.print(f"no runs in experiment {escape(quoted(experiment))} yet")
            raise typer.Exit(1)
        parent = latest["run_id"]
    try:
        parent_run = tracking.store().get_run(parent)
    except Exception as exc:  # MLflow raises its own exception type for an unknown id
        console.print(f"[red]parent: no run {escape(parent)!r}[/red] in {tracking.tracking_uri()}")
        raise typer.Exit(2) from exc
    status = parent_run.info.status
    if status != "FINISHED":  # say what happened before anything else: no table of dashes
        tags = parent_run.data.tags
        why = tags.get(tracking.FAILURE_TAG) or tags.get(reaper.REASON_TAG)
        if status == "RUNNING":
            why = why or "it is still running; its table is written when it ends"
        line = f"parent run {parent} is {status}" + (f": {why}" if why else " (no reason kept)")
        console.print(terminal_safe(line), style="red", markup=False, highlight=False)
    logged = parent_run.data.params
    known = defaults()
    params = {
        name: logged.get(name, known[name])
        for name in ("min_rounds", "max_rounds", "equivalence_margin", "baseline")
    }
    params["strategies"] = json.loads(logged.get("strategies", "[]"))
    found = experiment_comparison(parent, params, TABLE_METRICS)
    rows = comparison_table(found.columns, found.cell_runs) if found.cell_runs else None
    print(f"balance_experiment: parent run {parent} ({status})")
    if found.rows:
        console.print(verdict_table(found))
    if rows is None:
        print("comparison:   none (no strategy finished a round)")
    else:
        rows = rows.set_index("strategy")
        order = params["strategies"]
        names = [s for s in order if s in rows.index] + [s for s in rows.index if s not in order]
        for table in detail_tables(rows, names):
            console.print(table)
    # Plain print: paths and the UI command must stay copy-pastable (no wrapping).
    out = results_dir() / parent
    if (out / "comparison.csv").exists():
        print(f"results:      {out}/comparison.png (the verdicts), details.png, comparison.csv,")
        print("              verdicts.csv, rounds.csv")
    else:  # a run that failed before its comparison: no path to a file that is not there
        if status == "RUNNING":
            print("results:      none written yet (the run is still RUNNING)")
        else:
            print(f"results:      none written (the run ended {status} before its comparison)")
    print(f"datasets:     {datasets_dir()}")
    print(f"validation:   {validation_dir() / (parent + '.json')}")
    print(f"MLflow store: {tracking.tracking_uri()}")
    print("\n".join(tracking.how_to_open(parent_run.info.experiment_id, parent)))
    if found.rows:  # the last word is the answer, one line per strategy
        print_answer(found.rows, int(params["max_rounds"]))
    return status == "FINISHED" and rows is not None


def wrapped(text: str, indent: str = "  ") -> str:
    """``text`` wrapped to the terminal, its later lines indented."""
    import textwrap

    width = max(40, console.width)
    return textwrap.fill(text, width=width, subsequent_indent=indent, break_on_hyphens=False)


def print_answer(rows: list[Any], max_rounds: int) -> None:
    """One line per strategy in the verdicts' words, then what would decide each open
    verdict (the smallest change the rounds resolve, the rounds to decide, the Param)."""
    from balancebench.experiment.round_runs import answer_lines, to_decide

    print("\nanswer:")
    for line in answer_lines(rows):
        print(wrapped("  " + line, "    "))
    hints = [h for h in (to_decide(r, max_rounds) for r in rows) if h]
    if hints:
        print("to decide the open verdicts:")
        for hint in hints:
            print(wrapped("  " + hint, "    "))


def verdict_table(found: Any) -> Table:
    """Per headline figure (its unit beside it): each strategy's mean over the rounds and
    its verdict against the baseline on the paired rounds, the interval the verdict's own
    (the means' intervals are in comparison.csv). Narrow enough for 80 columns."""
    from rich import box

    from balancebench.experiment.round_runs import figure_blocks

    table = Table(
        title="the verdicts: each strategy against the baseline, paired rounds",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    cells: list[tuple[str, str, str]] = []
    for b in figure_blocks(found.rows, found.means()):
        cells.append((figure_words(b.figure), b.unit.name, ""))
        cells += [(f"  {name}", mean, words) for name, mean, words in b.entries]
    # The names and the means never shrink; a verdict too long for the terminal (a huge
    # interval after few rounds) folds onto a second line rather than cut them short.
    for i, heading in enumerate(("figure", "mean")):
        table.add_column(
            heading,
            justify="right" if i else "left",
            no_wrap=True,
            min_width=max(len(c[i]) for c in cells),
        )
    table.add_column("against the baseline", overflow="fold")
    for name, mean, said in cells:
        table.add_row(f"[bold]{name}[/bold]" if not said else name, mean, said)
    return table


def detail_tables(rows: Any, names: list[str]) -> list[Table]:
    """The rest of the comparison as details: one row per figure (its words and unit),
    each strategy's mean over the rounds ± its 95% interval's half-width; as many tables
    as it takes to keep the strategies' columns inside the terminal."""
    from rich import box

    from balancebench.core.metric_definitions import VERDICT_FIGURES
    from balancebench.core.units import quantity, spread, unit_for
    from balancebench.experiment.compare import TABLE_WORDS

    shown = [m for m in TABLE_WORDS if m not in VERDICT_FIGURES]
    cells: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    for m in shown:
        # The baseline's mean picks the prefix (none where it has no finished round).
        unit = unit_for(m, rows.loc[names[0], m])
        labels[m] = TABLE_WORDS[m] + (f" ({unit.name})" if unit.name else "")
        cells[m] = [
            spread(m, *(rows.loc[n, c] for c in (m, f"{m}_ci95_lo", f"{m}_ci95_hi")), unit)
            for n in names
        ]
    label_width = max(len(v) for v in labels.values())
    cell_width = max(max(len(c) for c in cs) for cs in cells.values())
    cell_width = max(cell_width, *(len(n) for n in names))
    per_table = max(1, (max(40, console.width) - label_width - 1) // (cell_width + 2))
    tables = []
    for first in range(0, len(names), per_table):
        part = names[first : first + per_table]
        table = Table(
            title="details: mean over rounds ± its 95% CI's half-width" if first == 0 else None,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
        )
        table.add_column("figure", no_wrap=True)
        for name in part:
            table.add_column(name, justify="right", no_wrap=True)
        rounds = [quantity("rounds_finished", rows.loc[n, "rounds_finished"]) for n in part]
        table.add_row("rounds", *rounds)
        for m in shown:
            table.add_row(labels[m], *cells[m][first : first + per_table])
        tables.append(table)
    return tables
