"""packets (paper 003's traffic counting): shape, bursts and uneven tags, validation, bad
input."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, read_table
from balancebench.generators.packets import (
    OWN_PARAMS,
    VALUE_MAX,
    branch_shares_profile,
    burstiness_profile,
    hot_probability,
)

SMALL = {"packets_total_mb": 5000, "seed": 3}
#: 1M packets: ~28,000 s of traffic, ~2,800 bursts (long-run statistics are tight).
LONG = {"packets_total_mb": 1_000_000, "seed": 11}


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    folder, manifest = generate("packets", tmp_path_factory.mktemp("long"), LONG)
    packets = read_table(folder, manifest, "packets").to_pandas()
    phases = read_table(folder, manifest, "rate_phases").to_pandas()
    return manifest, packets, phases


def test_same_seed_same_digest_other_seed_other_digest(tmp_path):
    _, a = generate("packets", tmp_path / "a", SMALL)
    _, b = generate("packets", tmp_path / "b", SMALL)
    _, c = generate("packets", tmp_path / "c", {**SMALL, "seed": 4})
    assert a.digest == b.digest != c.digest


def test_tables_shapes_and_types(tmp_path):
    # Given 3000 MB in 0.5 MB packets
    folder, manifest = generate(
        "packets", tmp_path, {"packets_total_mb": 3000, "packets_size_mb": 0.5, "seed": 1}
    )
    packets = pq.read_table(folder / "packets.parquet")
    phases = pq.read_table(folder / "rate_phases.parquet")
    # Then there is one row per packet (a count of packets, not bytes)
    assert manifest.main_table == "packets" and manifest.row_count == packets.num_rows == 6000
    assert [(f.name, str(f.type)) for f in packets.schema] == [
        ("packet_id", "int64"),
        ("time_s", "double"),
        ("branch", "int32"),
        ("size_mb", "double"),
        ("value", "int64"),
    ]
    assert phases.column_names == [
        "phase_id",
        "start_s",
        "end_s",
        "state",
        "hot_branch",
        "rate_mb_per_s",
    ]
    df = packets.to_pandas()
    assert (df.packet_id.to_numpy() == np.arange(6000)).all()
    assert (np.diff(df.time_s.to_numpy()) >= 0).all() and df.time_s.min() > 0
    assert set(df.branch.unique()) == {0, 1, 2}
    assert (df.size_mb == 0.5).all()
    assert df.value.min() >= 1 and df.value.max() <= VALUE_MAX
    # and the phases tile [0, last arrival], alternating calm and burst
    ph = phases.to_pandas()
    assert ph.start_s.iloc[0] == 0 and ph.end_s.iloc[-1] == df.time_s.iloc[-1]
    assert (ph.start_s.to_numpy()[1:] == ph.end_s.to_numpy()[:-1]).all()
    assert (ph.state.to_numpy()[1:] != ph.state.to_numpy()[:-1]).all()
    assert ((ph.state == "calm") == (ph.hot_branch == -1)).all()


def test_presets_are_listed_and_the_default_is_1_gb():
    spec = OWN_PARAMS["packets_total_mb"]
    assert spec["examples"] == [500, 1000, 2000, 5000]
    assert spec["default"] == 1000
    assert OWN_PARAMS["packets_size_mb"]["default"] == 1.0
    assert OWN_PARAMS["packets_branches"]["default"] == 3


def test_long_run_branch_shares_are_the_requested_ones(long_run):
    manifest, packets, _ = long_run
    shares = np.bincount(packets.branch, minlength=3) / len(packets)
    assert shares == pytest.approx([0.5, 0.3, 0.2], abs=0.02)


def test_a_burst_piles_its_packets_on_one_branch(long_run):
    # Given the packets and the phase each falls in
    manifest, packets, phases = long_run
    k = np.searchsorted(phases.start_s.to_numpy(), packets.time_s.to_numpy(), side="right") - 1
    hot = phases.hot_branch.to_numpy()[k]
    in_burst = hot >= 0
    # Then in a burst the hot branch gets q + (1 - q) share[hot] of the packets
    q = hot_probability(manifest.params)
    on_hot = packets.branch.to_numpy()[in_burst] == hot[in_burst]
    expected = q + (1 - q) * np.array([0.5, 0.3, 0.2])[hot[in_burst]].mean()
    assert on_hot.mean() == pytest.approx(expected, abs=0.01)
    # while calm packets follow the shares
    calm = np.bincount(packets.branch.to_numpy()[~in_burst], minlength=3) / (~in_burst).sum()
    assert calm == pytest.approx([0.5, 0.3, 0.2], abs=0.01)
    # and in the same second the branches' loads differ much more than the shares say
    second = np.floor(packets.time_s.to_numpy()).astype(int)
    per_second = np.zeros((second.max() + 1, 3))
    np.add.at(per_second, (second, packets.branch.to_numpy()), 1)
    busy = per_second.sum(axis=1) >= 50
    smallest_share = (per_second[busy] / per_second[busy].sum(axis=1, keepdims=True)).min(axis=1)
    assert np.quantile(smallest_share, 0.1) < 0.1


def test_rate_has_bursts_and_the_long_run_mean(long_run):
    manifest, packets, phases = long_run
    times = packets.time_s.to_numpy()
    span = times[-1]
    # mean rate: (8 s x 20 MB/s + 2 s x 100 MB/s) / 10 s = 36 MB/s
    assert len(times) / span == pytest.approx(36.0, rel=0.03)
    calm = phases.state == "calm"
    burst_time = (phases.end_s - phases.start_s)[~calm].sum() / span
    assert burst_time == pytest.approx(0.2, abs=0.025)
    lengths = (phases.end_s - phases.start_s).iloc[:-1]
    assert lengths[calm.iloc[:-1]].mean() == pytest.approx(8.0, rel=0.05)
    assert lengths[~calm.iloc[:-1]].mean() == pytest.approx(2.0, rel=0.05)
    # the busiest seconds are far above the mean (1 s bins)
    counts = np.bincount(np.floor(times).astype(int))
    assert counts.max() >= 2.5 * counts.mean()
    # and every profile statistic is within its allowed error
    profile = burstiness_profile(times, phases, manifest.params)
    assert profile.within_allowed.tolist() == [1, 1, 1, 1]
    shares = branch_shares_profile(times, packets.branch.to_numpy(), phases, manifest.params)
    assert shares.within_allowed.tolist() == [1, 1, 1]


def test_no_burst_above_base_rate_is_a_plain_poisson_stream(tmp_path):
    params = {
        "packets_total_mb": 20_000,
        "packets_burst_rate_mb_per_s": 20.0,
        "packets_branch_shares": [0.2, 0.8],
        "packets_branches": 2,
        "seed": 2,
    }
    folder, manifest = generate("packets", tmp_path, params)
    packets = read_table(folder, manifest, "packets").to_pandas()
    assert len(packets) / packets.time_s.iloc[-1] == pytest.approx(20.0, rel=0.05)
    assert (packets.branch == 1).mean() == pytest.approx(0.8, abs=0.015)


def _rewrite(folder, table, change):
    path = folder / f"{table}.parquet"
    original = pq.read_table(path)
    df = original.to_pandas()
    change(df)
    pq.write_table(pa.Table.from_pandas(df, schema=original.schema, preserve_index=False), path)


def test_validation_passes_and_names_what_corruption_breaks(tmp_path):
    # Given a generated dataset, validation passes
    folder, _ = generate("packets", tmp_path / "data", SMALL)
    report = validate_dataset(folder, tmp_path / "ok.json")
    assert report.success, report.message()
    assert set(report.frames) == {
        "packets",
        "rate_phases",
        "profile_branch_shares",
        "profile_burstiness",
    }

    # When a tag points past the last branch and the times go backwards
    def break_table(df):
        df.loc[10, "branch"] = 7
        df.loc[20, "time_s"] = 0.0

    _rewrite(folder, "packets", break_table)
    report = validate_dataset(folder, tmp_path / "bad.json")
    # Then the report names the expectations that failed
    assert not report.success
    failed = "\n".join(report.failed)
    assert "packets: expect_column_values_to_be_between({'column': 'branch'" in failed
    assert "packets: expect_column_values_to_be_increasing({'column': 'time_s'" in failed


def test_uneven_data_that_ignores_the_shares_fails_the_profile(tmp_path):
    # Given a dataset whose tags were all rewritten to branch 0 (the table stays valid)
    folder, _ = generate("packets", tmp_path / "data", SMALL)
    _rewrite(folder, "packets", lambda df: df.__setitem__("branch", np.int32(0)))
    report = validate_dataset(folder, tmp_path / "r.json")
    assert not report.success
    assert all(f.startswith("profile_branch_shares:") for f in report.failed), report.failed
    assert any("within_allowed" in f for f in report.failed)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("packets_total_mb", -5, "packets_total_mb: -5 is less than the minimum of 1"),
        ("packets_total_mb", 1.5, "packets_total_mb: 1.5 is not of type 'integer'"),
        ("packets_size_mb", "big", "packets_size_mb: 'big' is not of type 'number'"),
        ("packets_size_mb", 3.0, "packets_size_mb: packets_total_mb 5000 / packets_size_mb 3"),
        ("packets_base_rate_mb_per_s", 0, "packets_base_rate_mb_per_s: 0 is less than or equal"),
        ("packets_mean_burst_s", -1, "packets_mean_burst_s: -1 is less than or equal"),
        ("packets_burst_focus", 1.5, "packets_burst_focus: 1.5 is greater than the maximum"),
        ("packets_branch_shares", [0.5, 0.5], "packets_branch_shares: 2 shares .* is 3"),
        ("packets_branch_shares", [0.5, 0.3, 0.1], "packets_branch_shares: .* sum to 0.9"),
        ("packets_branch_shares", [-0.1, 0.6, 0.5], "packets_branch_shares.0: -0.1 is less"),
        ("packets_branch_shares", ["a", 0.5, 0.5], "packets_branch_shares.0: 'a' is not of"),
        ("packets_burst_rate_mb_per_s", 10.0, "packets_burst_rate_mb_per_s: 10.0 is below"),
        ("packets_colour", "red", "unknown packets params \\['packets_colour'\\]"),
    ],
)
def test_bad_input_fails_fast_and_leaves_nothing(tmp_path, field, value, needle):
    with pytest.raises(ValueError, match=needle):
        generate("packets", tmp_path, {**SMALL, field: value})
    assert list(tmp_path.iterdir()) == []
