"""The rounds loop: rotation, stopping once every verdict is decided, the budget, failures."""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.core.stats import Outcome
from balancebench.experiment.rounds import (
    RoundPolicy,
    choose_baseline,
    rotated_rounds,
    run_rounds,
    verdict_lines,
)


def test_rotated_rounds_start_each_round_one_strategy_later():
    order = list(rotated_rounds(["hash", "qmmp", "mnrt"], 3))
    assert order == [
        *("hash", "qmmp", "mnrt"),
        *("qmmp", "mnrt", "hash"),
        *("mnrt", "hash", "qmmp"),
    ]
    assert list(rotated_rounds(["a", "b"], 2, first=1)) == ["b", "a", "a", "b"]


def test_baseline_is_hash_when_there_else_the_first_or_the_one_named():
    assert choose_baseline(["qmmp", "hash"]) == "hash"
    assert choose_baseline(["qmmp", "mnrt"]) == "qmmp"
    assert choose_baseline(["qmmp", "mnrt"], "mnrt") == "mnrt"
    with pytest.raises(ValueError, match="baseline: 'pkg'"):
        choose_baseline(["qmmp", "mnrt"], "pkg")


def fake(values: dict[str, float], noise: float = 0.0, seed: int = 0):
    """A run whose four figures are ``values[name]`` times log-normal noise."""
    rng = np.random.default_rng(seed)
    order: list[tuple[str, int]] = []

    def run(name: str, r: int) -> dict[str, float]:
        order.append((name, r))
        f = values[name] * float(np.exp(rng.normal(0, noise))) if noise else values[name]
        return {
            "capacity_tuples_per_s": 1e6 / f,
            "makespan_s_total": f,
            "route_s_total": 0.1 * f,
            "latency_p99_s": 1.0,
        }

    return run, order


def test_a_clear_answer_stops_at_the_minimum():
    run, order = fake({"hash": 1.0, "qmmp": 0.8}, noise=0.01)
    rounds = run_rounds(["hash", "qmmp"], run, RoundPolicy(min_rounds=5, max_rounds=20))
    assert rounds.done == 5 and rounds.stopped == "every verdict decided"
    assert order[:4] == [("hash", 0), ("qmmp", 0), ("qmmp", 1), ("hash", 1)]
    v = rounds.verdicts()
    assert v[("qmmp", "makespan_s_total")].outcome is Outcome.FASTER
    assert v[("qmmp", "capacity_tuples_per_s")].outcome is Outcome.FASTER
    assert v[("qmmp", "latency_p99_s")].outcome is Outcome.EQUIVALENT
    lines = verdict_lines(rounds)
    assert lines[0].startswith("qmmp vs hash: capacity 2") and "% faster [" in lines[0]
    assert "p99 latency equivalent within ±3% [+0.0%, +0.0%]" in lines[0]


def test_an_open_verdict_adds_rounds_up_to_the_maximum():
    # A 2% difference under 7% noise: not decided in 8 rounds.
    run, _ = fake({"hash": 1.0, "qmmp": 0.98}, noise=0.07, seed=1)
    rounds = run_rounds(["hash", "qmmp"], run, RoundPolicy(min_rounds=5, max_rounds=8))
    assert rounds.done == 8 and rounds.stopped == "max_rounds (8) reached"
    assert rounds.verdicts()[("qmmp", "makespan_s_total")].outcome is Outcome.UNDECIDED
    assert "undecided after 8 rounds" in verdict_lines(rounds)[0]


def test_the_budget_stops_before_a_round_that_would_pass_it():
    run, _ = fake({"hash": 1.0, "qmmp": 0.98}, noise=0.07, seed=1)
    now = [0.0]

    def slow(name: str, r: int) -> dict[str, float]:
        now[0] += 10.0  # every run takes 10 s: a round 20 s
        return run(name, r)

    rounds = run_rounds(
        ["hash", "qmmp"],
        slow,
        RoundPolicy(min_rounds=5, max_rounds=50, budget_s=115),
        clock=lambda: now[0],
    )
    # After 5 rounds 100 s are used, and another round of 20 s would pass 115 s.
    assert rounds.done == 5 and rounds.stopped.startswith("time budget (115 s)")


def test_a_failed_run_drops_its_strategy_and_the_others_go_on():
    run, _ = fake({"hash": 1.0, "qmmp": 0.8, "mnrt": 0.9}, noise=0.01)

    def failing(name: str, r: int):
        return None if (name, r) == ("mnrt", 1) else run(name, r)

    rounds = run_rounds(["hash", "qmmp", "mnrt"], failing, RoundPolicy(5, 5))
    assert rounds.failed == ["mnrt"] and rounds.done == 5
    assert {k[0] for k in rounds.verdicts()} == {"qmmp"}


def test_policy_refuses_what_cannot_run():
    with pytest.raises(ValueError, match="min_rounds 6, max_rounds 5"):
        RoundPolicy(6, 5)
    with pytest.raises(ValueError, match="no good direction"):
        RoundPolicy(figures=("wall_s",))
    policy = RoundPolicy(5, 9, budget_s=60.0)
    assert RoundPolicy.from_json(policy.to_json()) == policy
    assert RoundPolicy.from_json(RoundPolicy().to_json()) == RoundPolicy()
    assert policy.looks == (5, 9) and RoundPolicy(5, 5).looks is None


def test_a_figure_zero_in_some_rounds_only_does_not_hold_the_rounds_open():
    # qmmp migrates in some rounds only: no ratio to hash's zero, whatever the rounds.
    run, _ = fake({"hash": 1.0, "qmmp": 0.8}, noise=0.01)

    def with_migration(name: str, r: int) -> dict[str, float]:
        out = run(name, r)
        out["migration_s_total"] = 0.01 * (r % 2) if name == "qmmp" else 0.0
        return out

    policy = RoundPolicy(5, 20, figures=(*RoundPolicy().figures, "migration_s_total"))
    rounds = run_rounds(["hash", "qmmp"], with_migration, policy)
    assert rounds.done == 5 and rounds.stopped == "every verdict decided"
    assert rounds.verdicts()[("qmmp", "migration_s_total")].outcome is Outcome.NO_RATIO


def test_a_minimum_of_one_round_still_looks_at_the_per_look_level():
    # An interval needs 2 rounds: the looks run from 2, and a group of 1 to 2 rounds has
    # one look only (a fixed number).
    assert RoundPolicy(1, 5).looks == (2, 5)
    assert RoundPolicy(1, 2).looks is None and RoundPolicy(2, 2).looks is None


def test_a_failed_baseline_stops_the_rounds_at_once():
    run, _ = fake({"hash": 1.0, "qmmp": 0.8}, noise=0.01)
    rounds = run_rounds(
        ["hash", "qmmp"], lambda n, r: None if n == "hash" else run(n, r), RoundPolicy(5, 9)
    )
    assert rounds.done == 1 and rounds.stopped.startswith("no verdict left to give")


def test_a_count_figure_says_fewer_or_more_not_faster() -> None:
    from balancebench.core.stats import LOWER, verdict
    from balancebench.experiment.rounds import verdict_text

    lower = verdict([20.0, 21, 19, 20, 22], [10.0, 10, 9, 11, 10], LOWER)
    assert "fewer" in verdict_text("avg_received_tuples_per_node_total", lower)
    assert "faster" not in verdict_text("avg_received_tuples_per_node_total", lower)
    assert "faster" in verdict_text("makespan_s_total", lower)
