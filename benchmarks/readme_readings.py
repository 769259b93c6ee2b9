"""The figure readings of the README and the docs site, recomputed from the committed tables.

    uv run python benchmarks/readme_readings.py           # check (make test runs it)
    uv run python benchmarks/readme_readings.py --write   # rewrite the blocks

Every figure reading (in ``README.md`` and the pages under ``docs/``) is a block between
``<!-- reading: NAME -->`` and ``<!-- /reading -->`` whose text this script writes from
``docs/figures/*.csv`` and ``docs/data/*.csv`` alone: where the numbers come from, how
many rounds they are, the table (mean and Student-t 95% interval over the rounds), the
paper's claims judged one by one, and what the figure is made of. Every comparison is a
verdict of the one statistics function (:func:`balancebench.core.stats.verdict`) on the
figure's rounds (``<figure>.rounds.csv``; a model's ``<figure>.repetitions.csv``): two
strategies at the same point on their paired rounds (a model's repetitions share their
seed at every point, so they pair across points too), two points of one strategy
otherwise on their rounds unpaired; at the per-look level of the rounds' stopping rule
where rounds were added until decided. A claim is reproduced where the verdict says so
("X% faster [lo, hi]"), not reproduced where it says the opposite or "equivalent within
±m%", and "no clear difference" otherwise. Each block appears in exactly one page. The
check fails, naming the block, when a page's text differs from what the tables give (a
number edited by hand, or a table re-made without its reading). A number quoted in prose
from a table is marked ``<!-- quote: TABLE COLUMN key=value ... -->`` before its paragraph
and checked the same way (:func:`check_quotes`); every committed table's bytes are checked
against the digests written with the readings (:func:`check_tables`).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from balancebench.core.stats import (
    DEFAULT_MARGIN,
    HIGHER,
    LOWER,
    Outcome,
    Verdict,
    look_schedule,
    mean_interval,
    verdict,
)
from balancebench.experiment.rounds import COUNT_WORDS
from balancebench.plotting import strategy_order
from balancebench.state.paths import source_root

#: The checkout whose README, docs and tables are read (tests point it elsewhere).
ROOT = source_root()
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """The files that may hold reading blocks: the README and the docs site's pages (not
    its build or its generated reference)."""
    site = [
        p
        for p in sorted(DOCS.rglob("*.md"))
        if "_build" not in p.parts and "generated" not in p.parts
    ]
    return [README, *site]


#: Every committed table's SHA-256, written with the readings (``--write``): a table
#: edited by hand after its readings were rendered fails the check, even in a column no
#: reading shows.
TABLE_DIGESTS = ROOT / "docs" / "data" / "tables.sha256"


def committed_tables() -> list[Path]:
    """The tables the readings are rendered from (``docs/figures``, ``docs/data``) and the
    benchmarks' records the prose quotes (``docs/data/*.txt``)."""
    data = ROOT / "docs" / "data"
    found = [*FIGURES.rglob("*.csv"), *data.glob("*.csv"), *data.glob("*.txt")]
    # An interrupted crossover's point files are git-ignored, not committed tables.
    return sorted(p for p in found if ".points" not in p.name)


def _digests() -> dict[str, str]:
    """Each committed table's SHA-256 by its path from the project."""
    import hashlib

    return {
        p.relative_to(ROOT).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in committed_tables()
    }


def table_digests() -> str:
    """``sha256sum``'s format, one line per committed table, paths from the project."""
    return "".join(f"{digest}  {path}\n" for path, digest in _digests().items())


def check_tables() -> list[str]:
    """The tables whose bytes differ from the digests written with the readings."""
    if not TABLE_DIGESTS.exists():
        return [f"{TABLE_DIGESTS.name}: missing; write it with --write"]
    lines = TABLE_DIGESTS.read_text().splitlines()
    recorded = {path: digest for digest, path in (line.split("  ", 1) for line in lines if line)}
    now = _digests()
    return [
        f"{path}: its bytes are not the ones the readings were rendered from (edited by "
        "hand, or re-made without --write)"
        for path in sorted(set(recorded) | set(now))
        if recorded.get(path) != now.get(path)
    ]


def all_text() -> str:
    """Every page's text, one after another (a block never spans two pages)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in pages())


FIGURES = ROOT / "docs" / "figures"
TIMINGS = ROOT / "docs" / "data" / "paper_figures.csv"
BLOCK = re.compile(r"(<!-- reading: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /reading -->)", re.S)


@dataclass(frozen=True)
class Metric:
    """A plotted figure: its column, what it is in words, its unit scale, its good
    direction, and the words of a verdict's good and bad direction."""

    column: str
    words: str
    scale: float = 1.0
    better: str = LOWER
    moves: tuple[str, str] = ("faster", "slower")


#: The words of a count's verdicts (nodes, tuples): fewer is the good direction.
COUNT = COUNT_WORDS
#: The words of a figure that is neither a time nor a count, lower being good.
LESS = ("lower", "higher")
#: ... and higher being good.
MORE = ("higher", "lower")


def fmt(value: float) -> str:
    """A number as the README prints it (3 significant digits, thousands grouped)."""
    a = abs(value)
    if a == 0:
        return "0"
    if float(value).is_integer():  # counts: nodes, tuples
        return f"{value:,.0f}"
    if a >= 1000:
        return f"{value:,.0f}"
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    if a >= 0.01:
        return f"{value:.3f}"
    return f"{value:.2g}"


#: A number quoted in prose from a committed table: the comment names the table (under
#: docs/), the column and the row (``column=value`` filters), and the paragraph after it
#: must hold the value as the readings print it (:func:`fmt`, or with ``*1000`` scaled
#: and ``%`` as a percentage of one). Prose numbers so marked fail the check when edited
#: by hand or when the table is re-made without the prose.
QUOTE = re.compile(r"<!-- quote: (?P<spec>[^>]*?) -->\n(?=(?P<prose>(?:.+\n)+))")


def quoted_value(spec: str) -> str:
    """The text a ``<!-- quote: TABLE COLUMN [key=value[|value ...] ...] [options] -->``
    stands for. Options: ``*SCALE`` scales the value; ``%`` prints a share as a
    percentage; ``verdict`` reads the change a verdict column states ("24.8% faster
    [...]" -> 24.8) and prints it as a whole percent; ``range`` takes every matching row
    and prints "lo-hi" (with ``verdict``: "13-25%"). Otherwise the one matching row's
    value, printed by :func:`fmt`."""
    words = spec.split()
    if len(words) < 2:
        raise ValueError(f"quote {spec!r}: name a table and a column")
    rows = pd.read_csv(ROOT / "docs" / words[0])
    scale, percent, from_verdict, as_range = 1.0, False, False, False
    for word in words[2:]:
        if word == "%":
            percent = True
        elif word == "verdict":
            from_verdict = True
        elif word == "range":
            as_range = True
        elif word.startswith("*"):
            scale = float(word[1:])
        else:
            key, _, wanted = word.partition("=")
            column = rows[key]
            options = wanted.split("|")
            if pd.api.types.is_numeric_dtype(column):
                rows = rows[column.isin([float(o) for o in options])]
            else:
                rows = rows[column.isin(options)]
    if words[1] not in rows or len(rows) == 0 or (len(rows) > 1 and not as_range):
        raise ValueError(f"quote {spec!r}: {len(rows)} rows match, not one with {words[1]!r}")
    if from_verdict:
        changes = rows[words[1]].astype(str).str.extract(r"^([\d.]+)%", expand=False)
        if changes.isna().any():
            raise ValueError(f"quote {spec!r}: a matching verdict states no change")
        values = changes.astype(float)
        if as_range:
            return f"{values.min():.0f}-{values.max():.0f}%"
        return f"{values.iloc[0]:.0f}%"
    values = rows[words[1]].astype(float) * scale
    if as_range:
        return f"{fmt(values.min())}-{fmt(values.max())}"
    value = float(values.iloc[0])
    return f"{100 * value:.1f}%" if percent else fmt(value)


