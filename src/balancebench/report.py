"""The report page of a sweep: one self-contained HTML file (figures embedded as PNG).

Per workload and node count, each timed headline figure against skew, one line per
strategy (its one colour, ``compare.strategy_color``) with the bootstrap 95% confidence
band over the repetitions; under each figure, its good direction and the winner at each
skew. Then the table of every cell (mean and CI), regressed cells highlighted, each
linked to its MLflow run.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any

import pandas as pd

from balancebench.compare import strategy_color, strategy_order
from balancebench.regression import HIGHER, TIMED

CSS = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.regressed td { background: #fdd; }
.flag { color: #b00; font-weight: bold; }
figure { margin: 1em 0; }
img { max-width: 100%; height: auto; }
figcaption { font-size: 0.9em; }
"""


def metric_cols(metric: str) -> tuple[str, str, str]:
    return f"{metric}_mean", f"{metric}_ci95_lo", f"{metric}_ci95_hi"


def skew_winners(cells: pd.DataFrame, metric: str) -> dict[float, str]:
    """Per skew, the strategy with the best mean (its good direction)."""
    mean = metric_cols(metric)[0]
    out = {}
    for s, group in cells.dropna(subset=[mean]).groupby("zipf_s"):
        best = group[mean].idxmax() if TIMED[metric] == HIGHER else group[mean].idxmin()
        out[float(s)] = str(group.loc[best, "strategy"])
    return out


def winner_lines(part: pd.DataFrame, bold: Any = str) -> list[str]:
    """Per timed figure: its direction and the winner at each skew (``bold`` formats a
    strategy's name)."""
    lines = []
    for metric in TIMED:
        if metric_cols(metric)[0] not in part:
            continue
        won = skew_winners(part, metric)
        best = ", ".join(f"s={s:g}: {bold(w)}" for s, w in sorted(won.items()))
        lines.append(f"{metric} ({TIMED[metric]} is better): winner {best}")
    return lines


def _figure(cells: pd.DataFrame, title: str) -> str:
    """PNG (base64) of every timed headline figure against skew, CI bands shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in TIMED if metric_cols(m)[0] in cells]
    cols = 4
    rows = (len(metrics) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(metrics) :]:
        ax.set_visible(False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        mean, lo, hi = metric_cols(metric)
        for strategy in strategy_order(cells["strategy"].unique().tolist()):
            part = cells[cells["strategy"] == strategy].sort_values("zipf_s")
            color = strategy_color(strategy)
            ax.errorbar(
                part["zipf_s"],
                part[mean],
                yerr=[part[mean] - part[lo], part[hi] - part[mean]],
                marker="o",
                color=color,
                label=strategy,
                capsize=3,
            )
            ax.fill_between(part["zipf_s"], part[lo], part[hi], color=color, alpha=0.2)
        ax.set_title(f"{metric} ({TIMED[metric]} is better)", fontsize=9)
        ax.set_xlabel("zipf_s")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


def text_summary(cells: pd.DataFrame, regressions: list[str], changes: list[str]) -> str:
    """The report in plain text (``balancebench report --sweep`` prints it)."""
    lines = []
    for (workload, n), part in cells.groupby(["workload", "n_nodes"]):
        lines.append(f"{workload}, N = {n}:")
        lines += [f"  {line}" for line in winner_lines(part)]
    lines.append(f"regressions: {len(regressions)}")
    lines += [f"  {r}" for r in regressions]
    lines.append(f"changed deterministic figures: {len(changes)}")
    lines += [f"  {c}" for c in changes]
    return "\n".join(lines)


def write_report(
    cells: pd.DataFrame,
    regressions: list[str],
    changes: list[str],
    title: str,
    run_url: Any,
    path: Path,
) -> Path:
    """Write the HTML page; ``cells`` has one row per cell (``label``, ``workload``,
    ``strategy``, ``zipf_s``, ``n_nodes``, ``run_id``, ``regressed`` and the
    ``<metric>_mean/_std/_ci95_lo/_ci95_hi`` columns); ``run_url(run_id)`` links a run."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p id='verdict'>{len(regressions)} regression(s), {len(changes)} changed "
        "deterministic figure(s). Timed figures: mean over repetitions, bootstrap 95% CI "
        "shaded.</p>",
    ]
    if regressions or changes:
        parts.append("<ul class='flag' id='regressions'>")
        parts += [f"<li>{html.escape(r)}</li>" for r in [*regressions, *changes]]
        parts.append("</ul>")
    for (workload, n), part in cells.groupby(["workload", "n_nodes"]):
        heading = f"{workload}, N = {n}"
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        png = _figure(part, heading)
        parts.append(
            f"<figure><img alt='{html.escape(heading)} figures' src='data:image/png;base64,{png}'>"
        )
        parts.append("<figcaption><ul>")
        parts += [
            f"<li>{line}</li>" for line in winner_lines(part, lambda w: f"<b>{html.escape(w)}</b>")
        ]
        parts.append("</ul></figcaption></figure>")
    metrics = [m for m in TIMED if metric_cols(m)[0] in cells]
    parts.append("<h2>Cells</h2><table id='cells'><tr><th>cell</th><th>reps</th>")
    parts += [f"<th>{m}<br>mean [95% CI]</th>" for m in metrics]
    parts.append("</tr>")
    for _, row in cells.iterrows():
        cls = " class='regressed'" if row.get("regressed") else ""
        link = f"<a href='{html.escape(run_url(row['run_id']))}'>{html.escape(row['label'])}</a>"
        parts.append(f"<tr{cls}><td>{link}</td><td>{_fmt(row.get('repetitions_finished'))}</td>")
        for m in metrics:
            mean, lo, hi = metric_cols(m)
            parts.append(f"<td>{_fmt(row[mean])} [{_fmt(row[lo])}, {_fmt(row[hi])}]</td>")
        parts.append("</tr>")
    parts.append("</table></body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
