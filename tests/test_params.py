import pytest

from balancebench.params import defaults, validate_params


def test_defaults_are_valid():
    assert validate_params({}) == defaults()


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"zipf_s": -1}, "zipf_s: -1 is less than the minimum of 0"),
        ({"strategies": ["hash", "nope"]}, "strategies.1: 'nope' is not one of"),
        ({"strategies": []}, "strategies"),
        ({"n_nodes": 0}, "n_nodes"),
        ({"n_tuples": "many"}, "n_tuples: 'many' is not of type 'integer'"),
        ({"tolerance": 0}, "tolerance"),
        ({"colour": 1}, "unknown param(s) ['colour']"),
    ],
)
def test_bad_params_name_the_field(bad, needle):
    with pytest.raises(ValueError) as err:
        validate_params(bad)
    assert needle in str(err.value)


def test_enum_message_lists_allowed_values():
    with pytest.raises(ValueError, match=r"\['hash', 'mnrt', 'qmmp'\]"):
        validate_params({"strategies": ["nope"]})
