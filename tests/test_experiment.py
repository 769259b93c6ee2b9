"""Helpers of ``balancebench.experiment`` that need no Spark."""

from __future__ import annotations

from balancebench.experiment import rotated_rounds


def test_rotated_rounds_run_each_name_once_per_round_and_rotate_the_first():
    # Given three strategies and three rounds
    order = list(rotated_rounds(["hash", "qmmp", "mnrt"], 3))
    # Then every round runs each once, and each strategy goes first once
    rounds = [order[i : i + 3] for i in range(0, 9, 3)]
    assert rounds == [
        ["hash", "qmmp", "mnrt"],
        ["qmmp", "mnrt", "hash"],
        ["mnrt", "hash", "qmmp"],
    ]
    # ... and a fourth round starts again at the first
    assert list(rotated_rounds(["a", "b"], 3)) == ["a", "b", "b", "a", "a", "b"]
