"""The README's figure readings against the committed tables (benchmarks/readme_readings.py).

The first test is the check itself: every reading block of the README is exactly what
``docs/figures`` and ``docs/data`` give. The others show that the check and its verdicts
can fail: a number edited by hand is caught, and a claim is called reproduced only where
the CIs are apart.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def readings():
    spec = importlib.util.spec_from_file_location(
        "readme_readings", ROOT / "benchmarks" / "readme_readings.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_readme_reading_is_what_the_committed_tables_give(readings):
    problems = readings.check((ROOT / "README.md").read_text(encoding="utf-8"))
    assert problems == [], "\n".join(
        [*problems, "fix: uv run python benchmarks/readme_readings.py --write"]
    )


def test_a_number_edited_by_hand_is_caught(readings):
    # Given the README with one number of the Fig. 7 reading changed
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("<!-- reading: 000-7 -->")
    end = text.index("<!-- /reading -->", start)
    block = text[start:end]
    cell = block.index("| `readj` |")
    digit = next(i for i in range(cell, len(block)) if block[i].isdigit())
    changed = block[:digit] + str((int(block[digit]) + 1) % 10) + block[digit + 1 :]
    # When it is checked
    problems = readings.check(text[:start] + changed + text[end:])
    # Then exactly that reading is named, beside whatever the unedited README has
    added = set(problems) - set(readings.check(text))
    assert added == {"000-7: the README's text is not what paper000-fig7.csv gives"}


def _series(readings, rows):
    table = pd.DataFrame(rows, columns=["strategy", "zipf_s", "t_mean", "t_ci95_lo", "t_ci95_hi"])
    return readings.Series(table, "zipf_s", readings.Metric("t", "time, s"))


def test_a_claim_is_reproduced_only_where_the_intervals_are_apart(readings):
    s = _series(
        readings,
        [
            ("a", 0.4, 1.0, 0.9, 1.1),
            ("b", 0.4, 2.0, 1.9, 2.1),  # apart: a faster
            ("a", 1.5, 1.0, 0.5, 1.5),
            ("b", 1.5, 1.2, 1.1, 1.3),  # overlapping: no clear difference
        ],
    )
    assert readings.better_than("a", "b")(s) == (
        "**partly reproduced** (reproduced at z = 0.4; no clear difference at z = 1.5)"
    )
    assert readings.better_than("b", "a")(s).startswith("**not reproduced** (")
    assert "the opposite at z = 0.4" in readings.better_than("b", "a")(s)
    # flat: every skew's interval shares a point with every other's
    assert readings.flat("a")(s).startswith("**reproduced**")
    assert readings.flat("b")(s).startswith("**not reproduced**")
    # grows: the last skew's interval above the first's
    assert readings.grows("b")(s).startswith("**the opposite**")
    assert readings.grows("a")(s).startswith("**no clear difference**")
