"""benchmarks/record.py: what a benchmark printed becomes a committed record only when it
succeeds, with its command, date, commit and wall time; its arguments never reach a shell."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def recorder():
    return load_benchmark("record")


def test_a_record_holds_what_the_command_printed_between_its_header_and_wall(recorder, tmp_path):
    path = tmp_path / "out.txt"
    script = "import sys; print('floor 58.08 ms'); print('spark noise', file=sys.stderr)"
    assert recorder.record(path, [sys.executable, "-c", script]) == 0
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith(f"$ {sys.executable} -c ") and "UTC, commit " in lines[0]
    assert lines[1] == "floor 58.08 ms"  # stdout only: stderr is not part of the record
    assert len(lines) == 3 and lines[2].startswith("(the command took ")


def test_a_failed_command_leaves_the_last_record_as_it_was(recorder, tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("the last good record\n", encoding="utf-8")
    script = "print('half a table'); raise SystemExit(3)"
    assert recorder.record(path, [sys.executable, "-c", script]) == 3
    assert path.read_text(encoding="utf-8") == "the last good record\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]  # no partial file left


def test_an_argument_reaches_the_command_as_it_is_never_a_shell(recorder, tmp_path):
    path, marker = tmp_path / "out.txt", tmp_path / "touched"
    argument = f"$(touch {marker}); `touch {marker}` | touch {marker}"
    script = "import sys; print(sys.argv[1])"
    assert recorder.record(path, [sys.executable, "-c", script, argument]) == 0
    assert path.read_text(encoding="utf-8").splitlines()[1] == argument
    assert not marker.exists()
