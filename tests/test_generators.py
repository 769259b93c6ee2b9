from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from balancebench.generators import generate_zipf_stream, load_manifest

SMALL = dict(n_tuples=20_000, n_keys=500, zipf_s=1.0, input_rate_tuples_per_s=10_000.0, seed=7)


def test_same_seed_same_digest(tmp_path):
    d1, m1 = generate_zipf_stream(tmp_path / "a", **SMALL)
    d2, m2 = generate_zipf_stream(tmp_path / "b", **SMALL)
    assert m1.digest == m2.digest
    assert m1.digest.startswith("sha256:")
    assert load_manifest(d1) == m1
    assert pq.read_table(d1 / m1.files[0]).equals(pq.read_table(d2 / m2.files[0]))


def test_other_seed_other_digest(tmp_path):
    _, m1 = generate_zipf_stream(tmp_path, **SMALL)
    _, m2 = generate_zipf_stream(tmp_path, **{**SMALL, "seed": 8})
    assert m1.digest != m2.digest


def test_stream_shape(tmp_path):
    d, m = generate_zipf_stream(tmp_path, **SMALL)
    t = pq.read_table(d / m.files[0])
    assert t.column_names == ["tuple_id", "event_time_s", "key", "payload"]
    assert m.row_count == t.num_rows == SMALL["n_tuples"]
    times = t.column("event_time_s").to_numpy()
    assert (np.diff(times) > 0).all()
    # Poisson arrivals at 10k/s: 20k tuples span about 2 s.
    assert times[-1] == pytest.approx(2.0, rel=0.05)
    keys = t.column("key").to_numpy()
    assert keys.min() >= 0 and keys.max() < SMALL["n_keys"]
    # Zipf s=1 over 500 keys: the top key carries 1/H(500) ~ 14.7% of tuples.
    top_share = np.bincount(keys).max() / len(keys)
    assert top_share == pytest.approx(1 / np.sum(1 / np.arange(1, 501)), rel=0.05)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("n_tuples", 0, "n_tuples: 0 is less than the minimum of 1"),
        ("n_keys", -3, "n_keys: -3 is less than the minimum of 1"),
        ("zipf_s", -0.5, "zipf_s: -0.5 is less than the minimum of 0"),
        ("zipf_s", "high", "zipf_s: 'high' is not of type 'number'"),
        ("input_rate_tuples_per_s", 0, "input_rate_tuples_per_s: 0 is less than or equal to"),
        ("seed", 1.5, "seed: 1.5 is not of type 'integer'"),
    ],
)
def test_bad_input_fails_fast_and_leaves_nothing(tmp_path, field, value, needle):
    with pytest.raises(ValueError, match=needle):
        generate_zipf_stream(tmp_path, **{**SMALL, field: value})
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_no_partial_dataset(tmp_path, monkeypatch):
    import balancebench.generators.common as common

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(common.pq.ParquetWriter, "write_batch", boom)
    with pytest.raises(OSError, match="disk full"):
        generate_zipf_stream(tmp_path, **SMALL)
    assert not any(p.name != "zipf_stream" for p in tmp_path.iterdir())
    assert list((tmp_path / "zipf_stream").iterdir()) == []


@pytest.mark.parametrize(("n_keys", "s"), [(1, 1.0), (7, 0.0), (1000, 0.8), (50_000, 1.2)])
def test_guide_table_search_equals_searchsorted(n_keys, s):
    from balancebench.core.profiles import zipf_probabilities
    from balancebench.generators.zipf_stream import InverseCdf

    cdf = np.cumsum(zipf_probabilities(n_keys, s))
    cdf[-1] = 1.0
    u = np.random.default_rng(0).random(200_000)
    u[:3] = [0.0, np.nextafter(1.0, 0.0), cdf[0] if n_keys > 1 else 0.5]  # edges, a step
    assert np.array_equal(InverseCdf(cdf).index(u), np.searchsorted(cdf, u, side="right"))


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda text: text[: len(text) // 2],  # a write cut short: not JSON
        lambda text: b"\xff" + text,  # not UTF-8
        lambda text: b"[1, 2]",  # JSON, not an object
        lambda text: b"{}",  # an object without the fields
        lambda text: text.replace(b'"files": [', b'"files": [1, '),  # a file that is no path
    ],
    ids=["cut-short", "not-utf8", "not-an-object", "no-fields", "bad-file"],
)
def test_an_unreadable_manifest_is_regenerated(tmp_path, corrupt):
    """A dataset folder whose manifest cannot be read is written again, not refused: the
    folder (``<out>/<generator>/<params id>``) is the generator's own."""
    d1, m1 = generate_zipf_stream(tmp_path, **SMALL)
    path = d1 / "manifest.json"
    path.write_bytes(corrupt(path.read_bytes()))
    d2, m2 = generate_zipf_stream(tmp_path, **SMALL)
    assert d2 == d1
    assert load_manifest(d2) == m2
    assert m2.digest == m1.digest and m2.files == m1.files
    assert pq.read_table(d2 / m2.files[0]).num_rows == SMALL["n_tuples"]
    assert [p.name for p in d1.parent.iterdir()] == [d1.name]  # no temporary folder left


def test_params_checked_at_the_door_are_trusted_and_the_generators_own_rules_still_run(
    tmp_path, monkeypatch
):
    import balancebench.generators.common as common
    from balancebench.experiment.run_spec import ExperimentSpec
    from balancebench.generators import generate, generator_params

    # Given Params that passed the door (defaults filled, every rule checked once)
    spec = ExperimentSpec.checked({"workload": "topk", "n_tuples": 2000, "n_keys": 50})
    schema_checks = []
    real = common.check_values
    monkeypatch.setattr(
        common, "check_values", lambda *a, **k: schema_checks.append(a) or real(*a, **k)
    )
    # When the dataset is written from them, the schema is not checked again
    folder, manifest = generate(
        spec.dataset, tmp_path, generator_params(spec.dataset, spec), checked=True
    )
    assert schema_checks == [] and manifest.row_count == 2000
    # ... and the same dataset comes from the unchecked door, which checks
    again, _ = generate(spec.dataset, tmp_path, generator_params(spec.dataset, spec))
    assert again == folder and len(schema_checks) == 1
    # A generator's own rule beyond the schema runs either way
    text = {"tasks_text_path": str(tmp_path / "missing.txt"), "tasks_sizes": [1]}
    for checked in (True, False):
        with pytest.raises(ValueError, match="tasks_text_path"):
            generate("tasks", tmp_path, text, checked=checked)
