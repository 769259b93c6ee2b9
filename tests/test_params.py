import pytest

from balancebench.experiment.params import defaults, validate_params
from balancebench.strategies import STRATEGIES


def test_defaults_are_valid_and_auto_picks_the_workloads_dataset():
    assert validate_params({}) == {**defaults(), "dataset": "topic_stream"}
    assert validate_params({"workload": "eq5"})["dataset"] == "tpch"


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (
            {"workload": "eq5", "strategies": ["hash", "pkg"]},
            "strategies: 'pkg' cannot serve workload 'eq5' (operator 'equi_join'",
        ),
        ({"workload": "band", "dataset": "phone_stream"}, "dataset: 'phone_stream' cannot feed"),
        ({"workload": "topk", "dataset": "tpch"}, "allowed values: ['any stream dataset']"),
    ],
)
def test_a_combination_that_cannot_run_is_rejected_before_any_work(bad, needle):
    with pytest.raises(ValueError) as err:
        validate_params(bad)
    assert needle in str(err.value)


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"zipf_s": -1}, "zipf_s: -1 is less than the minimum of 0"),
        ({"strategies": ["hash", "nope"]}, "strategies.1: 'nope' is not one of"),
        ({"strategies": []}, "strategies"),
        ({"n_nodes": 0}, "n_nodes"),
        ({"n_tuples": "many"}, "n_tuples: 'many' is not of type 'integer'"),
        ({"tolerance": 0}, "tolerance"),
        ({"colour": 1}, "unknown experiment params ['colour']"),
    ],
)
def test_bad_params_name_the_field(bad, needle):
    with pytest.raises(ValueError) as err:
        validate_params(bad)
    assert needle in str(err.value)


def test_enum_message_lists_allowed_values():
    allowed = ", ".join(repr(n) for n in sorted(STRATEGIES))
    with pytest.raises(ValueError) as err:
        validate_params({"strategies": ["nope"]})
    assert f"'nope' is not one of [{allowed}]" in str(err.value)


def test_strategy_params_are_params():
    p = validate_params({"readj_max_iterations": 5, "balanceload_buckets": 64})
    assert p["readj_max_iterations"] == 5 and p["pkg_senders"] is None  # the run's n_senders
    with pytest.raises(ValueError, match="balanceload_buckets: 0 is less than the minimum of 1"):
        validate_params({"balanceload_buckets": 0})


def test_a_child_run_carries_only_the_params_that_apply():
    from balancebench.experiment.params import applicable_params, param_section, validate_params

    params = validate_params({"workload": "eq5", "strategies": ["hash", "mnrt"]})
    applies = applicable_params(params, ["mnrt"])
    assert applies["strategies"] == ["mnrt"]
    assert "mnrt_two_stream_ratio" in applies
    assert not any(k.startswith(("pkg_", "readj_", "topic_stream_", "packets_")) for k in applies)
    assert any(k.startswith("tpch_") for k in applies)  # eq5 reads the tpch generator
    assert "top_k" not in applies and "band_width" not in applies
    assert applies["join_arrival"] == "interleaved"  # eq5 and band read it, topk does not
    assert "join_arrival" not in applicable_params(validate_params({}), ["hash"])
    assert applies["zipf_s"] == params["zipf_s"] and applies["n_nodes"] == params["n_nodes"]
    assert param_section("mnrt_two_stream_ratio") == "Strategy: mnrt"
    assert param_section("tpch_scale_factor") == "Dataset: tpch"
    assert param_section("n_nodes") == "Experiment"


def test_the_comparison_keeps_one_strategy_order_and_one_colour_each():
    from balancebench.experiment.compare import comparison_table
    from balancebench.plotting import strategy_color

    # Given each cell's columns over its rounds (mean and interval), in another order,
    columns = {
        s: {
            "rounds_finished": 5.0,
            "latency_p99_s_mean": p99,
            "latency_p99_s_ci95_lo": p99 - 0.1,
            "latency_p99_s_ci95_hi": p99 + 0.1,
        }
        for s, p99 in (("mnrt", 1.0), ("hash", 2.0), ("qmmp", 1.5))
    }
    table = comparison_table(columns, {"mnrt": "c", "hash": "a", "qmmp": "b"})
    # then the rows follow the registry's order, with the means under the figures' names.
    assert table["strategy"].tolist() == ["hash", "qmmp", "mnrt"]
    assert table["run_id"].tolist() == ["a", "b", "c"]
    assert table["latency_p99_s"].tolist() == [2.0, 1.5, 1.0]
    assert table["latency_p99_s_ci95_hi"].tolist() == [2.1, 1.6, 1.1]
    colours = {s: strategy_color(s) for s in ("hash", "qmmp", "mnrt", "spark_aqe")}
    assert len(set(colours.values())) == 4


def test_a_new_strategy_recolours_no_other(monkeypatch):
    import balancebench.plotting as plotting
    from balancebench.strategies import STRATEGIES

    before = {s: plotting.strategy_color(s) for s in STRATEGIES}
    # Every registered strategy has a colour of its own
    assert len(set(before.values())) == len(before)
    # When a strategy is inserted at the head of the registry
    monkeypatch.setattr(plotting, "STRATEGIES", {"aaa_new": object(), **STRATEGIES})
    after = {s: plotting.strategy_color(s) for s in STRATEGIES}
    # then no other strategy changes colour, and the new one gets one the others do not
    # have, the same on every call
    assert after == before
    new = plotting.strategy_color("aaa_new")
    assert new not in before.values() and new == plotting.strategy_color("aaa_new")