def check_quotes(text: str) -> list[str]:
    """The quotes whose paragraph does not hold what their table gives."""
    problems = []
    for match in QUOTE.finditer(text):
        spec = match["spec"]
        try:
            value = quoted_value(spec)
        except (OSError, KeyError, ValueError) as exc:
            problems.append(f"quote {spec}: cannot be read ({exc})")
            continue
        if value not in match["prose"]:
            problems.append(f"quote {spec}: the paragraph does not say {value}")
    return problems


#: Numbers a benchmark printed, quoted in prose: ``<!-- printed: RECORD [RECORD ...] -->``
#: names records under docs/ (``data/NAME.txt``, written by ``benchmarks/record.py``: the
#: command, its date and commit, and what it printed), and the paragraph after it may hold
#: no number that none of them prints. A number edited by hand in such a paragraph fails
#: the check; a record edited by hand fails :func:`check_tables`.
PRINTED = re.compile(r"<!-- printed: (?P<records>[^>]*?) -->\n(?=(?P<prose>(?:.+\n)+))")
#: A number as prose and records write it: "4,500,000", "0.073", "1e6", "15.3" of "15.3%".
#: Not part of a word or a name ("p99", "b0", "N8"), of a path or of a version ("3.11.2").
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.]?\d)")
#: What in a paragraph is not prose: inline code, a link's target, a comment.
#: Dates, a citation's year ("ISMM 2013") and references (paper 000, issue 44, Fig. 3(a),
#: Table 1, Algorithm 4, line 15, §5, step 5, commit 11cdd75) hold digits that are no
#: measurement either.
NOT_PROSE = re.compile(
    r"`[^`]*`|\]\([^)]*\)|<!--.*?-->|\b\d{4}-\d{2}-\d{2}\b|(?<=[A-Za-z.] )(?:19|20)\d\d\b"
    r"|(?:\b(?:[Pp]apers?|[Ii]ssues?|Figs?\.|Tables?|Algorithms?|lines?|step|commit)\s|§)"
    r"\d[\w()]*"
    r"(?:(?:-|, | and )\d[\w()]*)*",
    re.S,
)


def number_value(written: str) -> float:
    """A number as written ("4,500,000", "1e6") as its value (thousands commas dropped)."""
    return float(written.replace(",", ""))


def numbers(text: str) -> set[float]:
    """The values of the numbers in ``text``."""
    return {number_value(m.group()) for m in NUMBER.finditer(text)}


def prose_numbers(paragraph: str) -> list[str]:
    """The numbers a paragraph's prose states, as written, in order."""
    return [m.group() for m in NUMBER.finditer(NOT_PROSE.sub(" ", paragraph))]


def check_printed(text: str) -> list[str]:
    """The printed-marked paragraphs that state a number their records do not print."""
    problems = []
    for match in PRINTED.finditer(text):
        names = match["records"].split()
        printed: set[float] = set()
        for name in names:
            record = ROOT / "docs" / name
            if record.suffix != ".txt" or record.parent != ROOT / "docs" / "data":
                problems.append(f"printed {name}: a record is docs/data/NAME.txt")
            elif not record.exists():
                problems.append(f"printed {name}: no such record")
            else:
                printed |= numbers(record.read_text(encoding="utf-8"))
        stray = [n for n in prose_numbers(match["prose"]) if number_value(n) not in printed]
        if stray:
            first = match["prose"].splitlines()[0][:60]
            problems.append(
                f"printed {' '.join(names)}: the paragraph at {first!r} states "
                f"{', '.join(stray)}, which the record does not print"
            )
    return problems


#: A paragraph whose numbers are no measurement (settings, a paper's own claims, figure
#: and issue numbers): ``<!-- not measured -->`` before it says so, for the reviewer.
NOT_MEASURED = "<!-- not measured -->"
#: The one page whose numbers are a dated record, not checked: what earlier engines
#: measured and what was tried and not kept.
HISTORY = DOCS / "history.md"


def paragraphs(text: str) -> list[tuple[str, str]]:
    """``(marker, paragraph)`` for each paragraph of a page outside its reading blocks and
    fenced code: the marker is the comment line right before it, or ""."""
    text = BLOCK.sub("", text)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    found, marker = [], ""
    for chunk in re.split(r"\n\s*\n", text):
        lines = chunk.strip("\n").splitlines()
        while lines and re.fullmatch(r"<!--.*-->", lines[0].strip()):
            marker = lines.pop(0).strip()
        if lines:
            found.append((marker, "\n".join(lines)))
            marker = ""
    return found


def check_numbers_traced(checked: Sequence[Path] | None = None) -> list[str]:
    """The paragraphs that state a number with nothing tracing it: on every page but the
    history (or on ``checked``), a paragraph with a number outside code, links, dates and
    references is a reading block, or comes after a quote, a printed record or the mark
    ``<!-- not measured -->``."""
    problems = []
    for page in checked if checked is not None else [p for p in pages() if p != HISTORY]:
        for marker, paragraph in paragraphs(page.read_text(encoding="utf-8")):
            if marker.startswith(("<!-- quote:", "<!-- printed:", NOT_MEASURED)):
                continue
            if paragraph.lstrip().startswith(("#", "![", "```{")):
                continue
            if found := prose_numbers(paragraph):
                problems.append(
                    f"{page.relative_to(ROOT)}: the paragraph at "
                    f"{paragraph.splitlines()[0][:60]!r} states {', '.join(found[:4])} with "
                    "no reading, quote, printed record or 'not measured' mark"
                )
    return problems


@dataclass(frozen=True)
class Design:
    """How a table's runs were made, as the verdicts need it: the equivalence margin,
    the looks of the rounds' stopping rule (None: a fixed number of rounds), and whether
    the rounds pair across points (a model's seeds) or only within one."""

    margin: float = DEFAULT_MARGIN
    looks: tuple[int, int] | None = None
    paired_across_x: bool = False

    @classmethod
    def of(cls, table: pd.DataFrame, paired_across_x: bool = False) -> Design:
        """The design a rounds table records (``min_rounds``, ``max_rounds``,
        ``equivalence_margin`` columns), the defaults where it records none."""
        margin = DEFAULT_MARGIN
        looks = None
        if "equivalence_margin" in table:
            margin = float(table["equivalence_margin"].iloc[0])
        if {"min_rounds", "max_rounds"} <= set(table.columns):
            first, last = int(table["min_rounds"].iloc[0]), int(table["max_rounds"].iloc[0])
            looks = look_schedule(first, last)
        return cls(margin, looks, paired_across_x)


