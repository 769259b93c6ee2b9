from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import load_suite, validate_dataset
from balancebench.generators import generate_zipf_stream

SMALL = dict(n_tuples=5_000, n_keys=200, zipf_s=1.0, input_rate_tuples_per_s=10_000.0, seed=3)


def test_generated_stream_passes(tmp_path):
    d, _ = generate_zipf_stream(tmp_path, **SMALL)
    report = validate_dataset(d, tmp_path / "result.json")
    assert report.success, report.message()
    expected = sum(len(load_suite(f"zipf_stream/{f}").expectations) for f in report.frames)
    assert report.evaluated == expected
    assert set(report.frames) == {"events", "profile_zipf_fit"}
    assert json.loads((tmp_path / "result.json").read_text())["success"] is True


def test_corrupted_stream_fails_with_named_expectations(tmp_path):
    d, m = generate_zipf_stream(tmp_path, **SMALL)
    path = d / m.files[0]
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    keys[0] = None  # a null key
    keys[1] = 10_000  # outside the key domain
    table = table.set_column(2, "key", pa.array(keys, pa.int64())).slice(0, 4_000)
    pq.write_table(table, path)
    report = validate_dataset(d, tmp_path / "result.json")
    assert not report.success
    text = report.message()
    assert "events: expect_table_row_count_to_equal({'value': 5000}): observed 4000" in text
    assert "events: expect_column_values_to_not_be_null({'column': 'key'})" in text
    assert "events: expect_column_values_to_be_between({'column': 'key'" in text
    assert (tmp_path / "result.json").exists()


def test_unknown_expectation_type_is_an_error(tmp_path):
    (tmp_path / "broken.json").write_text(
        json.dumps({"name": "broken", "expectations": [{"type": "expect_nonsense", "kwargs": {}}]})
    )
    with pytest.raises(ValueError, match="1 expectations in the file but 0 loaded"):
        load_suite("broken", tmp_path)
