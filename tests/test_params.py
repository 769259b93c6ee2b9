import pytest

from balancebench.params import defaults, validate_params
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
    assert p["readj_max_iterations"] == 5 and p["pkg_senders"] == 4
    with pytest.raises(ValueError, match="balanceload_buckets: 0 is less than the minimum of 1"):
        validate_params({"balanceload_buckets": 0})