class Series:
    """One metric of one figure: per (line, x) its value in each round (scaled)."""

    def __init__(
        self, table: pd.DataFrame, x: str, metric: Metric, round_column: str, design: Design
    ) -> None:
        self.x, self.metric, self.design = x, metric, design
        c = metric.column
        self.rows: dict[tuple[str, float], dict[int, float]] = {}
        for _, r in table.iterrows():
            value = r.get(c)
            if value is None or value != value:
                continue
            key = (str(r["strategy"]), float(r[x]))
            self.rows.setdefault(key, {})[int(r[round_column])] = float(value) / metric.scale
        if not self.rows:
            raise KeyError(c)
        self.xs = sorted({x for _, x in self.rows})
        self.strategies = strategy_order(list(dict.fromkeys(s for s, _ in self.rows)))

    def values(self, point: tuple[str, float]) -> list[float]:
        return [v for _, v in sorted(self.rows[point].items())]

    def mean(self, strategy: str, x: float) -> float:
        return float(np.mean(self.values((strategy, x))))

    def same_every_round(self, point: tuple[str, float]) -> bool:
        values = self.values(point)
        return bool(np.isclose(min(values), max(values), rtol=1e-9, atol=0))

    def verdict(self, p: tuple[str, float], q: tuple[str, float]) -> Verdict:
        """Point ``p`` against point ``q`` (the baseline): on their paired rounds where
        they pair (the same x, or a design that pairs across x), else unpaired."""
        paired = p[1] == q[1] or self.design.paired_across_x
        mine, theirs = self.rows[p], self.rows[q]
        if paired:
            common = sorted(set(mine) & set(theirs))
            base, other = [theirs[r] for r in common], [mine[r] for r in common]
        else:
            base, other = self.values(q), self.values(p)
        return verdict(
            base,
            other,
            self.metric.better,
            paired=paired,
            margin=self.design.margin,
            looks=self.design.looks,
            exhausted=True,
        )

    def compare(self, p: tuple[str, float], q: tuple[str, float]) -> tuple[str, Verdict]:
        """Whether point ``p`` is better than point ``q``: "yes", "no" (worse), "equal"
        (equivalent within the margin) or "unclear", and the verdict that says so."""
        v = self.verdict(p, q)
        outcome = {
            Outcome.FASTER: "yes",
            Outcome.SLOWER: "no",
            Outcome.EQUIVALENT: "equal",
        }.get(v.outcome, "unclear")
        return outcome, v

    def said(self, v: Verdict) -> str:
        return v.text(self.metric.moves)

    def cell(self, strategy: str, x: float) -> str:
        m = mean_interval(self.values((strategy, x)))
        if m.n < 2 or fmt(m.lo) == fmt(m.hi):  # no spread at the printed precision
            return fmt(m.mean)
        if m.lo < 0 <= m.mean:  # a time, a rate or a count below 0 is no answer
            return f"{fmt(m.mean)} (n too small for an interval)"
        return f"{fmt(m.mean)} [{fmt(m.lo)}, {fmt(m.hi)}]"


#: The x axes' symbols in the readings.
AXIS = {"zipf_s": "z", "tolerance": "tolerance"}


def label(line: str) -> str:
    """A table row's name: a strategy in code font, a derived line (``p = 4``) as is."""
    return line if " " in line else f"`{line}`"


def x_text(x: str, value: float) -> str:
    return f"{AXIS.get(x, x)} = {value:g}"


def point_prefix(s: Series, x: float) -> str:
    """The point a verdict is at, as a prefix ("z = 0.4: "); none for a one-point figure."""
    return "" if s.x == "point" else f"{x_text(s.x, x)}: "


def headline(outcomes: Sequence[str]) -> str:
    """The word of a claim judged at several points from their outcomes ("yes", "no",
    "equal", "unclear")."""
    if outcomes and all(o == "yes" for o in outcomes):
        return "**reproduced**"
    if "yes" in outcomes:
        return "**partly reproduced**"
    if "no" in outcomes or "equal" in outcomes:
        return "**not reproduced**"
    return "**no clear difference**"


def combined(kinds: Sequence[str]) -> str:
    """One point's outcome against several others: "yes" if better than every one, "no"
    if one is decided better, "equal" if each is decided worse or equivalent with at least
    one equivalent (tied for best, so not the best), else "unclear"."""
    if kinds and all(k == "yes" for k in kinds):
        return "yes"
    if "no" in kinds:
        return "no"
    if kinds and all(k in ("yes", "equal") for k in kinds):
        return "equal"
    return "unclear"


# ---- claims: each returns its verdict in words from a Series ----------------------------

Claim = tuple[str, Callable[[Series], str]]


def _among(strategy: str, others: Sequence[str], at: Sequence[float] | None, best: bool):
    """``strategy`` better (``best``) or worse than each of ``others`` at each x: per x,
    "yes" if against every one, "no" if one is decided the other way, "equal" if all
    are equivalent, else "unclear"; the verdicts listed per x."""

    def judge(s: Series) -> str:
        outcomes, details = [], []
        for x in at or s.xs:
            there = [o for o in others if (o, x) in s.rows and (strategy, x) in s.rows]
            if not there:
                continue
            found = {
                o: s.compare((strategy, x), (o, x)) if best else s.compare((o, x), (strategy, x))
                for o in there
            }
            outcomes.append(combined([k for k, _ in found.values()]))
            # against each other strategy: strategy's verdict (best) or theirs (worst)
            listed = ", ".join(f"`{o}` {s.said(v)}" for o, (_, v) in found.items())
            details.append(f"{point_prefix(s, x)}{listed}")
        who = f"`{strategy}` against each:" if best else f"each against `{strategy}`:"
        return f"{headline(outcomes)} ({who} " + "; ".join(details) + ")"

    return judge


def best_among(strategy: str, others: Sequence[str], at: Sequence[float] | None = None) -> Callable:
    """``strategy`` better than every one of ``others``, at each x of ``at``."""
    return _among(strategy, others, at, best=True)


def worst_among(
    strategy: str, others: Sequence[str], at: Sequence[float] | None = None
) -> Callable:
    """``strategy`` worse than every one of ``others``, at each x of ``at`` (each of them
    judged against it: "faster" there means better than ``strategy``)."""
    return _among(strategy, others, at, best=False)


def better_than(a: str, b: str) -> Callable:
    """``a`` better than ``b`` at each x (``a``'s verdict against ``b``)."""

    def judge(s: Series) -> str:
        found = {x: s.compare((a, x), (b, x)) for x in s.xs if (a, x) in s.rows}
        details = "; ".join(f"{point_prefix(s, x)}{s.said(v)}" for x, (_, v) in found.items())
        return f"{headline([o for o, _ in found.values()])} ({details})"

    return judge


def _change(strategy: str, start: float | None, end: float | None, up: bool) -> Callable:
    """The metric of ``strategy`` higher (``up``) or lower at ``end`` than at ``start`` (the
    first and last x by default): its rounds at ``end`` against those at ``start``."""

    def judge(s: Series) -> str:
        x0, x1 = start if start is not None else s.xs[0], end if end is not None else s.xs[-1]
        v = s.verdict((strategy, x1), (strategy, x0))
        span = (
            f"{fmt(s.mean(strategy, x0))} at {x_text(s.x, x0)}, "
            f"{fmt(s.mean(strategy, x1))} at {x1:g}: {_signed(v)}"
        )
        rose = (v.outcome is Outcome.SLOWER) == (s.metric.better == LOWER)
        if v.outcome in (Outcome.FASTER, Outcome.SLOWER):
            return f"**reproduced** ({span})" if rose == up else f"**the opposite** ({span})"
        if v.outcome is Outcome.EQUIVALENT:
            return f"**not reproduced** (the same within ±{v.margin * 100:g}%: {span})"
        return f"**no clear difference** ({span})"

    return judge


def _signed(v: Verdict) -> str:
    """The figure's change from the first point to the second, signed, with its interval."""
    if v.ratio is None:
        return v.text(("lower", "higher")) if v.outcome is not Outcome.NO_RATIO else v.text()
    r = v.ratio
    return f"{(r.estimate - 1) * 100:+.1f}% [{(r.lo - 1) * 100:+.1f}%, {(r.hi - 1) * 100:+.1f}%]"


def grows(strategy: str, start: float | None = None, end: float | None = None) -> Callable:
    """Higher at ``end`` than at ``start``."""
    return _change(strategy, start, end, up=True)


