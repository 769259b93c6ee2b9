"""The report page of a sweep: one self-contained HTML file (figures embedded as PNG).

Per workload and node count (and tolerance, when the grid varies it), each timed headline
figure against skew, one line per strategy (its one colour, ``plotting.strategy_color``):
the mean over the rounds with its Student-t 95% interval drawn as error bars. Under the
figures, per verdict figure and cell group (same workload, skew, node count and
tolerance), every strategy's verdict against the group's baseline on the paired rounds
(``balancebench.core.stats``: "X% faster [lo, hi]", "equivalent within ±m%", "no clear
difference", "undecided after n rounds"). Then the table of every cell (mean and
interval; cells short of their minimum rounds flagged; regressed cells highlighted), each
linked to its MLflow run, and per cell what the regression check compared against: the
baseline, the threshold, how many earlier runs, and the last earlier runs' values linked
to their MLflow runs.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from balancebench.core.metric_definitions import figure_words
from balancebench.core.units import interval
from balancebench.experiment.compare import headline_metrics, logged_name
from balancebench.experiment.regression import DIRECTIONS, TIMED, Verdict
from balancebench.experiment.round_runs import ROUNDS_FINISHED, VerdictRow
from balancebench.plotting import strategy_color, strategy_order

#: The earlier runs shown per figure in the regression check.
SHOWN_RUNS: Final[int] = 3
#: What the figures draw around each mean (the legend and the captions say it).
CI_DRAWN: Final[str] = "bars: Student-t 95% interval of the mean over the rounds"

CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
td.text { text-align: left; }
tr.regressed td { background: #fdd; }
td.few { background: #ffe9b3; }
.flag { color: #b00; font-weight: bold; }
.warn { color: #8a5a00; font-weight: bold; }
figure { margin: 1em 0; }
img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; }
"""


def metric_cols(metric: str) -> tuple[str, str, str]:
    return f"{metric}_mean", f"{metric}_ci95_lo", f"{metric}_ci95_hi"


def _num(value: Any) -> str:
    return f"{value:.4g}"


def _rounds(row: Any) -> float:
    """A cell's finished rounds (NaN when the table does not say)."""
    value = row.get(ROUNDS_FINISHED)
    return math.nan if value is None else float(value)


def _short(rounds: float, least: int) -> bool:
    """Fewer rounds than the minimum (or unknown): a run of the cell failed."""
    return not rounds >= least


def _short_text(least: int) -> str:
    return f"fewer than {least} rounds"


