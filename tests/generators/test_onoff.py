"""onoff (paper 004's work/idle sources): shape, tiling, load and phase lengths,
validation, bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, read_table
from balancebench.generators.onoff import (
    STATES,
    load_profile,
    phase_lengths_profile,
    work_rates,
)

SMALL = {"onoff_sources": 20, "onoff_duration_s": 60.0, "seed": 3}
#: The benchmark size: 100 sources x 1 hour (~120,000 phases).
HOUR = {"onoff_sources": 100, "onoff_duration_s": 3600.0, "seed": 8}


@pytest.fixture(scope="module")
def hour(tmp_path_factory):
    folder, manifest = generate("onoff", tmp_path_factory.mktemp("hour"), HOUR)
    return manifest, read_table(folder, manifest, "phases").to_pandas()


def test_same_seed_same_digest_other_seed_other_digest(tmp_path):
    _, a = generate("onoff", tmp_path / "a", SMALL)
    _, b = generate("onoff", tmp_path / "b", SMALL)
    _, c = generate("onoff", tmp_path / "c", {**SMALL, "seed": 4})
    assert a.digest == b.digest != c.digest


def test_rates_give_the_target_load_in_expectation():
    # 100 sources, 100,000 tuples/s at 80%: 800 tuples/s per source on average; working
    # 4/(4+2) of the time at (h x 4 + (1-h)) x low with h = 0.5 -> low 480, high 1920.
    low, high = work_rates(
        {
            "onoff_sources": 100,
            "onoff_mean_work_s": 4.0,
            "onoff_mean_idle_s": 2.0,
            "onoff_high_low_ratio": 4.0,
            "onoff_high_share": 0.5,
            "onoff_target_load": 0.8,
            "onoff_capacity_tuples_per_s": 100_000.0,
        }
    )
    assert low == pytest.approx(480.0) and high == pytest.approx(1920.0)


def test_phases_table_shape_and_tiling(hour):
    manifest, df = hour
    assert manifest.main_table == "phases" and manifest.row_count == len(df)
    assert [(f, str(t)) for f, t in manifest.schema.items()] == [
        ("source", "int32"),
        ("phase", "int32"),
        ("start_s", "double"),
        ("end_s", "double"),
        ("state", "string"),
        ("rate_tuples_per_s", "double"),
    ]
    assert sorted(df.source.unique()) == list(range(100))
    assert set(df.state) == set(STATES)
    for _, phases in df.groupby("source"):
        # each source's phases tile [0, 3600] without gaps or overlaps, work/idle alternate
        assert (phases.phase.to_numpy() == np.arange(len(phases))).all()
        assert phases.start_s.iloc[0] == 0 and phases.end_s.iloc[-1] == 3600.0
        assert (phases.start_s.to_numpy()[1:] == phases.end_s.to_numpy()[:-1]).all()
        work = (phases.state != "idle").to_numpy()
        assert (work[1:] != work[:-1]).all()
    assert (df.end_s > df.start_s).all()
    low, high = work_rates(manifest.params)
    expected_rate = df.state.map({"idle": 0.0, "work_low": low, "work_high": high})
    assert (df.rate_tuples_per_s == expected_rate).all()


def test_realized_load_is_the_target(hour):
    manifest, df = hour
    offered = (df.rate_tuples_per_s * (df.end_s - df.start_s)).sum() / 3600.0
    assert offered / 100_000.0 == pytest.approx(0.8, abs=0.012)
    row = load_profile(df, manifest.params).iloc[0]
    assert row.within_allowed == 1 and row.allowed_error < 0.02


def test_phase_lengths_are_exponential_with_the_requested_means(hour):
    manifest, df = hour
    length = (df.end_s - df.start_s).to_numpy()
    last = np.append(df.source.to_numpy()[1:] != df.source.to_numpy()[:-1], True)
    work = (df.state != "idle").to_numpy()
    for mask, mean in ((work, 4.0), (~work, 2.0)):
        complete = length[mask & ~last]
        assert complete.mean() == pytest.approx(mean, rel=0.03)
        # exponential: standard deviation = mean, median = mean x ln 2
        assert complete.std() == pytest.approx(mean, rel=0.05)
        assert np.median(complete) == pytest.approx(mean * np.log(2), rel=0.05)
    profile = phase_lengths_profile(df, manifest.params)
    assert profile.within_allowed.tolist() == [1, 1]
    assert profile.observed_mean_s.tolist() == pytest.approx([4.0, 2.0], rel=0.02)
    # half of the work phases run at the high rate
    assert (df.state[work] == "work_high").mean() == pytest.approx(0.5, abs=0.02)


def test_first_phase_follows_the_stationary_probabilities(tmp_path):
    folder, manifest = generate(
        "onoff", tmp_path, {"onoff_sources": 4000, "onoff_duration_s": 1.0, "seed": 5}
    )
    df = read_table(folder, manifest, "phases").to_pandas()
    first = df[df.phase == 0]
    assert (first.state != "idle").mean() == pytest.approx(4 / 6, abs=0.03)


def test_lower_target_load_scales_the_rates(tmp_path):
    params = {**SMALL, "onoff_sources": 200, "onoff_target_load": 0.3}
    folder, manifest = generate("onoff", tmp_path, params)
    df = read_table(folder, manifest, "phases").to_pandas()
    row = load_profile(df, manifest.params).iloc[0]
    assert row.realized_load == pytest.approx(0.3, abs=0.03) and row.within_allowed == 1


def _rewrite(folder, change):
    path = folder / "phases.parquet"
    original = pq.read_table(path)
    df = original.to_pandas()
    change(df)
    pq.write_table(pa.Table.from_pandas(df, schema=original.schema, preserve_index=False), path)


def test_validation_passes_and_names_what_corruption_breaks(tmp_path):
    # Given a generated dataset, validation passes
    folder, _ = generate("onoff", tmp_path / "data", SMALL)
    report = validate_dataset(folder, tmp_path / "ok.json")
    assert report.success, report.message()
    assert set(report.frames) == {
        "phases",
        "profile_load",
        "profile_phase_lengths",
        "profile_high_share",
        "profile_tiling",
    }

    # When an idle phase sends and a phase starts after its predecessor ended
    def break_table(df):
        idle = df.index[df.state == "idle"][0]
        df.loc[idle, "rate_tuples_per_s"] = 5.0
        df.loc[1, "start_s"] += 0.01

    _rewrite(folder, break_table)
    report = validate_dataset(folder, tmp_path / "bad.json")
    # Then the report names the failed expectations
    assert not report.success
    failed = "\n".join(report.failed)
    assert "phases: expect_column_values_to_be_between({'column': 'rate_tuples_per_s'" in failed
    assert "'parameter': 'idle'" in failed
    assert "profile_tiling: expect_column_values_to_be_between({'column': 'gaps_or_overlaps'" in (
        failed
    )


def test_all_high_rate_work_fails_the_load_and_share_profiles(tmp_path):
    # Given every work phase rewritten to the (consistent) high rate
    folder, manifest = generate("onoff", tmp_path / "data", SMALL)
    _, high = work_rates(manifest.params)

    def all_high(df):
        work = df.state != "idle"
        df.loc[work, "state"] = "work_high"
        df.loc[work, "rate_tuples_per_s"] = high

    _rewrite(folder, all_high)
    report = validate_dataset(folder, tmp_path / "r.json")
    # Then the table suite passes but the distribution checks fail
    frames = {f.split(":")[0] for f in report.failed}
    assert frames == {"profile_load", "profile_high_share"}, report.failed


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("onoff_sources", -1, "onoff_sources: -1 is less than the minimum of 1"),
        ("onoff_sources", 2.5, "onoff_sources: 2.5 is not of type 'integer'"),
        ("onoff_duration_s", "long", "onoff_duration_s: 'long' is not of type 'number'"),
        ("onoff_mean_work_s", 0, "onoff_mean_work_s: 0 is less than or equal to the minimum"),
        ("onoff_mean_idle_s", -2.0, "onoff_mean_idle_s: -2.0 is less than or equal"),
        ("onoff_high_low_ratio", 0.5, "onoff_high_low_ratio: 0.5 is less than the minimum of 1"),
        ("onoff_high_share", 1.2, "onoff_high_share: 1.2 is greater than the maximum of 1"),
        ("onoff_target_load", 0, "onoff_target_load: 0 is less than or equal to the minimum"),
        ("onoff_target_load", 1.5, "onoff_target_load: 1.5 is greater than the maximum of 1"),
        ("onoff_capacity_tuples_per_s", 0, "onoff_capacity_tuples_per_s: 0 is less than or"),
        ("onoff_duration_s", 1e9, "onoff_duration_s: 1000000000.0 s with mean phases"),
        ("onoff_colour", "red", "unknown onoff params \\['onoff_colour'\\]"),
    ],
)
def test_bad_input_fails_fast_and_leaves_nothing(tmp_path, field, value, needle):
    with pytest.raises(ValueError, match=needle):
        generate("onoff", tmp_path, {**SMALL, field: value})
    assert list(tmp_path.iterdir()) == []


def test_too_many_phases_in_total_names_the_sources(tmp_path):
    params = {"onoff_sources": 10_000_000, "onoff_duration_s": 10_000.0, "seed": 1}
    with pytest.raises(ValueError, match="onoff_sources: 10000000 sources x"):
        generate("onoff", tmp_path, params)
    assert list(tmp_path.iterdir()) == []