def falls(strategy: str, start: float | None = None, end: float | None = None) -> Callable:
    """Higher at ``start`` than at ``end``."""
    return _change(strategy, start, end, up=False)


def not_worse(a: str, b: str) -> Callable:
    """``a`` is not worse than ``b`` at any x: reproduced where at every x ``a`` is
    decided better or equivalent within the margin; not reproduced where it is decided
    worse at one; else no clear difference (an interval that reaches beyond the margin on
    the worse side shows no "no later than")."""

    def judge(s: Series) -> str:
        found = {x: s.compare((a, x), (b, x)) for x in s.xs if (a, x) in s.rows}
        details = "; ".join(f"{point_prefix(s, x)}{s.said(v)}" for x, (_, v) in found.items())
        if any(o == "no" for o, _ in found.values()):
            return f"**not reproduced** ({details})"
        if all(o in ("yes", "equal") for o, _ in found.values()):
            return f"**reproduced** ({details})"
        return f"**no clear difference** ({details})"

    return judge


def flat(strategy: str) -> Callable:
    """The same at every x: every two x equivalent within the margin (reproduced); any
    two apart (not reproduced); else no clear difference."""

    def judge(s: Series) -> str:
        xs = [x for x in s.xs if (strategy, x) in s.rows]
        means = [s.mean(strategy, x) for x in xs]
        span = f"{fmt(min(means))}-{fmt(max(means))}"
        pairs = [(a, b) for i, a in enumerate(xs) for b in xs[i + 1 :]]
        found = {(a, b): s.compare((strategy, b), (strategy, a)) for a, b in pairs}
        apart = [(a, b, v) for (a, b), (o, v) in found.items() if o in ("yes", "no")]
        axis = AXIS.get(s.x, s.x)
        within = f"±{s.design.margin * 100:g}%"
        if all(o == "equal" for o, _ in found.values()):
            if fmt(min(means)) == fmt(max(means)):
                return f"**reproduced** ({fmt(means[0])} at every {axis})"
            return f"**reproduced** ({span}, every two {axis} equivalent within {within})"
        if apart:
            a, b, v = max(
                apart, key=lambda t: abs(math.log(t[2].ratio.estimate)) if t[2].ratio else math.inf
            )
            return f"**not reproduced** ({span}; {axis} = {b:g} against {a:g}: {_signed(v)})"
        return f"**no clear difference** ({span}: no two {axis} apart, not all within {within})"

    return judge


# ---- the readings -----------------------------------------------------------------------

PAPER_COMPETITORS = ["qmmp", "mnrt", "dynamic", "bi", "bi6"]
SKEW_CLAIMS: list[Claim] = [
    (
        "MNRT faster than Dynamic, Bi and Bi6 at low skew (z = 0.4)",
        lambda s: best_among("mnrt", ["dynamic", "bi", "bi6"], [0.4])(s),
    ),
    (
        "QMMP faster than Dynamic, Bi and Bi6 at low skew (z = 0.4)",
        lambda s: best_among("qmmp", ["dynamic", "bi", "bi6"], [0.4])(s),
    ),
    ("QMMP's time grows with skew (z = 0.4 -> 1.5)", lambda s: grows("qmmp")(s)),
    ("Bi6 slows at z = 1.5 (against z = 1.2)", lambda s: grows("bi6", 1.2, 1.5)(s)),
    (
        "Bi the slowest of the paper's strategies",
        lambda s: worst_among("bi", ["qmmp", "mnrt", "dynamic", "bi6"])(s),
    ),
    ("Dynamic flat in skew", lambda s: flat("dynamic")(s)),
]
RECEIVED_CLAIMS: list[Claim] = [
    ("Dynamic flat in skew", lambda s: flat("dynamic")(s)),
    (
        "MNRT receives the fewest tuples per node (of the paper's strategies)",
        lambda s: best_among("mnrt", ["qmmp", "dynamic", "bi", "bi6"])(s),
    ),
    ("QMMP's splits add broadcast as skew grows (z = 0.4 -> 1.5)", lambda s: grows("qmmp")(s)),
    ("Bi6 worse as skew grows (z = 0.4 -> 1.5)", lambda s: grows("bi6")(s)),
    ("Bi the same at every skew", lambda s: flat("bi")(s)),
    ("Bi receives the most", lambda s: worst_among("bi", ["qmmp", "mnrt", "dynamic", "bi6"])(s)),
]


@dataclass(frozen=True)
class Reading:
    """One figure's reading: its rounds table, the metrics shown and the claims judged."""

    #: The table of every round (or a model's repetition) of every point.
    table: str
    #: The x axis (a column), or None for a table of one point per strategy.
    x: str | None
    metrics: tuple[Metric, ...]
    #: (metric column, claim, judge) per claim
    claims: tuple[tuple[str, str, Callable[[Series], str]], ...]
    command: str
    #: The figure's components table (``.components.csv``), shown at the ends of x.
    components: str | None = None
    #: The column that numbers a point's rounds (a model's: its repetitions).
    round_column: str = "round"
    #: Whether the rounds pair across points (a model's repetitions share their seed).
    paired_across_x: bool = False
    #: Rows to read and how they are named (the ``strategy`` column), when not as stored.
    prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    #: A sentence on how the rounds differ (the models' seeds, a dataset, ...).
    note: str = ""


def paper000(
    key: str, metrics: tuple[Metric, ...], claims, x: str = "zipf_s", components: bool = True
) -> Reading:
    return Reading(
        f"paper000-fig{key}.rounds.csv",
        x,
        metrics,
        tuple(claims),
        f"balancebench figure {key} (make paper-figures)",
        f"paper000-fig{key}.components.csv" if components else None,
        note="Every round runs on the sweep's one dataset (seed 42) per skew.",
    )


def model(name: str, x: str | None, metrics, claims, prepare=None, note: str = "") -> Reading:
    return Reading(
        f"{name}.repetitions.csv",
        x,
        tuple(metrics),
        tuple(claims),
        f"uv run python benchmarks/paper_figures.py --only {name}",
        round_column="repetition",
        paired_across_x=True,
        prepare=prepare,
        note=note,
    )


