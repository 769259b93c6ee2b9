"""One cell, one key (issue 46): the trigger form posts JSON as a browser writes it, a whole
number without its ``.0`` (``window_s: 1`` for the default ``1.0``), while the schedule
and the REST API send the defaults as they are. The door (``schema.check_values``)
normalises every Param to its declared type, so both give one cell key, one dataset
folder and one history; ``1``, ``1.0`` and ``-0.0`` as a skew give one dataset id. And
the sweep report's axis reads right: a one-skew sweep's one tick is its skew."""

from __future__ import annotations

import json

import pytest

from balancebench.core.schema import spec_defaults
from balancebench.experiment.params import ExperimentSpec, applicable_params
from balancebench.generators import generator_params
from balancebench.generators.common import params_id
from balancebench.orchestration.sweep_grid import SWEEP_PARAMS, cells, checked_sweep
from balancebench.orchestration.sweep_pipeline import cell_key


def as_a_browser_posts(values: dict) -> dict:
    """``JSON.stringify``: a float with no fraction is written as an integer."""

    def whole(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [whole(x) for x in v]
        return v

    return json.loads(json.dumps({k: whole(v) for k, v in values.items()}))


def keys_of(values: dict) -> dict[str, tuple[str, str]]:
    """Per cell: its history key and its dataset's folder name."""
    params, specs = checked_sweep(values)
    found = {}
    for cell in cells(params["grid"]):
        spec = specs[cell.label]
        applies = applicable_params(spec.to_json(), [cell.strategy])
        dataset = params_id(spec.dataset, generator_params(spec.dataset, spec.to_json()))
        found[cell.label] = (cell_key(applies, False, ["app"]), dataset)
    return found


def test_the_form_and_the_schedule_give_one_key_and_one_dataset_per_cell():
    scheduled = spec_defaults(SWEEP_PARAMS)
    posted = as_a_browser_posts(scheduled)
    # The form's payload differs in type where the spec says number (the three)
    assert posted["window_s"] == 1 and isinstance(posted["window_s"], int)
    assert keys_of(posted) == keys_of(scheduled)


@pytest.mark.parametrize("skew", [1, 1.0, -0.0, 0, 0.0])
def test_equal_skews_make_one_dataset_id(skew):
    spec = ExperimentSpec.checked({"zipf_s": skew})
    same = ExperimentSpec.checked({"zipf_s": float(abs(skew))})
    dataset = spec.dataset
    assert params_id(dataset, generator_params(dataset, spec.to_json())) == params_id(
        dataset, generator_params(dataset, same.to_json())
    )
    assert json.dumps(spec["zipf_s"]) == json.dumps(float(abs(skew)))


def test_a_one_skew_report_axis_has_the_one_skew_as_its_tick():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from balancebench.experiment.report import skew_axis

    fig, ax = plt.subplots()
    ax.plot([1.3925, 1.4, 1.4075], [1, 2, 3])  # three strategies offset around s = 1.4
    skew_axis(ax, [1.4, 1.4, 1.4])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1.4"]
    plt.close(fig)


def test_the_forms_empty_json_grid_is_the_grid_params_and_a_partial_one_is_refused():
    """Airflow's trigger form shows a null JSON Param as ``{}``, and a user who touched the
    field sends it so: ``{}`` means what null means (the grid_* Params); a grid with some
    axes only is refused, naming them."""
    as_null, _ = checked_sweep({"grid": None})
    as_braces, _ = checked_sweep({"grid": {}})
    assert as_braces["grid"] == as_null["grid"]
    with pytest.raises(ValueError) as refused:
        checked_sweep({"grid": {"workloads": ["topk"], "strategies": ["hash"]}})
    assert str(refused.value).startswith("grid: ['zipf_s', 'n_nodes'] missing; allowed:")