def _sections(cells: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """The report's sections: per workload and node count, and per tolerance when the
    table has more than one (a figure's x axis is the skew)."""
    keys = ["workload", "n_nodes"]
    several = "tolerance" in cells and cells["tolerance"].nunique(dropna=False) > 1
    if several:
        keys.append("tolerance")
    for key, part in cells.groupby(keys, sort=True, dropna=False):
        heading = f"{key[0]}, N = {key[1]}" + (f", tol = {key[2]:g}" if several else "")
        yield heading, part


def figure_verdicts(
    part: pd.DataFrame, verdicts: Sequence[tuple[str, VerdictRow]]
) -> list[tuple[str, list[tuple[str, list[VerdictRow]]]]]:
    """Per verdict figure of a section (``part``: its cells): its heading (with its good
    direction) and, per cell group of the section (by skew), its strategies' verdicts
    against the group's baseline."""
    groups = dict.fromkeys(part["group"]) if "group" in part else {}
    skew = (
        {g: float(z) for g, z in zip(part["group"], part["zipf_s"], strict=False)}
        if "group" in part
        else {}
    )
    here = [(g, r) for g, r in verdicts if g in groups]
    out = []
    for figure in dict.fromkeys(r.figure for _, r in here):
        per_group = [
            (f"s={skew[g]:g}", [r for gg, r in here if gg == g and r.figure == figure])
            for g in groups
        ]
        per_group = [(label, rows) for label, rows in per_group if rows]
        heading = f"{figure_words(figure)}: {figure} ({DIRECTIONS[figure]} is better)"
        out.append((heading, per_group))
    return out


@dataclass(frozen=True)
class CellCheck:
    """What one cell's regression check compared tonight against."""

    #: Earlier finished round runs of the same cell (same Params) in earlier sweeps.
    earlier_runs: int
    verdicts: tuple[Verdict, ...]
    #: Per figure: the last ``SHOWN_RUNS`` earlier values as (run id, value), oldest first.
    last_runs: dict[str, tuple[tuple[str, float], ...]]
    #: The last ``SHOWN_RUNS`` earlier runs' ids, oldest first.
    last_ids: tuple[str, ...] = ()

    @property
    def regressed(self) -> list[str]:
        return [v.metric for v in self.verdicts if v.regressed]

    def text(self) -> str:
        if not self.verdicts:
            return "not checked (no finished round tonight)"
        if not self.earlier_runs:
            return "no history yet"
        ids = ", ".join(r[:8] for r in self.last_ids)
        verdict = f"REGRESSED: {', '.join(self.regressed)}" if self.regressed else "no regression"
        return (
            f"checked against {self.earlier_runs} earlier run(s) (last: {ids}); "
            f"{len(self.verdicts)} figure(s): {verdict}"
        )


def cell_check(verdicts: list[Verdict], history: pd.DataFrame) -> CellCheck:
    """A cell's :class:`CellCheck` from its verdicts and its history (MLflow's
    ``search_runs`` frame of the earlier runs, oldest first: ``run_id``, ``metrics.<m>``)."""
    last: dict[str, tuple[tuple[str, float], ...]] = {}
    for v in verdicts:
        col = f"metrics.{v.metric}"
        if len(history) and col in history:
            found = history[["run_id", col]].dropna()
            found = found[found[col].astype(float).map(math.isfinite)]
            last[v.metric] = tuple(
                (str(rid), float(value))
                for rid, value in found.tail(SHOWN_RUNS).itertuples(index=False)
            )
    ids = tuple(str(r) for r in history["run_id"].tail(SHOWN_RUNS)) if len(history) else ()
    return CellCheck(len(history), tuple(verdicts), last, ids)


def _figure(cells: pd.DataFrame, title: str, least: int) -> str:
    """PNG (base64) of every timed headline figure against skew: per strategy the means,
    the Student-t 95% interval as error bars, hollow markers where a cell has fewer than
    ``least`` rounds; strategies offset slightly along the skew so their bars do not hide
    each other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in TIMED if metric_cols(m)[0] in cells]
    cols = 4
    rows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(metrics) :]:
        ax.set_visible(False)
    strategies = strategy_order(cells["strategy"].unique().tolist())
    skews = cells["zipf_s"].astype(float)
    step = 0.015 * (float(skews.max() - skews.min()) or 1.0)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        mean, lo, hi = metric_cols(metric)
        for i, strategy in enumerate(strategies):
            part = cells[cells["strategy"] == strategy].sort_values("zipf_s")
            x = part["zipf_s"].to_numpy(float) + (i - (len(strategies) - 1) / 2) * step
            y = part[mean].to_numpy(float)
            color = strategy_color(strategy)
            below = np.nan_to_num(np.clip(y - part[lo].to_numpy(float), 0, None))
            above = np.nan_to_num(np.clip(part[hi].to_numpy(float) - y, 0, None))
            ax.errorbar(
                x,
                y,
                yerr=[below, above],
                marker="o",
                color=color,
                label=strategy,
                capsize=3,
            )
            if ROUNDS_FINISHED in part:
                few = np.array([_short(float(n), least) for n in part[ROUNDS_FINISHED]], bool)
                ax.plot(x[few], y[few], "o", color=color, markerfacecolor="white", zorder=3)
        ax.set_title(f"{metric} ({TIMED[metric]} is better)", fontsize=9)
        skew_axis(ax, skews.tolist())
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8, title="bars: Student-t 95% interval", title_fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def skew_axis(ax: Any, skews: list[float]) -> None:
    """The x axis of a figure against skew: one tick per skew of the grid, labelled as the
    grid gives it (a one-skew sweep read as several skews when matplotlib picked ticks
    around its strategies' offsets: 1.3925 ... 1.4075)."""
    ticks = sorted({float(s) for s in skews})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel("zipf_s")


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def _short_cells(cells: pd.DataFrame, least: int) -> list[tuple[str, float]]:
    """The cells with fewer than ``least`` finished rounds: (label, rounds)."""
    return [(str(r["label"]), _rounds(r)) for _, r in cells.iterrows() if _short(_rounds(r), least)]


def _count(n: float) -> str:
    return "?" if n != n else f"{n:g}"


def _verdict_html(row: VerdictRow) -> str:
    """One verdict with the strategy in bold where it is decided."""
    name = html.escape(row.strategy)
    if row.verdict.decided:
        name = f"<b>{name}</b>"
    return f"{name} vs {html.escape(row.baseline)}: {html.escape(row.text)}"


def _checked(checks: dict[str, CellCheck] | None) -> str:
    """The regression count's context: how many cells had a history to compare with."""
    if checks is None:
        return "per-cell history not given"
    with_history = [c for c in checks.values() if c.verdicts and c.earlier_runs]
    none_yet = [c for c in checks.values() if c.verdicts and not c.earlier_runs]
    unchecked = [c for c in checks.values() if not c.verdicts]
    parts = [f"{len(with_history)} of {len(checks)} cell(s) checked against earlier runs"]
    if with_history:
        runs = sorted(c.earlier_runs for c in with_history)
        spread = f"{runs[0]}" if runs[0] == runs[-1] else f"{runs[0]} to {runs[-1]}"
        parts[0] += f" ({spread} each)"
    parts.append(f"{len(none_yet)} with no history yet")
    if unchecked:
        parts.append(f"{len(unchecked)} not checked (no finished round)")
    return "; ".join(parts)


#: Positions on a loaded dataset the position check shows one by one (later ones pooled).
POSITIONS_SHOWN: Final[int] = 9
#: The timed figure whose spread across positions in an application the report shows.
POSITION_METRIC: Final[str] = "makespan_s_total"
#: The harness's own time per run (driver wall minus charged cost), as MLflow names it.
HARNESS_METRIC: Final[str] = logged_name("harness_s_total", headline_metrics())
#: Of it, the tasks waiting for the machine's cores (a lower bound), as MLflow names it.
CORE_WAIT_METRIC: Final[str] = logged_name("harness_core_wait_s_total", headline_metrics())


def measurement_lines(runs: pd.DataFrame) -> list[str]:
    """How a sweep's runs were measured, from its round runs (``runs``: one row per
    run with ``cell``, ``run_index`` (position in its Spark application), optionally
    ``dataset_run_index`` (position among the runs on its loaded dataset; runs of
    applications that loaded one dataset lack it, and there the two are the same) and the
    metric columns): the position check (each run's ``POSITION_METRIC`` against its cell's
    mean, averaged per position on its dataset, so that a first run after a load slower
    than the rest shows) and the harness's time per run, at the application's first
    position and after it. Charged to no strategy."""
    need = {"cell", "run_index", POSITION_METRIC}
    if runs.empty or not need <= set(runs.columns):
        return []
    runs = runs.dropna(subset=[POSITION_METRIC])
    runs = runs[runs.groupby("cell")[POSITION_METRIC].transform("mean") > 0]
    if runs.empty:
        return []
    on_dataset = runs["run_index"]
    if "dataset_run_index" in runs:
        on_dataset = runs["dataset_run_index"].fillna(runs["run_index"])
    change = runs[POSITION_METRIC] / runs.groupby("cell")[POSITION_METRIC].transform("mean") - 1
    # A position effect is in the first runs after a load; the later ones are one bucket
    # (a dataset shared by many cells, e.g. a tolerance axis, has dozens of positions).
    last = int(on_dataset.max())
    bucket = on_dataset.clip(upper=POSITIONS_SHOWN + 1)
    per_position = change.groupby(bucket).agg(["mean", "size"]).sort_index()

    def label(i: float) -> str:
        if i <= POSITIONS_SHOWN or last == POSITIONS_SHOWN + 1:
            return str(int(i))
        return f"{POSITIONS_SHOWN + 1}-{last}"

    shown = ", ".join(
        f"{label(i)}: {row['mean']:+.1%} ({int(row['size'])} run(s))"
        for i, row in per_position.iterrows()
    )
    lines = [
        f"position check ({POSITION_METRIC} against its cell's mean, by position among the "
        f"runs on its loaded dataset): {shown}"
    ]
    if HARNESS_METRIC in runs:
        first = runs[runs["run_index"] == 1][HARNESS_METRIC].dropna()
        after = runs[runs["run_index"] > 1]
        later = after[HARNESS_METRIC].dropna()
        parts = [f"first run of an application median {first.median():.2f} s"] if len(first) else []
        if len(later):
            parts.append(f"later runs median {later.median():.2f} s, max {later.max():.2f} s")
        if len(later) and CORE_WAIT_METRIC in runs:
            wait = after[CORE_WAIT_METRIC]
            own = (after[HARNESS_METRIC] - wait).dropna()
            if len(own):
                parts.append(
                    f"of a later run, waiting for the machine's cores median "
                    f"{wait.dropna().median():.2f} s (a lower bound) and the harness's own "
                    f"work median {own.median():.2f} s"
                )
        lines.append("harness time per run (charged to no strategy): " + "; ".join(parts))
    return lines


def text_summary(
    cells: pd.DataFrame,
    verdicts: Sequence[tuple[str, VerdictRow]],
    regressions: list[str],
    changes: list[str],
    checks: dict[str, CellCheck] | None = None,
    measured: Sequence[str] = (),
    least: int = 1,
) -> str:
    """The report in plain text (``balancebench report --sweep`` prints it); ``verdicts``:
    (cell group, verdict row) per strategy and figure; ``checks``: per cell label, what
    its regression check compared against; ``measured``: how the runs were measured
    (:func:`measurement_lines`); ``least``: the rounds a cell must have finished."""
    lines = [*measured]
    for heading, part in _sections(cells):
        lines.append(f"{heading}: verdicts against the baseline on the paired rounds")
        for figure, groups in figure_verdicts(part, verdicts):
            lines.append(f"  {figure}:")
            for label, rows in groups:
                lines += [f"    {label}: {r.strategy} vs {r.baseline}: {r.text}" for r in rows]
    short = _short_cells(cells, least)
    lines.append(f"cells with {_short_text(least)} (a run failed): {len(short)}")
    lines += [f"  {label}: {_count(n)} round(s)" for label, n in short]
    lines.append(f"regressions: {len(regressions)} regressed figure(s); {_checked(checks)}")
    lines += [f"  {r}" for r in regressions]
    lines.append(f"changed deterministic figures: {len(changes)}")
    lines += [f"  {c}" for c in changes]
    if checks is not None:
        lines.append("regression check per cell:")
        lines += [f"  {label}: {check.text()}" for label, check in checks.items()]
    return "\n".join(lines)


def _check_rows(
    label: str, run_id: str | None, check: CellCheck, run_url: Callable[[str], str]
) -> list[str]:
    """The rows of one cell in the regression-check table."""
    name = html.escape(label)
    if run_id:
        name = f"<a href='{html.escape(run_url(run_id))}'>{name}</a>"
    if not check.verdicts or not check.earlier_runs:
        return [
            f"<tr><td>{name}</td><td>0</td>"
            f"<td class='text' colspan='8'>{html.escape(check.text())}</td></tr>"
        ]
    out = []
    for i, v in enumerate(check.verdicts):
        cls = " class='regressed'" if v.regressed else ""
        first = (
            f"<td rowspan='{len(check.verdicts)}'>{name}</td>"
            f"<td rowspan='{len(check.verdicts)}'>{check.earlier_runs}</td>"
            if i == 0
            else ""
        )
        runs = ", ".join(
            f"{_num(value)} (<a href='{html.escape(run_url(rid))}'>{html.escape(rid[:8])}</a>)"
            for rid, value in check.last_runs.get(v.metric, ())
        )
        if v.baseline is None:
            cols = [html.escape(v.metric), _num(v.current), "-", "-", "-", "0", "-"]
            verdict = "no history for this figure"
        else:
            assert v.change is not None and v.threshold is not None
            cols = [
                html.escape(v.metric),
                _num(v.current),
                _num(v.baseline),
                f"{v.change:+.1%}",
                f"{v.threshold:.1%}",
                str(v.history_runs),
                runs or "-",
            ]
            verdict = "<span class='flag'>regressed</span>" if v.regressed else "ok"
        tds = "".join(
            f"<td class='text'>{c}</td>" if j in (0, len(cols) - 1) else f"<td>{c}</td>"
            for j, c in enumerate(cols)
        )
        out.append(f"<tr{cls}>{first}{tds}<td class='text'>{verdict}</td></tr>")
    return out


def write_report(
    cells: pd.DataFrame,
    verdicts: Sequence[tuple[str, VerdictRow]],
    regressions: list[str],
    changes: list[str],
    title: str,
    run_url: Any,
    path: Path,
    checks: dict[str, CellCheck] | None = None,
    measured: Sequence[str] = (),
    least: int = 1,
) -> Path:
    """Write the HTML page; ``cells`` has one row per cell (``label``, ``group``,
    ``workload``, ``strategy``, ``zipf_s``, ``n_nodes``, ``tolerance``, ``run_id``,
    ``rounds_finished``, ``regressed`` and the ``<metric>_mean/_std/_ci95_lo/_ci95_hi``
    columns); ``verdicts``: (cell group, verdict row) per strategy and figure;
    ``run_url(run_id)`` links a run; ``checks``: per cell label, what its regression check
    compared against; ``least``: the rounds a cell must have finished."""
    short_text = _short_text(least)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p id='verdict'>{len(regressions)} regressed figure(s): "
        f"{html.escape(_checked(checks))} (per cell under <a href='#check'>Regression "
        f"check</a>). {len(changes)} changed deterministic figure(s).</p>",
        f"<p>Timed figures: mean over a cell's rounds; {CI_DRAWN}; hollow markers: "
        f"{short_text}. Verdicts: each strategy against its cell group's baseline on the "
        "paired rounds (the geometric mean of the per-round ratios and its t interval): "
        "'X% faster [lo, hi]' where the interval excludes no change, 'equivalent within "
        "±m%' where it lies inside the margin, else 'no clear difference' or 'undecided "
        "after n rounds'; X is the change of the figure itself.</p>",
    ]
    if measured:
        parts.append("<ul id='measured'>")
        parts += [f"<li>{html.escape(line)}</li>" for line in measured]
        parts.append("</ul>")
    if regressions or changes:
        parts.append("<ul class='flag' id='regressions'>")
        parts += [f"<li>{html.escape(r)}</li>" for r in [*regressions, *changes]]
        parts.append("</ul>")
    short = _short_cells(cells, least)
    if short:
        parts.append(
            f"<p class='warn' id='few'>{len(short)} cell(s) with {short_text}: a run of "
            "theirs failed; their verdicts use the rounds that finished.</p>"
        )
    metrics = [m for m in TIMED if metric_cols(m)[0] in cells]
    for heading, part in _sections(cells):
        parts.append(f"<h2>{html.escape(heading)}</h2><figure>")
        if metrics:
            png = _figure(part, heading, least)
            parts.append(
                f"<img alt='{html.escape(heading)} figures' src='data:image/png;base64,{png}'>"
            )
        parts.append(
            f"<figcaption>Points: mean over rounds; {CI_DRAWN}; hollow markers: "
            f"{short_text}; strategies offset slightly along zipf_s. Verdicts:<ul>"
        )
        for figure, groups in figure_verdicts(part, verdicts):
            parts.append(f"<li>{html.escape(figure)}<ul>")
            parts += [
                f"<li>{html.escape(label)}: " + "; ".join(_verdict_html(r) for r in rows) + "</li>"
                for label, rows in groups
            ]
            parts.append("</ul></li>")
        parts.append("</ul></figcaption></figure>")
    parts.append("<h2>Cells</h2><table id='cells'><tr><th>cell</th><th>rounds</th>")
    parts += [f"<th>{m}<br>mean [95% interval]</th>" for m in metrics]
    parts.append("</tr>")
    for _, row in cells.iterrows():
        cls = " class='regressed'" if row.get("regressed") else ""
        link = f"<a href='{html.escape(run_url(row['run_id']))}'>{html.escape(row['label'])}</a>"
        rounds = _fmt(row.get(ROUNDS_FINISHED))
        if _short(_rounds(row), least):
            rounds = f"<td class='few'>{rounds} <span class='warn'>{short_text}</span></td>"
        else:
            rounds = f"<td>{rounds}</td>"
        parts.append(f"<tr{cls}><td>{link}</td>{rounds}")
        for m in metrics:
            mean, lo, hi = metric_cols(m)
            shown = interval(m, row[mean], row[lo], row[hi])
            parts.append(f"<td>{html.escape(shown)}</td>")
        parts.append("</tr>")
    parts.append("</table>")
    if checks is not None:
        run_ids = dict(zip(cells["label"], cells["run_id"], strict=False)) if len(cells) else {}
        parts.append(
            "<h2 id='check'>Regression check</h2><p>Per cell and timed figure: tonight's "
            "mean against the baseline (the best rolling worst-of-3 of the cell's last "
            "earlier runs, <code>balancebench.experiment.regression</code>); regressed when "
            "worse by more than the threshold. Earlier runs: the same cell's finished round runs "
            "(same Params) in earlier sweeps.</p>"
            "<table id='history'><tr><th>cell</th><th>earlier runs</th><th>figure</th>"
            "<th>tonight</th><th>baseline</th><th>change (bad direction)</th>"
            "<th>threshold</th><th>earlier values used</th>"
            f"<th>last {SHOWN_RUNS} earlier runs</th><th>verdict</th></tr>"
        )
        for label, check in checks.items():
            parts += _check_rows(label, run_ids.get(label), check, run_url)
        parts.append("</table>")
    parts.append("</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