CHARGED = Metric("charged_s_total", "processing time, s (everything charged)")
RECEIVED = Metric(
    "avg_received_tuples_per_node_total",
    "tuples received per node (mean over nodes)",
    moves=COUNT,
)
READINGS: dict[str, Reading] = {
    "000-3a": paper000("3a", (CHARGED,), [(CHARGED.column, c, j) for c, j in SKEW_CLAIMS]),
    "000-3b": paper000("3b", (CHARGED,), [(CHARGED.column, c, j) for c, j in SKEW_CLAIMS]),
    "000-6a": paper000(
        "6a", (RECEIVED,), [(RECEIVED.column, c, j) for c, j in RECEIVED_CLAIMS], components=False
    ),
    "000-6b": paper000(
        "6b", (RECEIVED,), [(RECEIVED.column, c, j) for c, j in RECEIVED_CLAIMS], components=False
    ),
    "000-4-5": paper000(
        "4-5",
        (
            Metric("nodes_used_max", "nodes used at the end of loading", moves=COUNT),
            Metric("scale_out_adjustment_s_total", "balance-adjustment time, s"),
        ),
        [
            (
                "nodes_used_max",
                "Dynamic uses the most nodes",
                worst_among("dynamic", ["qmmp", "mnrt", "bi", "bi6"]),
            ),
            (
                "nodes_used_max",
                "MNRT uses fewer nodes than Dynamic",
                better_than("mnrt", "dynamic"),
            ),
            (
                "nodes_used_max",
                "QMMP uses fewer nodes than Dynamic",
                better_than("qmmp", "dynamic"),
            ),
            ("nodes_used_max", "Bi uses fewer nodes than Dynamic", better_than("bi", "dynamic")),
            ("nodes_used_max", "Bi6 uses fewer nodes than Dynamic", better_than("bi6", "dynamic")),
            (
                "scale_out_adjustment_s_total",
                "Dynamic's adjustment the slowest of the paper's strategies",
                worst_among("dynamic", ["qmmp", "mnrt", "bi", "bi6"]),
            ),
            (
                "scale_out_adjustment_s_total",
                "QMMP adjusts faster than MNRT",
                better_than("qmmp", "mnrt"),
            ),
            (
                "scale_out_adjustment_s_total",
                "Bi scales out most easily (the fastest adjustment)",
                best_among("bi", ["qmmp", "mnrt", "dynamic"]),
            ),
        ],
        components=False,
    ),
    "000-7": paper000(
        "7",
        (Metric("plan_time_ms_mean", "plan time, ms (mean per plan)"),),
        [
            (
                "plan_time_ms_mean",
                "Readj the slowest planner at every tolerance",
                worst_among("readj", ["qmmp", "mnrt"]),
            ),
            (
                "plan_time_ms_mean",
                "Readj slower the stricter the tolerance (0.4 -> 0.02)",
                falls("readj"),
            ),
            ("plan_time_ms_mean", "QMMP faster than MNRT", better_than("qmmp", "mnrt")),
        ],
        x="tolerance",
        components=False,
    ),
    "000-8": paper000(
        "8",
        (
            Metric(
                "capacity_tuples_per_s", "capacity, M tuples/s (everything charged)", 1e6, HIGHER
            ),
            Metric("throughput_tuples_per_s", "delivered throughput, M tuples/s", 1e6, HIGHER),
            Metric("latency_p99_s", "latency p99, s"),
        ),
        [
            (
                "capacity_tuples_per_s",
                "QMMP's merges lower its capacity below MNRT's",
                better_than("mnrt", "qmmp"),
            ),
            (
                "capacity_tuples_per_s",
                "Readj's plan time lowers its capacity below MNRT's",
                better_than("mnrt", "readj"),
            ),
            (
                "capacity_tuples_per_s",
                "Readj's capacity below QMMP's",
                better_than("qmmp", "readj"),
            ),
        ],
    ),
}


def _eps_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Paper 002 Fig. 5: the adaptive strategy's rows, one line per parallelism."""
    rows = table[table["strategy"] == "adaptive"].copy()
    rows["strategy"] = [f"p = {p}" for p in rows["parallelism"]]
    return rows


