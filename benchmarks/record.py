"""Run a benchmark and keep what it printed as a committed record under ``docs/data/``.

    uv run python benchmarks/record.py docs/data/plan_time.txt -- python benchmarks/plan_time.py

The docs quote a benchmark's figures only from such a record: a paragraph marked
``<!-- printed: docs/data/NAME.txt -->`` may hold no number the record does not print
(``benchmarks/readme_readings.py`` checks it, and the record's bytes against the digests
written with the readings). The command runs as an argument list (never through a
shell), its output streams to the terminal as it comes, and the record is written only
when the command succeeds, in one replace: a failed or stopped run leaves the last good
record in place. The record starts with the command, the date (UTC) and the commit.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from balancebench.state.tracking import git_commit


def header(command: list[str]) -> str:
    """The record's first line: what ran, when, on which commit."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = git_commit()
    short = commit[:12] + ("-dirty" if commit.endswith("-dirty") else "")
    return f"$ {' '.join(command)}   ({when}, commit {short})\n"


def record(path: Path, command: list[str]) -> int:
    """Run ``command``, echo its output, and on success write it to ``path``; its exit code."""
    lines = [header(command)]
    # Benchmarks print with flush=True; unbuffered so the terminal sees progress as it comes.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    started = time.perf_counter()
    # What the command prints is the record; its stderr (the JVM's and Spark's log lines)
    # goes to the terminal as it is, unrecorded.
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
    if proc.returncode != 0:
        print(
            f"record: {command[0]} exited {proc.returncode}; {path} left as it was", file=sys.stderr
        )
        return proc.returncode
    lines.append(f"(the command took {time.perf_counter() - started:.0f} s wall)\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    partial.write_text("".join(lines), encoding="utf-8")
    partial.replace(path)
    print(f"record: written to {path}")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path, help="the file to write (e.g. docs/data/NAME.txt)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("command: give the command to run after --")
    if args.record.suffix != ".txt":
        parser.error("record: a .txt file (the docs include it as text)")
    sys.exit(record(args.record, command))


if __name__ == "__main__":
    main()
