"""topic_stream (paper 000 TOPK input) and phone_stream (paper 001): shape, distribution,
validation and bad input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.core.profiles import fit_zipf_exponent, key_counts, top_set
from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, read_table
from balancebench.generators.topic_stream import TOP_K, drift_mapping

TOPIC = {
    "n_tuples": 60_000,
    "n_keys": 500,
    "zipf_s": 1.0,
    "input_rate_tuples_per_s": 20_000.0,
    "seed": 5,
    "topic_stream_drift_period_s": 1.0,
    "topic_stream_drift_fraction": 0.1,
}
PHONE = {"n_tuples": 50_000, "seed": 9, "input_rate_tuples_per_s": 50_000.0}


def events(folder, manifest):
    return read_table(folder, manifest, "events").to_pandas()


# ---- topic_stream ----------------------------------------------------------------------


def test_topic_stream_is_deterministic(tmp_path):
    _, a = generate("topic_stream", tmp_path / "a", TOPIC)
    _, b = generate("topic_stream", tmp_path / "b", TOPIC)
    _, c = generate("topic_stream", tmp_path / "c", {**TOPIC, "seed": 6})
    assert a.digest == b.digest != c.digest


def test_hot_set_drifts_between_periods_and_not_inside(tmp_path):
    # Given a stream with a drift every second (3 seconds of events)
    folder, manifest = generate("topic_stream", tmp_path, TOPIC)
    df = events(folder, manifest)
    period = np.floor(df.event_time_s.to_numpy()).astype(int)
    keys = df.key.to_numpy()
    # Then each period is Zipf(1.0) on its own, and the top 10 changes at each boundary
    tops = []
    for p in range(3):
        counts = key_counts(keys[period == p], TOPIC["n_keys"])
        assert fit_zipf_exponent(counts) == pytest.approx(1.0, abs=0.15)
        tops.append(set(top_set(keys[period == p], TOP_K)))
    assert tops[0] != tops[1] and tops[1] != tops[2]
    # and the two halves of one period share their hot set (no drift inside a period)
    first = keys[period == 0]
    half = len(first) // 2
    assert len(set(top_set(first[:half], 5)) & set(top_set(first[half:], 5))) >= 4


def test_no_drift_keeps_the_hot_set(tmp_path):
    folder, manifest = generate(
        "topic_stream", tmp_path, {**TOPIC, "topic_stream_drift_period_s": 0}
    )
    df = events(folder, manifest)
    early, late = df.key[df.event_time_s < 1.0], df.key[df.event_time_s >= 2.0]
    assert len(set(top_set(early.to_numpy(), 5)) & set(top_set(late.to_numpy(), 5))) >= 4


def test_drift_fraction_one_is_a_full_reshuffle_and_small_fractions_touch_the_head():
    rng = np.random.default_rng(0)
    mapping = np.arange(1000)
    full = drift_mapping(rng, mapping, 1.0)
    assert sorted(full.tolist()) == list(range(1000))
    assert np.mean(full == mapping) < 0.05
    partial = drift_mapping(rng, mapping, 0.01)  # the 10 hottest ranks re-drawn
    assert sorted(partial.tolist()) == list(range(1000))
    assert np.count_nonzero(partial != mapping) <= 20
    assert np.count_nonzero(partial[:10] != mapping[:10]) >= 8


def test_topic_stream_validates_and_a_frozen_hot_set_fails_the_drift_check(tmp_path):
    folder, manifest = generate("topic_stream", tmp_path, TOPIC)
    assert validate_dataset(folder, tmp_path / "ok.json").success
    # Corrupt: every period gets the first period's keys (no drift left in the data).
    path = folder / manifest.table_files()[0]
    table = pq.read_table(path)
    keys = table.column("key").to_numpy().copy()
    times = table.column("event_time_s").to_numpy()
    first = keys[times < 1.0]
    rest = times >= 1.0
    keys[rest] = np.resize(first, int(rest.sum()))
    pq.write_table(table.set_column(2, "key", pa.array(keys)), path)
    report = validate_dataset(folder, tmp_path / "bad.json")
    assert not report.success
    assert any(
        f.startswith("profile_drift: expect_column_values_to_be_between") for f in report.failed
    )


def test_topic_stream_wrong_exponent_fails_the_zipf_fit(tmp_path):
    folder, manifest = generate(
        "topic_stream", tmp_path, {**TOPIC, "topic_stream_drift_period_s": 0}
    )
    # Claim a different exponent in the manifest than the data has.
    path = folder / "manifest.json"
    path.write_text(path.read_text().replace('"zipf_s": 1.0', '"zipf_s": 0.4'))
    report = validate_dataset(folder, tmp_path / "bad.json")
    assert not report.success
    assert any(
        f.startswith("profile_zipf_fit: expect_column_values_to_be_in_set") for f in report.failed
    )


# ---- phone_stream ----------------------------------------------------------------------


def test_phone_stream_follows_the_schedule(tmp_path):
    folder, manifest = generate("phone_stream", tmp_path, PHONE)
    df = events(folder, manifest)
    assert list(df.columns) == ["tuple_id", "event_time_s", "key", "phone_number"]
    assert (df.phone_number == 13_800_000_000 + df.key).all()
    step = df.tuple_id * 25 // PHONE["n_tuples"]
    first, last = df.key[step == 0], df.key[step == 24]
    assert first.mean() == pytest.approx(2000, abs=15) and first.std() == pytest.approx(
        100, rel=0.15
    )
    assert last.mean() == pytest.approx(8000, abs=5) and last.std() == pytest.approx(25, rel=0.15)
    assert df.key.nunique() <= 10_000
    assert validate_dataset(folder, tmp_path / "ok.json").success


def test_phone_stream_cycles_repeat_the_schedule(tmp_path):
    params = {**PHONE, "phone_stream_steps": 5, "phone_stream_cycles": 2}
    folder, manifest = generate("phone_stream", tmp_path, params)
    df = events(folder, manifest)
    step = df.tuple_id * 10 // PHONE["n_tuples"]
    assert df.key[step == 0].mean() == pytest.approx(df.key[step == 5].mean(), abs=10)
    report = validate_dataset(folder, tmp_path / "ok.json")
    assert report.success and report.frames["profile_schedule"] == 3


def test_phone_stream_off_schedule_fails(tmp_path):
    folder, manifest = generate("phone_stream", tmp_path, PHONE)
    path = folder / manifest.table_files()[0]
    table = pq.read_table(path)
    keys = table.column("key").to_numpy() // 2 + 100  # every mean moved
    table = table.set_column(2, "key", pa.array(keys)).set_column(
        3, "phone_number", pa.array(13_800_000_000 + keys)
    )
    pq.write_table(table, path)
    report = validate_dataset(folder, tmp_path / "bad.json")
    assert not report.success
    assert report.failed == [
        "profile_schedule: expect_column_values_to_be_in_set({'column': 'within_allowed', "
        "'value_set': [1]}): 25 unexpected values, e.g. [0, 0, 0, 0, 0]"
    ]


# ---- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "needle"),
    [
        ("topic_stream", {"topic_stream_drift_fraction": 0}, "topic_stream_drift_fraction: 0 is"),
        ("topic_stream", {"topic_stream_drift_period_s": -1}, "topic_stream_drift_period_s: -1 is"),
        ("topic_stream", {"topic_stream_users": "many"}, "topic_stream_users: 'many' is not"),
        (
            "topic_stream",
            {"phone_stream_steps": 3},
            "unknown topic_stream params ['phone_stream_steps']",
        ),
        (
            "phone_stream",
            {"phone_stream_sigma_to": 0},
            "phone_stream_sigma_to: 0 is less than or equal",
        ),
        (
            "phone_stream",
            {"phone_stream_mean_to": 12_000},
            "phone_stream_mean_to: 12000 is outside",
        ),
        ("phone_stream", {"n_tuples": 10}, "phone_stream_steps: 25 steps x 1 cycles exceed"),
        ("nope", {}, "dataset: unknown generator 'nope'; allowed values: ["),
    ],
)
def test_bad_input_is_named_before_anything_is_written(tmp_path, name, params, needle):
    with pytest.raises(ValueError) as err:
        generate(name, tmp_path, params)
    assert needle in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_one_key_fits_any_exponent():
    """Over one key every Zipf exponent gives the same stream (all tuples on it): the
    fit cannot tell them apart, so a one-key dataset passes (it failed validation, and
    with it every run of `n_keys: 1`)."""
    from balancebench.core.profiles import zipf_fit_row

    row = zipf_fit_row(np.array([40_000]), 1, 1.2, 0.05)
    assert row["fitted_s"] == 1.2 and row["abs_error"] == 0.0 and row["within_allowed"] == 1
    # Two keys still tell a wrong exponent apart.
    assert zipf_fit_row(np.array([20_000, 20_000]), 2, 1.2, 0.05)["within_allowed"] == 0