def _weights_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Paper 003 Table 1: one line per (beta, BWn normalisation), alpha on x."""
    rows = table.copy()
    rows["strategy"] = [
        f"beta = {b:g}, BWn {'/ max' if n == 'max' else 'min-max'}"
        for b, n in zip(rows["beta"], rows["bw_normalisation"], strict=True)
    ]
    return rows


def _eps_best(at: float) -> Callable[[Series], str]:
    """eps = ``at`` more efficient than every other eps, per parallelism (paired: the
    model's repetitions share their seed at every point)."""

    def judge(s: Series) -> str:
        outcomes, details = [], []
        for line in s.strategies:
            if (line, at) not in s.rows:
                continue
            found = [
                s.compare((line, at), (line, other))
                for other in s.xs
                if other != at and (line, other) in s.rows
            ]
            kinds = [k for k, _ in found]
            outcomes.append(combined(kinds))
            beaten = sum(k == "no" for k in kinds)
            ahead = sum(k == "yes" for k in kinds)
            details.append(f"{line}: better than {ahead} of {len(kinds)}, worse than {beaten}")
        return f"{headline(outcomes)} ({'; '.join(details)})"

    return judge


def _point_best(line: str, x: float) -> Callable[[Series], str]:
    """The point (``line``, ``x``) better than every other point of the table (paired:
    the model's repetitions share their seed at every point)."""

    def judge(s: Series) -> str:
        me = (line, x)
        others = [k for k in s.rows if k != me]
        found = [s.compare(me, k)[0] for k in others]
        ahead, beaten = found.count("yes"), found.count("no")
        mine = fmt(s.mean(*me))
        if ahead == len(others):
            return f"**reproduced** ({mine}, better than every other point)"
        return (
            f"**not reproduced** ({mine}: better than {ahead} of {len(others)} points, "
            f"worse than {beaten}, equivalent to {found.count('equal')}, no clear difference "
            f"from {found.count('unclear')})"
        )

    return judge


MODEL_SEEDS = "Each repetition has its own seed (the same for every strategy)."
BACKPRESSURE_SEEDS = (
    "Service times are exponential, each repetition its own seed, on the one generated "
    "packet trace."
)
READINGS["scheduling_p8"] = model(
    "scheduling_p8",
    None,
    [
        Metric("job_runtime_s", "job runtime, s"),
        Metric("runtime_over_optimum", "runtime / brute-force optimum", moves=LESS),
        Metric("latency_p99_s", "latency p99, s"),
        Metric("plan_time_ms", "plan time, ms"),
    ],
    [
        (
            "job_runtime_s",
            "SWPTS shortens the job against round robin",
            better_than("swpts", "round_robin"),
        ),
        (
            "job_runtime_s",
            "ACTS shortens the job against round robin",
            better_than("acts", "round_robin"),
        ),
        (
            "job_runtime_s",
            "ACTS shortens the job against SWPTS",
            better_than("acts", "swpts"),
        ),
    ],
    note=MODEL_SEEDS,
)
READINGS["scheduling_p16"] = model(
    "scheduling_p16",
    None,
    READINGS["scheduling_p8"].metrics,
    READINGS["scheduling_p8"].claims,
    note=MODEL_SEEDS,
)
READINGS["scheduling_eps"] = model(
    "scheduling_eps",
    "eps",
    [
        Metric(
            "efficiency_share",
            "`adaptive` efficiency (ideal runtime / job runtime)",
            better=HIGHER,
            moves=MORE,
        )
    ],
    [("efficiency_share", "80% the most efficient switch threshold", _eps_best(0.8))],
    prepare=_eps_rows,
    note=MODEL_SEEDS,
)
for _name in ("elastic_mean_shift", "elastic_sigma_shrink"):
    READINGS[_name] = model(
        _name,
        None,
        [
            Metric(
                "utilization_std_mean",
                "utilisation spread across nodes (std, mean over time)",
                moves=LESS,
            ),
            Metric("utilization_mean_mean", "utilisation, mean", better=HIGHER, moves=MORE),
            Metric("latency_p99_s", "latency p99, s"),
        ],
        [
            (
                "utilization_std_mean",
                "BalanceLoad lowers the utilisation spread against static",
                better_than("elastic_balanceload", "elastic_static"),
            ),
            (
                "utilization_std_mean",
                "BalanceLoad lowers the utilisation spread against scaling alone",
                better_than("elastic_balanceload", "elastic_scaling"),
            ),
        ],
        note=MODEL_SEEDS,
    )
READINGS["backpressure_volume"] = model(
    "backpressure_volume",
    "total_mb",
    [
        Metric("completion_time_s", "completion time, simulated s"),
        Metric("latency_p99_s", "latency p99, simulated s"),
    ],
    [
        (
            "completion_time_s",
            "migration completes sooner than credit-based flow control",
            better_than("migration", "credit"),
        ),
        (
            "latency_p99_s",
            "migration's p99 latency below credit's",
            better_than("migration", "credit"),
        ),
    ],
    note=BACKPRESSURE_SEEDS,
)
READINGS["backpressure_alpha_beta"] = model(
    "backpressure_alpha_beta",
    "alpha",
    [Metric("completion_time_s", "completion time, simulated s (migration, 5 GB)")],
    [
        (
            "completion_time_s",
            "(alpha, beta) = (0.3, 0.5) the best weights, BWn = BW / max",
            _point_best("beta = 0.5, BWn / max", 0.3),
        ),
        (
            "completion_time_s",
            "(alpha, beta) = (0.3, 0.5) the best weights, BWn min-max",
            _point_best("beta = 0.5, BWn min-max", 0.3),
        ),
    ],
    prepare=_weights_rows,
    note=BACKPRESSURE_SEEDS,
)


def _recovery_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The recovery rules as the lines, the volume on x."""
    return table.assign(strategy=table["recovery_rule"])


READINGS["backpressure_recovery_rules"] = model(
    "backpressure_recovery_rules",
    "total_mb",
    [
        Metric("completion_time_s", "completion time, simulated s (migration)"),
        Metric("latency_p99_s", "latency p99, simulated s"),
        Metric("recoveries", "recoveries (count)", moves=COUNT),
    ],
    [
        (
            "completion_time_s",
            "the paper's step 5 (`any_listed`) completes no later than `all_listed`",
            not_worse("any_listed", "all_listed"),
        ),
        (
            "completion_time_s",
            "`any_listed` completes no later than `per_node`",
            not_worse("any_listed", "per_node"),
        ),
    ],
    prepare=_recovery_rows,
    note=BACKPRESSURE_SEEDS,
)
READINGS["001-6-7"] = Reading(
    "paper001-fig6-7.rounds.csv",
    "n_nodes",
    (
        Metric("capacity_tuples_per_s", "capacity, k tuples/s (everything charged)", 1e3, HIGHER),
        Metric("cpu_s_total", "CPU over senders and nodes, s"),
    ),
    (
        (
            "capacity_tuples_per_s",
            "operator-set parallelism reaches a higher capacity than query parallelism",
            better_than("operator_set", "query_parallel"),
        ),
        (
            "capacity_tuples_per_s",
            "operator-set parallelism reaches a higher capacity than operator parallelism",
            better_than("operator_set", "operator_parallel"),
        ),
        (
            "cpu_s_total",
            "operator-set parallelism costs less CPU than query parallelism",
            better_than("operator_set", "query_parallel"),
        ),
        (
            "cpu_s_total",
            "operator-set parallelism costs less CPU than operator parallelism",
            better_than("operator_set", "operator_parallel"),
        ),
    ),
    "uv run python benchmarks/parallelization.py --figure",
    note="The rounds share one dataset (seed 42) per N and differ in their timings.",
)
READINGS["overlay_load"] = model(
    "overlay_load",
    "target_load",
    [
        Metric("load_moved_total", "load moved (sum over the run)", moves=LESS),
        Metric("latency_s_mean", "latency, s (mean)"),
        Metric(
            "load_fluctuation_mean",
            "load fluctuation D(VN(i)) (mean over hosts)",
            moves=LESS,
        ),
    ],
    [
        (
            "load_moved_total",
            "the k-ary tree + Hilbert ring moves the least load",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
        (
            "latency_s_mean",
            "the k-ary tree + Hilbert ring has the lowest latency",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
        (
            "load_fluctuation_mean",
            "the k-ary tree + Hilbert ring fluctuates least",
            best_among("ktree_hilbert", ["overlay_random", "borealis"]),
        ),
    ],
    note=MODEL_SEEDS,
)
AXIS.update(
    {"eps": "eps", "total_mb": "MB", "alpha": "alpha", "target_load": "load", "n_nodes": "N"}
)

READINGS_000 = [name for name in READINGS if name.startswith("000-")]

#: What a figure is made of (``.components.csv``), shown at the lowest and highest x.
COMPONENTS = (
    Metric("makespan_s_total", "node service, s"),
    Metric("route_s_total", "routing, s"),
    Metric("migration_s_total", "migration, s"),
    Metric("plan_time_ms_mean", "plan, ms"),
    Metric("imbalance_max_over_mean_mean", "imbalance"),
    Metric("migrated_tuples_total", "tuples moved"),
)


def timing_line(figure: str) -> str:
    rows = pd.read_csv(TIMINGS) if TIMINGS.exists() else pd.DataFrame(columns=["figure"])
    row = rows[rows["figure"] == figure]
    if row.empty:
        return (
            " Made before `docs/data/paper_figures.csv` recorded wall times, by an earlier "
            "executor (the table's git log says when)."
        )
    r = row.iloc[0]
    return (
        f" Made {r['made_utc']} UTC ({r['source_run']}): {int(r['runs'])} runs, "
        f"{float(r['wall_s']) / 60:.0f} min wall."
    )


def rounds_line(reading: Reading, table: pd.DataFrame, design: Design) -> str:
    """How many rounds each point has, how they were run, and what the table shows."""
    keys = ["strategy", reading.x or "point"]
    counts = sorted({int(n) for n in table.groupby(keys)[reading.round_column].nunique()})
    text = "/".join(str(n) for n in counts)
    kind = "repetitions" if reading.round_column == "repetition" else "rounds"
    if counts == [1]:
        return f"1 {kind[:-1]} per point: one sample, no interval. {reading.note}".strip()
    how = (
        f"rounds added from {design.looks[0]} up to {design.looks[1]} until the headline "
        "verdicts were decided (intervals at the stopping rule's per-look level)"
        if design.looks
        else "a fixed number"
    )
    return (
        f"{text} {kind} per point ({how}); mean [Student-t 95% interval]; verdicts on the "
        f"paired {kind} (`balancebench.core.stats`), equivalence within ±{design.margin * 100:g}%. "
        f"{reading.note}"
    ).strip()


def identical(series: Series) -> bool:
    """Whether every point's rounds gave the same value."""
    return all(series.same_every_round(point) for point in series.rows)


ONE_SAMPLE = (
    " (the same in every round: one sample, so a difference is exact for this input "
    "and is not tested across inputs)"
)


def not_made(table: Path, how: str) -> str:
    """A block whose committed table is missing: no verdict, and how to make it."""
    return f"Not made yet, so no verdict (`{table.relative_to(ROOT)}` is missing). {how}\n"


def render(name: str) -> str:
    """The figure's reading from its rounds table, or, when the figure has not been
    re-made in rounds yet, that it has no verdict and how to make it."""
    reading = READINGS[name]
    if not (FIGURES / reading.table).exists():
        return not_made(FIGURES / reading.table, f"Re-make: `{reading.command}`.")
    table = pd.read_csv(FIGURES / reading.table)
    design = Design.of(table, reading.paired_across_x)
    if reading.prepare is not None:
        table = reading.prepare(table)
    x = reading.x or "point"
    if reading.x is None:
        table = table.assign(point=0.0)
    lines = [
        f"Source: `docs/figures/{reading.table}` (`{reading.command}`)."
        + timing_line(name)
        + " "
        + rounds_line(reading, table, design),
        "",
    ]
    series = {m.column: Series(table, x, m, reading.round_column, design) for m in reading.metrics}
    many = table.groupby(["strategy", x])[reading.round_column].nunique().max() > 1
    if reading.x is None:
        names = series[reading.metrics[0].column].strategies
        lines.append("| strategy | " + " | ".join(m.words for m in reading.metrics) + " |")
        lines.append("|---|" + "---:|" * len(reading.metrics))
        for strategy in names:
            cells = [series[m.column].cell(strategy, 0.0) for m in reading.metrics]
            lines.append(f"| {label(strategy)} | " + " | ".join(cells) + " |")
        lines.append("")
        same = [m.words for m in reading.metrics if identical(series[m.column])]
        if same and many:
            lines += [f"The same in every round: {', '.join(same)}.", ""]
    else:
        for m in reading.metrics:
            s = series[m.column]
            lines += [f"{m.words}{ONE_SAMPLE if many and identical(s) else ''}:", ""]
            lines.append("| | " + " | ".join(x_text(x, v) for v in s.xs) + " |")
            lines.append("|---|" + "---:|" * len(s.xs))
            for strategy in s.strategies:
                cells = [s.cell(strategy, v) if (strategy, v) in s.rows else "-" for v in s.xs]
                lines.append(f"| {label(strategy)} | " + " | ".join(cells) + " |")
            lines.append("")
    if reading.claims:
        lines += [
            "The paper's claims, each judged by the verdicts of the one statistics function "
            "(X% faster or slower where the interval excludes no change, equivalent within "
            "the margin, else no clear difference):",
            "",
        ]
        for column, claim, judge in reading.claims:
            lines.append(f"- {claim}: {judge(series[column])}.")
        lines.append("")
    components = FIGURES / reading.components if reading.components else None
    if components is not None and components.exists():
        parts = pd.read_csv(components)
        xs = sorted(parts[reading.x].unique())
        shown = [m for m in COMPONENTS if f"{m.column}_mean" in parts]
        lines += [
            f"What it is made of (`{components.name}`, mean over the rounds) at the "
            f"lowest and the highest {AXIS.get(reading.x, reading.x)}:",
            "",
            f"| strategy | {AXIS.get(reading.x, reading.x)} | "
            + " | ".join(m.words for m in shown)
            + " |",
            "|---|---:|" + "---:|" * len(shown),
        ]
        for strategy in strategy_order(parts["strategy"].unique().tolist()):
            for end in (xs[0], xs[-1]):
                hit = parts[(parts["strategy"] == strategy) & (parts[reading.x] == end)]
                if hit.empty:
                    continue
                row = [fmt(float(hit[f"{m.column}_mean"].iloc[0])) for m in shown]
                lines.append(f"| `{strategy}` | {end:g} | " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


#: Changes that move the engine's numbers (commit, when it landed, what it moves): a
#: figure made before one says so in the figures' table.
ENGINE_CHANGES = ROOT / "docs" / "data" / "engine_changes.csv"


def _engine_figure(figure: str) -> bool:
    """Paper 000's figures and paper 001's Figs. 6-7 run on the engine; the models do not."""
    return figure.startswith("000-") or figure == "001-6-7"


def render_timings() -> str:
    """``docs/data/paper_figures.csv`` as a table: each figure's runs, wall time and commit,
    the engine changes it predates (``docs/data/engine_changes.csv``), and paper 000's
    total."""
    rows = pd.read_csv(TIMINGS, dtype={"commit": str})
    changes = pd.read_csv(ENGINE_CHANGES, dtype=str)
    lines = [
        "Source: `docs/data/paper_figures.csv` (written by `make paper-figures` for each "
        "figure it makes; `commit`: the checkout it was made on; for figures made before "
        "2026-11-29 10:00 UTC, the parent of the commit that added its table) and "
        "`docs/data/engine_changes.csv` (changes that move the engine's numbers).",
        "",
        "| figure | rounds | runs | wall, min | made (UTC) | commit | predates |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for _, r in rows.iterrows():
        runs = str(int(r["runs"])) if int(r["runs"]) else "-"
        later = changes[changes["landed_utc"] > r["made_utc"]]["commit"].tolist()
        predates = ", ".join(later) if _engine_figure(r["figure"]) and later else "-"
        lines.append(
            f"| {r['figure']} | {int(r['rounds'])} | {runs} | "
            f"{float(r['wall_s']) / 60:.1f} | {r['made_utc']} | {str(r['commit'])[:7]} | "
            f"{predates} |"
        )
    lines += ["", "What each change moves:", ""]
    lines += [f"- {c['commit']} ({c['landed_utc']}): {c['moves']}" for _, c in changes.iterrows()]
    paper000 = rows[rows["figure"].str.startswith("000-")]
    lines += [
        "",
        f"Paper 000: {len(paper000)} of {len(READINGS_000)} figures recorded, "
        f"{int(paper000['runs'].sum())} runs, {paper000['wall_s'].sum() / 60:.0f} min wall "
        "in all.",
        "",
    ]
    return "\n".join(lines)


#: ``make run``'s rounds, copied from its ``results/<parent>/rounds.csv``.
DEFAULT_RUN = ROOT / "docs" / "data" / "default_run.rounds.csv"
#: The default run's figures: the four headline ones and what explains them.
DEFAULT_METRICS = (
    Metric("capacity_tuples_per_s", "capacity, M tuples/s", 1e6, HIGHER),
    Metric("makespan_s_total", "node service, s"),
    Metric("route_s_total", "routing, s"),
    Metric("latency_p99_s", "latency p99, s"),
    Metric("imbalance_max_over_mean_mean", "tuple imbalance", moves=LESS),
    Metric("plan_time_ms_mean", "plan time, ms"),
)


def render_default_run() -> str:
    """``make run``'s table (mean [interval] over its rounds) and each strategy's verdicts
    against the baseline on the paired rounds."""
    if not DEFAULT_RUN.exists():
        return not_made(
            DEFAULT_RUN,
            "Record: `make run`, then copy the `rounds.csv` of the results folder it prints "
            f"to `docs/data/{DEFAULT_RUN.name}`.",
        )
    table = pd.read_csv(DEFAULT_RUN).assign(point=0.0)
    design = Design.of(table)
    names = strategy_order(table["strategy"].unique().tolist())
    base = str(table["baseline"].iloc[0])  # the baseline the run used, resolved
    series = {m.column: Series(table, "point", m, "round", design) for m in DEFAULT_METRICS}
    rounds = table.groupby("strategy")["round"].nunique()
    counts = "/".join(str(n) for n in sorted(set(rounds)))
    how = (
        f"rounds added from {design.looks[0]} up to {design.looks[1]} until decided"
        if design.looks
        else "a fixed number of rounds"
    )
    lines = [
        f"Source: `docs/data/{DEFAULT_RUN.name}` (`make run`, parent run "
        f"{str(table['parent_run'].iloc[0])[:8]}): {counts} rounds per strategy ({how}); "
        "mean [Student-t 95% interval].",
        "",
        "| strategy | " + " | ".join(m.words for m in DEFAULT_METRICS) + " |",
        "|---|" + "---:|" * len(DEFAULT_METRICS),
    ]
    for name in names:
        cells = [series[m.column].cell(name, 0.0) for m in DEFAULT_METRICS]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Verdicts against `{base}` on the paired rounds (`balancebench.core.stats`):",
        "",
    ]
    for name in names:
        if name == base:
            continue
        said = []
        for m in DEFAULT_METRICS[:4]:
            s = series[m.column]
            said.append(f"{m.words.split(',')[0]} {s.said(s.verdict((name, 0.0), (base, 0.0)))}")
        lines.append(f"- `{name}`: " + "; ".join(said) + ".")
    return "\n".join([*lines, ""])


CROSSOVER = FIGURES / "crossover.rounds.csv"
CROSSOVER_SETTINGS = FIGURES / "crossover.csv"
#: The one point issue 43's target names (TOPK, s = 1.4, 1M tuples per node), run alone.
CROSSOVER_TARGET = FIGURES / "crossover-target" / "crossover.rounds.csv"
TARGET_COMMAND = (
    "uv run python benchmarks/crossover.py --workloads topk --skews 1.4 --loads 1000000 "
    "--out docs/figures/crossover-target"
)


def render_crossover() -> str:
    """The full crossover's verdicts, or, where its rounds were never run, what its
    committed table is and why it gives no verdict."""
    if not CROSSOVER.exists():
        settings = pd.read_csv(CROSSOVER_SETTINGS)
        runs = int(settings["repetitions"].max()) if "repetitions" in settings else 0
        return (
            "Not re-made in rounds yet: the committed `docs/figures/crossover.csv` and "
            f"`crossover.png` come from an earlier run of {runs} unpaired repetitions per "
            "point, whose [min, max] intervals this project no longer reads as a verdict, "
            "so no verdict is given here from them. Re-make: `make crossover` (about "
            "1.5-3 h on 2 cores). The one point the README's claim rests on was re-run in "
            "rounds alone; its verdicts are below.\n"
        )
    return _render_crossover(CROSSOVER, CROSSOVER_SETTINGS, "`make crossover`")


def render_crossover_target() -> str:
    """The crossover's TOPK, s = 1.4, 1M point, run alone in rounds (or that it has not
    been run)."""
    if not CROSSOVER_TARGET.exists():
        return not_made(CROSSOVER_TARGET, f"Run: `{TARGET_COMMAND}`.")
    return _render_crossover(
        CROSSOVER_TARGET, CROSSOVER_TARGET.with_name("crossover.csv"), f"`{TARGET_COMMAND}`"
    )


def _render_crossover(rounds_path: Path, settings_path: Path, command: str) -> str:
    """The crossover's verdicts: per workload, skew and load per node, every strategy's
    capacity and p99 latency against `hash` on the paired rounds of the point."""
    rounds = pd.read_csv(rounds_path)
    settings = pd.read_csv(settings_path)
    first, last = int(settings["min_rounds"].iloc[0]), int(settings["max_rounds"].iloc[0])
    design = Design(float(settings["margin"].iloc[0]), look_schedule(first, last))
    counts = rounds.groupby(["workload", "zipf_s", "load_per_node"])["round"].nunique()
    lines = [
        f"Source: `{rounds_path.relative_to(ROOT)}` ({command}): "
        f"{counts.min()}-{counts.max()} rounds per point ({first} to {last}, added until "
        "decided or the point's budget ended); each strategy against `hash` on the paired "
        "rounds of its point (`balancebench.core.stats`). Capacity, then p99 latency:",
        "",
    ]
    metrics = [
        Metric("capacity_tuples_per_s", "capacity", better=HIGHER),
        Metric("latency_p99_s", "p99 latency"),
    ]
    names = [n for n in strategy_order(rounds["strategy"].unique().tolist()) if n != "hash"]

    def table(m: Metric) -> list[str]:
        rows = []
        for (workload, skew, load), part in rounds.groupby(["workload", "zipf_s", "load_per_node"]):
            series = Series(part.assign(point=0.0), "point", m, "round", design)
            cells = [
                series.said(series.verdict((n, 0.0), ("hash", 0.0)))
                if (n, 0.0) in series.rows
                else "-"
                for n in names
            ]
            rows.append(f"| {workload} | {skew:g} | {int(load):,} | " + " | ".join(cells) + " |")
        return rows

    def section(words: str, rows: list[str]) -> list[str]:
        header = "| workload | s | tuples per node and batch | "
        header += " | ".join(f"`{n}`" for n in names) + " |"
        return [f"{words}:", "", header, "|---|---:|---:|" + "---|" * len(names), *rows, ""]

    tables = [table(m) for m in metrics]
    for m, rows in zip(metrics, tables, strict=True):
        lines += section(m.words, rows)
    if "capacity_tuples_per_s_cpu_only" in rounds:  # the same runs without the network
        cpu_only = [replace(m, column=m.column + "_cpu_only") for m in metrics]
        cpu_tables = [table(m) for m in cpu_only]
        differ = int(
            (rounds["capacity_tuples_per_s"] != rounds["capacity_tuples_per_s_cpu_only"]).sum()
        )
        lines[0] = lines[0].replace(
            "Capacity, then p99 latency:", "Capacity, then p99 latency, with the links at 1 GbE:"
        )
        if cpu_tables == tables:
            lines += [
                f"Under the CPU-only model (the same runs, no network) every verdict above is "
                f"the same: the capacity of {differ} of {len(rounds)} runs differs from it.",
                "",
            ]
        else:
            for m, rows in zip(cpu_only, cpu_tables, strict=True):
                lines += section(f"{m.words}, CPU only (the same runs, no network)", rows)
    return "\n".join(lines)


#: Blocks that are not a figure's reading.
OTHER_BLOCKS: dict[str, Callable[[], str]] = {
    "paper-figures-wall": render_timings,
    "default-run": render_default_run,
    "crossover": render_crossover,
    "crossover-target": render_crossover_target,
}


def _rendered(name: str) -> tuple[str | None, str]:
    """The block's text, or None and why the tables cannot give it."""
    if name in OTHER_BLOCKS:
        try:
            return OTHER_BLOCKS[name]() + "\n", ""
        except (FileNotFoundError, KeyError) as exc:
            return None, f"cannot be written ({exc!r}); make paper-figures writes its table"
    reading = READINGS[name]
    try:
        return render(name) + "\n", ""
    except (FileNotFoundError, KeyError) as exc:
        return None, f"{reading.table} cannot give it ({exc!r}); re-make: {reading.command}"


def check(text: str) -> list[str]:
    """The blocks of ``text`` that differ from what the tables give (and unknown ones)."""
    problems = []
    seen: dict[str, int] = {}  # name -> blocks of that name
    for match in BLOCK.finditer(text):
        name = match["name"]
        seen[name] = seen.get(name, 0) + 1
        if name not in READINGS and name not in OTHER_BLOCKS:
            allowed = sorted([*READINGS, *OTHER_BLOCKS])
            problems.append(f"{name}: no such reading; allowed: {allowed}")
            continue
        body, why = _rendered(name)
        source = (
            READINGS[name].table
            if name in READINGS
            else DEFAULT_RUN.name
            if name == "default-run"
            else CROSSOVER.name
            if name == "crossover"
            else CROSSOVER_TARGET.name
            if name == "crossover-target"
            else "docs/data/paper_figures.csv"
        )
        if body is None:
            problems.append(f"{name}: {why}")
        elif match["body"] != body:
            problems.append(f"{name}: the page's text is not what {source} gives")
    problems += [f"{name}: more than one block" for name in sorted(seen) if seen[name] > 1]
    problems += [
        f"{name}: no block in the README or docs/"
        for name in [*READINGS, *OTHER_BLOCKS]
        if name not in seen
    ]
    return problems


def write(text: str) -> str:
    """``text`` with every block it can render rewritten (the others left as they are)."""

    def block(match: re.Match) -> str:
        known = match["name"] in READINGS or match["name"] in OTHER_BLOCKS
        body = _rendered(match["name"])[0] if known else None
        return match.group(1) + (body if body is not None else match["body"]) + match.group(4)

    return BLOCK.sub(block, text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pages' blocks")
    args = parser.parse_args()
    if args.write:
        TABLE_DIGESTS.write_text(table_digests(), encoding="utf-8")
        for page in pages():
            text = page.read_text(encoding="utf-8")
            written = write(text)
            if written != text:
                page.write_text(written, encoding="utf-8")
    text = all_text()
    problems = [
        *check(text),
        *check_quotes(text),
        *check_printed(text),
        *check_numbers_traced(),
        *check_tables(),
    ]
    for problem in problems:
        print(f"reading {problem}", file=sys.stderr)
    if problems:
        print("fix: uv run python benchmarks/readme_readings.py --write", file=sys.stderr)
        sys.exit(1)
    print(f"readings: {len(READINGS) + len(OTHER_BLOCKS)} blocks match their tables")


if __name__ == "__main__":
    main()
