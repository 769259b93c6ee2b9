"""The figure readings of the README and docs/ against the committed tables
(``benchmarks/readme_readings.py``: a docs tool, outside the package).

The first test is the check itself: every reading block of the pages is exactly what
``docs/figures`` and ``docs/data`` give. The others show that the check and its verdicts
can fail: a number edited by hand is caught, and a claim is called reproduced only where
the one statistics function's verdict on the rounds says so.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def readings():
    return load_benchmark("readme_readings")


def test_every_readme_reading_is_what_the_committed_tables_give(readings):
    problems = readings.check(readings.all_text())
    assert problems == [], "\n".join(
        [*problems, "fix: uv run python benchmarks/readme_readings.py --write"]
    )


def test_every_number_quoted_in_prose_is_what_its_table_gives(readings):
    text = readings.all_text()
    assert readings.QUOTE.search(text), "the pages quote no table"
    assert readings.check_quotes(text) == []


def test_a_number_edited_by_hand_in_prose_is_caught(readings):
    # Given Fig. 8's traced paragraph with pkg's node service at z = 1.5 edited
    text = readings.all_text()
    quoted = readings.quoted_value(
        "figures/paper000-fig8.components.csv makespan_s_total_mean strategy=pkg zipf_s=1.5"
    )
    at = text.index(f"({quoted} s against")
    edited = text[:at] + "(0.100 s against" + text[at + len(quoted) + len(" s against") + 1 :]
    # When the quotes are checked, then exactly that quote is named
    assert readings.check_quotes(edited) == [
        "quote figures/paper000-fig8.components.csv makespan_s_total_mean strategy=pkg "
        f"zipf_s=1.5: the paragraph does not say {quoted}"
    ]


def test_a_range_of_verdicts_quoted_in_prose_is_checked(readings):
    # Given the crossover's prose with the planners' routing range at s = 1.4 edited
    spec = (
        "figures/crossover.csv route_s_total_verdict workload=topk load_per_node=1000000 "
        "zipf_s=1.4 strategy=qmmp|mnrt verdict range"
    )
    quoted = readings.quoted_value(spec)  # the lowest and highest change, whole percents
    assert quoted.endswith("%") and "-" in quoted
    text = readings.all_text()
    stated = f"for `qmmp` and `mnrt`, {quoted}"
    at = text.index(stated)
    edited = text[:at] + "for `qmmp` and `mnrt`, 10-20%" + text[at + len(stated) :]
    # Then that quote is named, and a quote no row matches is named too
    assert readings.check_quotes(edited) == [f"quote {spec}: the paragraph does not say {quoted}"]
    missing = "<!-- quote: figures/crossover.csv route_s_total_verdict strategy=nobody -->\nx\n"
    assert readings.check_quotes(missing)[0].startswith("quote figures/crossover.csv")


def test_every_committed_table_is_the_one_the_readings_were_rendered_from(readings):
    assert readings.check_tables() == []


@pytest.mark.parametrize(
    "edited_path",
    [
        "docs/figures/paper000-fig8.components.csv",  # a column no reading renders
        "docs/data/plan_time.txt",  # a benchmark's record the prose quotes
    ],
)
def test_a_table_or_record_edited_by_hand_is_caught(readings, tmp_path, edited_path):
    # Given a copy of the committed tables, records and their digests, one digit edited
    # past the first line (a CSV's header, a record's command)
    figures, data = tmp_path / "docs" / "figures", tmp_path / "docs" / "data"
    shutil.copytree(ROOT / "docs" / "figures", figures)
    shutil.copytree(ROOT / "docs" / "data", data)
    edited = tmp_path / edited_path
    text = edited.read_text(encoding="utf-8")
    digit = next(i for i in range(text.index("\n") + 1, len(text)) if text[i] in "123456789")
    edited.write_text(text[:digit] + str(int(text[digit]) % 9 + 1) + text[digit + 1 :])
    # When the tables are checked against the digests
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readings, "ROOT", tmp_path)
        patch.setattr(readings, "FIGURES", figures)
        patch.setattr(readings, "TABLE_DIGESTS", data / "tables.sha256")
        problems = readings.check_tables()
    # Then exactly that file is named
    assert problems == [
        f"{edited_path}: its bytes are not the ones the readings were rendered from (edited "
        "by hand, or re-made without --write)"
    ]


def test_a_number_edited_by_hand_is_caught(readings):
    # Given the pages with one number of the Fig. 3a reading changed
    text = readings.all_text()
    start = text.index("<!-- reading: 000-3a -->")
    end = text.index("<!-- /reading -->", start)
    block = text[start:end]
    cell = block.index("| `qmmp` |")
    digit = next(i for i in range(cell, len(block)) if block[i].isdigit())
    changed = block[:digit] + str((int(block[digit]) + 1) % 10) + block[digit + 1 :]
    # When it is checked
    problems = readings.check(text[:start] + changed + text[end:])
    # Then exactly that reading is named, beside whatever the unedited pages have
    added = set(problems) - set(readings.check(text))
    assert added == {"000-3a: the page's text is not what paper000-fig3a.rounds.csv gives"}


def test_a_caption_number_edited_by_hand_is_caught(readings):
    # Given the Fig. 8 reading's source line (its caption: runs and wall) with the run
    # count edited
    text = readings.all_text()
    start = text.index("<!-- reading: 000-8 -->")
    end = text.index("<!-- /reading -->", start)
    block = text[start:end]
    runs = block.index(" runs, ")
    count_at = block.rindex(" ", 0, runs) + 1
    edited = block[:count_at] + "7" + block[count_at:]
    # When it is checked, then that reading is named
    added = set(readings.check(text[:start] + edited + text[end:])) - set(readings.check(text))
    assert added == {"000-8: the page's text is not what paper000-fig8.rounds.csv gives"}


def test_every_number_in_a_printed_paragraph_is_one_its_record_prints(readings):
    text = readings.all_text()
    records = {m["records"] for m in readings.PRINTED.finditer(text)}
    assert {"data/plan_time.txt", "data/bench_costs.txt", "data/check_model.txt"} <= records
    assert readings.check_printed(text) == []


def test_a_number_edited_by_hand_in_a_printed_paragraph_is_caught(readings):
    # Given the plan-time paragraph with the floor's time edited to one the record lacks
    text = readings.all_text()
    at = text.index("the floor takes ")
    value = text[at + len("the floor takes ") :].split(" ", 1)[0]
    edited = text.replace(f"the floor takes {value} ms", "the floor takes 12.34 ms", 1)
    # When the printed paragraphs are checked, then that paragraph and number are named
    problems = readings.check_printed(edited)
    assert len(problems) == 1
    assert problems[0].startswith("printed data/plan_time.txt: the paragraph at '**Plan time**")
    assert problems[0].endswith("states 12.34, which the record does not print")


def test_prose_numbers_leave_out_code_links_dates_and_references(readings):
    paragraph = (
        "Fig. 3(a) and papers 001-004 (issue 44, 2026-11-29, `local[2]`, "
        "[x](../data/a1.txt)): 4,500,000 tuples, p99 1.07 s, 0.8x, K = 1e6, §5."
    )
    assert readings.prose_numbers(paragraph) == ["4,500,000", "1.07", "0.8", "1e6"]
    assert readings.numbers("4,500,000 and 1e6 and 0.050") == {4500000.0, 1e6, 0.05}


def test_every_paragraph_with_a_number_is_traced(readings):
    assert readings.check_numbers_traced() == []


def test_an_untraced_number_on_a_page_is_caught(readings, tmp_path):
    # Given a page with a measured number in an unmarked paragraph, beside a
    # marked one and a reading block
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n<!-- not measured -->\nN = 8 nodes.\n\n"
        "<!-- reading: x -->\n0.5 s\n<!-- /reading -->\n\n"
        "```text\n12 ms\n```\n\nThe planners route in 41.7 ms.\n",
        encoding="utf-8",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(readings, "ROOT", tmp_path)
        problems = readings.check_numbers_traced([page])
    # Then only the unmarked paragraph is named, with its number
    assert len(problems) == 1
    assert problems[0].startswith("page.md: the paragraph at 'The planners route")
    assert "states 41.7 with" in problems[0]


def _series(readings, points, paired_across_x=False):
    """A Series over the rounds of ``points``: {(line, z): [value per round]}."""
    rows = [
        {"strategy": line, "zipf_s": z, "round": r, "t": value}
        for (line, z), values in points.items()
        for r, value in enumerate(values)
    ]
    design = readings.Design(paired_across_x=paired_across_x)
    return readings.Series(
        pd.DataFrame(rows), "zipf_s", readings.Metric("t", "time, s"), "round", design
    )


NOISE = [1.0, 1.3, 0.75, 1.2, 0.85]  # one round's machine, the same for a and b


def test_a_claim_is_reproduced_only_where_the_verdict_says_so(readings):
    s = _series(
        readings,
        {
            # z = 0.4: a 20% faster than b in every round (paired: the noise cancels)
            ("a", 0.4): [0.8 * n for n in NOISE],
            ("b", 0.4): NOISE,
            # z = 1.5: a and b cross from round to round: no clear difference
            ("a", 1.5): [2.0, 2.6, 1.6, 2.4, 1.8],
            ("b", 1.5): [2.2, 2.0, 2.2, 1.8, 2.4],
        },
    )
    said = readings.better_than("a", "b")(s)
    assert said.startswith("**partly reproduced** (z = 0.4: 20.0% faster [20.0%, 20.0%]; ")
    assert "z = 1.5: no clear difference (5 rounds)" in said
    opposite = readings.better_than("b", "a")(s)
    assert opposite.startswith("**not reproduced** (z = 0.4: 25.0% slower")
    # a's time rises from z = 0.4 to 1.5 (unpaired: other runs) beyond its noise
    assert readings.grows("a")(s).startswith("**reproduced** (0.816 at z = 0.4, 2.08 at 1.5: +")
    assert readings.falls("a")(s).startswith("**the opposite**")
    assert readings.flat("a")(s).startswith("**not reproduced**")
    # best_among / worst_among list every verdict behind the word
    assert readings.best_among("a", ["b"], [0.4])(s) == (
        "**reproduced** (`a` against each: z = 0.4: `b` 20.0% faster [20.0%, 20.0%])"
    )


def test_equivalent_within_the_margin_is_said_and_is_not_reproduced(readings):
    tiny = [1.001, 0.999, 1.002, 0.998, 1.0]
    steady = [1.0, 1.005, 0.995, 1.0, 1.002]
    s = _series(
        readings,
        {
            ("a", 0.4): [t * n for t, n in zip(tiny, NOISE, strict=True)],
            ("b", 0.4): NOISE,
            ("a", 1.5): [t * n for t, n in zip(tiny[::-1], NOISE, strict=True)],
            ("b", 1.5): NOISE,
            ("c", 0.4): steady,
            ("c", 1.5): [1.001 * v for v in steady[::-1]],
        },
    )
    said = readings.better_than("a", "b")(s)
    assert said.startswith("**not reproduced** (z = 0.4: equivalent within ±3%")
    # every skew of c the same within ±3%: flat, reproduced; b's skews are not apart but
    # too noisy to be shown the same: no clear difference
    assert readings.flat("c")(s).startswith("**reproduced**")
    assert readings.flat("b")(s).startswith("**no clear difference**")


def test_a_model_pairs_its_repetitions_across_points(readings):
    # The same seed at every point: the noise of repetition r is shared across z too.
    s = _series(
        readings,
        {("a", 0.4): [0.9 * n for n in NOISE], ("a", 1.5): NOISE},
        paired_across_x=True,
    )
    assert readings.falls("a", 1.5, 0.4)(s).startswith("**reproduced**")
    unpaired = _series(readings, {("a", 0.4): [0.9 * n for n in NOISE], ("a", 1.5): NOISE})
    assert readings.falls("a", 1.5, 0.4)(unpaired).startswith("**no clear difference**")


def test_no_later_than_needs_the_worse_side_inside_the_margin(readings):
    s = _series(
        readings,
        {
            # z = 0.4: a and b cross from round to round: a may be up to ~25% later
            ("a", 0.4): [2.0, 2.6, 1.6, 2.4, 1.8],
            ("b", 0.4): [2.2, 2.0, 2.2, 1.8, 2.4],
            # z = 1.5: a the same as b within ±3%
            ("a", 1.5): [1.001 * n for n in NOISE],
            ("b", 1.5): NOISE,
        },
    )
    assert readings.not_worse("a", "b")(s).startswith("**no clear difference** (z = 0.4: no clear")
    steady = _series(readings, {("a", 1.5): [1.001 * n for n in NOISE], ("b", 1.5): NOISE})
    assert readings.not_worse("a", "b")(steady).startswith("**reproduced** (z = 1.5: equivalent")
    later = _series(readings, {("a", 1.5): [1.2 * n for n in NOISE], ("b", 1.5): NOISE})
    assert readings.not_worse("a", "b")(later).startswith("**not reproduced**")


def test_tied_for_the_most_is_not_the_most(readings):
    # a ahead of b by 50% in every round, but the same as c: a shares the top with c
    s = _series(
        readings,
        {
            ("a", 0.4): [2.0 * n for n in NOISE],
            ("b", 0.4): NOISE,
            ("c", 0.4): [2.0 * n for n in NOISE],
        },
    )
    judged = readings.worst_among("a", ["b", "c"])(s)
    assert judged.startswith("**not reproduced** (each against `a`: z = 0.4:"), judged
    alone = _series(readings, {("a", 0.4): [2.0 * n for n in NOISE], ("b", 0.4): NOISE})
    assert readings.worst_among("a", ["b"])(alone).startswith("**reproduced**")
