from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, load_manifest, read_table


def _csv(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def _run(out, **params):
    return generate("user_file", out, {f"user_file_{k}": v for k, v in params.items()})


def _events(d, m):
    return read_table(d, m, "events").to_pydict()


def _keys(d, m):
    t = read_table(d, m, "keys")
    return dict(zip(t.column("key").to_pylist(), t.column("value").to_pylist(), strict=True))


def _nothing_left(out):
    """Nothing in the output folder but possibly the empty generator folder."""
    return not out.exists() or [p.name for p in out.rglob("*")] in ([], ["user_file"])


@pytest.fixture
def clicks(tmp_path):
    rows = ["user,ts,amount"] + [f"u{i % 7},{(i * 37) % 50},{i}" for i in range(200)]
    return _csv(tmp_path / "clicks.csv", "\n".join(rows) + "\n")


def test_same_seed_same_digest_other_seed_other_digest(tmp_path, clicks):
    _, m1 = _run(tmp_path / "a", path=clicks, key_column="user")
    _, m2 = _run(tmp_path / "b", path=clicks, key_column="user")
    _, m3 = generate(
        "user_file",
        tmp_path / "a",
        {"user_file_path": clicks, "user_file_key_column": "user", "seed": 1},
    )
    assert m1.digest == m2.digest
    assert m1.digest != m3.digest  # other Poisson arrival times
    assert m1.params["user_file_sha256"] and len(m1.params["user_file_sha256"]) == 64


def test_an_unreadable_manifest_is_regenerated_from_the_untouched_file(tmp_path, clicks):
    d1, m1 = _run(tmp_path / "out", path=clicks, key_column="user")
    before = (tmp_path / "clicks.csv").read_bytes()
    (d1 / "manifest.json").write_text("{")
    d2, m2 = _run(tmp_path / "out", path=clicks, key_column="user")
    assert d2 == d1 and load_manifest(d2) == m2 and m2.digest == m1.digest
    assert (tmp_path / "clicks.csv").read_bytes() == before


def test_csv_text_keys_become_a_sorted_dictionary(tmp_path):
    path = _csv(tmp_path / "k.csv", "key\nbanana\napple\ncherry\napple\n007\n")
    d, m = _run(tmp_path / "out", path=path)
    assert load_manifest(d) == m
    assert m.main_table == "events" and m.row_count == 5
    assert m.tables["events"]["schema"] == {
        "tuple_id": "int64",
        "event_time_s": "double",
        "key": "int64",
    }
    assert _keys(d, m) == {0: "007", 1: "apple", 2: "banana", 3: "cherry"}
    events = _events(d, m)
    assert events["key"] == [2, 1, 3, 1, 0]  # file order
    assert events["tuple_id"] == [0, 1, 2, 3, 4]


def test_the_word_nan_among_words_is_a_key_like_any_other(tmp_path):
    # Only a NaN *number* is refused; in a column of words, "nan" is a word.
    path = _csv(tmp_path / "k.csv", "key\nnan\napple\nnan\n")
    d, m = _run(tmp_path / "out", path=path)
    assert _keys(d, m) == {0: "apple", 1: "nan"}
    assert _events(d, m)["key"] == [1, 0, 1]


def test_integer_keys_are_kept(tmp_path):
    path = _csv(tmp_path / "k.csv", "id,key\n1,42\n2,-7\n3,42\n4,100000000000\n")
    d, m = _run(tmp_path / "out", path=path)
    assert _events(d, m)["key"] == [42, -7, 42, 100_000_000_000]
    assert _keys(d, m) == {-7: "-7", 42: "42", 100_000_000_000: "100000000000"}


def test_poisson_arrivals_without_time_column(tmp_path):
    path = _csv(tmp_path / "k.csv", "key\n" + "\n".join(str(i % 13) for i in range(20_000)))
    d, m = generate(
        "user_file", tmp_path, {"user_file_path": path, "input_rate_tuples_per_s": 1000.0}
    )
    times = np.array(_events(d, m)["event_time_s"])
    assert times[0] == 0.0 and (np.diff(times) > 0).all()
    assert times[-1] == pytest.approx(20.0, rel=0.05)  # 20k tuples at 1000/s


def test_time_column_sorts_stably_and_starts_at_zero(tmp_path):
    path = _csv(tmp_path / "t.csv", "key,t\na,12.5\nb,10\nc,12.5\nd,11\ne,10\n")
    d, m = _run(tmp_path / "out", path=path, time_column="t")
    events = _events(d, m)
    assert events["event_time_s"] == [0.0, 0.0, 1.0, 2.5, 2.5]
    names = _keys(d, m)
    assert [names[k] for k in events["key"]] == ["b", "e", "d", "a", "c"]  # ties: file order


def test_iso_timestamps_in_csv(tmp_path):
    path = _csv(
        tmp_path / "t.csv",
        "key,when\n1,2024-05-01T10:00:02\n2,2024-05-01T10:00:00\n3,2024-05-01 10:01:00\n",
    )
    d, m = _run(tmp_path / "out", path=path, time_column="when")
    events = _events(d, m)
    assert events["key"] == [2, 1, 3]
    assert events["event_time_s"] == [0.0, 2.0, 60.0]


def test_parquet_with_timestamps_and_dictionary_keys(tmp_path):
    table = pa.table(
        {
            "city": pa.array(["Oslo", "Lima", "Oslo", "Kyiv"]).dictionary_encode(),
            "at": pa.array(
                np.array(
                    ["2024-01-01T00:00:03", "2024-01-01T00:00:01", "2024-01-01", "2024-01-01"],
                    dtype="datetime64[ms]",
                )
            ),
        }
    )
    pq.write_table(table, tmp_path / "c.pq")
    d, m = _run(tmp_path / "out", path=str(tmp_path / "c.pq"), key_column="city", time_column="at")
    assert _keys(d, m) == {0: "Kyiv", 1: "Lima", 2: "Oslo"}
    events = _events(d, m)
    assert events["key"] == [2, 0, 1, 2]
    assert events["event_time_s"] == [0.0, 0.0, 1.0, 3.0]


def test_text_words_become_keys(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text("The cat, the HAT!\r\nÜber-cat x_1\n\n")
    d, m = _run(tmp_path / "out", path=str(path))
    names = _keys(d, m)
    assert [names[k] for k in _events(d, m)["key"]] == [
        "the",
        "cat",
        "the",
        "hat",
        "über",
        "cat",
        "x_1",
    ]
    assert list(names.values()) == sorted(names.values())


def test_changed_file_makes_a_new_dataset(tmp_path):
    path = _csv(tmp_path / "k.csv", "key\n1\n2\n")
    d1, m1 = _run(tmp_path / "out", path=path)
    _csv(tmp_path / "k.csv", "key\n1\n2\n3\n")
    d2, m2 = _run(tmp_path / "out", path=path)
    assert d1 != d2 and m2.row_count == 3
    # Pinning the digest of the first content now fails.
    with pytest.raises(ValueError, match="user_file_sha256: the file's sha256 is"):
        _run(tmp_path / "out", path=path, sha256=m1.params["user_file_sha256"])
    d3, _ = _run(tmp_path / "out", path=path, sha256=m2.params["user_file_sha256"])
    assert d3 == d2


@pytest.mark.parametrize("fmt", ["csv", "parquet", "text"])
def test_validation_passes(tmp_path, fmt):
    if fmt == "text":
        path = tmp_path / "f.txt"
        path.write_text("one two two three three three\n" * 20)
        d, _ = _run(tmp_path / "out", path=str(path))
    elif fmt == "parquet":
        path = tmp_path / "f.parquet"
        pq.write_table(pa.table({"key": [5, 3, 5, 1], "t": [0.5, 0.1, 0.1, 2.0]}), path)
        d, _ = _run(tmp_path / "out", path=str(path), time_column="t")
    else:
        path = _csv(tmp_path / "f.csv", "key,t\nx,1\ny,1\nx,3\n")
        d, _ = _run(tmp_path / "out", path=path, time_column="t")
    report = validate_dataset(d, tmp_path / "r.json")
    assert report.success, report.message()
    assert set(report.frames) == {"events", "keys", "profile_keys"}


def _rewrite(d, m, table, change):
    path = d / m.table_files(table)[0]
    pq.write_table(change(pq.read_table(path)), path)


def test_validation_fails_on_corrupted_events(tmp_path, clicks):
    d, m = _run(tmp_path / "out", path=clicks, key_column="user", time_column="ts")

    def corrupt(t):
        times = t.column("event_time_s").to_numpy()[::-1].copy()  # decreasing
        keys = t.column("key").to_numpy().copy()
        keys[0] = 999  # not in the keys table
        t = t.set_column(1, "event_time_s", pa.array(times))
        return t.set_column(2, "key", pa.array(keys))

    _rewrite(d, m, "events", corrupt)
    report = validate_dataset(d, tmp_path / "r.json")
    assert not report.success
    failed = "\n".join(report.failed)
    assert "events: expect_column_values_to_be_increasing({'column': 'event_time_s'" in failed
    assert "profile_keys: expect_column_values_to_be_between({'column': 'unknown_keys'" in failed


def test_validation_fails_on_corrupted_keys(tmp_path, clicks):
    d, m = _run(tmp_path / "out", path=clicks, key_column="user")
    _rewrite(d, m, "keys", lambda t: t.slice(1))  # a key goes missing
    report = validate_dataset(d, tmp_path / "r.json")
    assert not report.success
    failed = "\n".join(report.failed)
    assert "keys: expect_table_row_count_to_equal" in failed
    assert "profile_keys: expect_column_values_to_be_in_set({'column': 'keys_match'" in failed


def _bad_inputs(files):
    """(params, message regex) for every bad input of the issue."""
    _csv(files / "ok.csv", "user,t\na,1\nb,2\n")
    _csv(files / "nulls.csv", "key,t\na,1\n,2\nb,3\n,4\n")
    _csv(files / "header.csv", "key,t\n")
    _csv(files / "words.csv", "key,t\na,soon\nb,later\n")
    _csv(files / "tnull.csv", "key,t\na,1\nb,\n")
    _csv(files / "tbool.csv", "key,t\na,true\nb,false\n")
    (files / "empty.csv").write_bytes(b"")
    (files / "fake.parquet").write_text("key\n1\n")
    (files / "data.xlsx").write_bytes(b"PK\x03\x04")
    (files / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (files / "punct.txt").write_text("... !!! ---\n")
    pq.write_table(pa.table({"key": pa.array([], pa.int64())}), files / "zero.parquet")
    pq.write_table(pa.table({"key": pa.array([1, None, 3])}), files / "nulls.parquet")
    pq.write_table(pa.table({"key": pa.array([[1], [2]])}), files / "lists.parquet")
    nan = float("nan")
    pq.write_table(pa.table({"key": pa.array([1.5, nan, 2.0, nan, nan])}), files / "nan.parquet")
    _csv(files / "nan.csv", "key,t\n1.5,1\n2,2\nNaN,3\n")
    f = str
    return [
        ({"path": ""}, "user_file_path: required for dataset 'user_file'"),
        ({"path": f(files / "nope.csv")}, "user_file_path: '.*nope.csv' does not exist"),
        ({"path": f(files)}, "user_file_path: '.*files' is not a file"),
        ({"path": f(files / "empty.csv")}, "user_file_path: '.*empty.csv' is empty"),
        ({"path": f(files / "header.csv")}, "user_file_path: 'header.csv' has no data rows"),
        ({"path": f(files / "zero.parquet")}, "user_file_path: 'zero.parquet' has no data rows"),
        (
            {"path": f(files / "fake.parquet")},
            "user_file_path: 'fake.parquet' is not a Parquet file .*; expected a Parquet file",
        ),
        (
            {"path": f(files / "ok.csv"), "format": "parquet"},
            "user_file_path: 'ok.csv' is not a Parquet file",
        ),
        ({"path": f(files / "data.xlsx")}, "user_file_format: cannot tell the format of"),
        (
            {"path": f(files / "ok.csv")},
            r"user_file_key_column: no column 'key' in 'ok.csv'; columns found: \['user', 't'\]",
        ),
        (
            {"path": f(files / "ok.csv"), "key_column": "user", "time_column": "when"},
            r"user_file_time_column: no column 'when' in 'ok.csv'; columns found: \['user', 't'\]",
        ),
        (
            {"path": f(files / "nulls.csv")},
            "user_file_key_column: column 'key' has 2 null value\\(s\\), the first in data row 1",
        ),
        (
            {"path": f(files / "nulls.parquet")},
            "user_file_key_column: column 'key' has 1 null value\\(s\\), the first in data row 1",
        ),
        ({"path": f(files / "lists.parquet")}, "user_file_key_column: column 'key' is of type"),
        (
            {"path": f(files / "nan.parquet")},
            "user_file_key_column: column 'key' has 3 NaN value\\(s\\), the first in data row 1",
        ),
        (
            {"path": f(files / "nan.csv")},
            "user_file_key_column: column 'key' has 1 NaN value\\(s\\), the first in data row 2",
        ),
        (
            {"path": f(files / "words.csv"), "time_column": "t"},
            "user_file_time_column: column 't' holds text that is neither numbers nor ISO-8601",
        ),
        (
            {"path": f(files / "tnull.csv"), "time_column": "t"},
            "user_file_time_column: column 't' has 1 null value\\(s\\), the first in data row 1",
        ),
        (
            {"path": f(files / "tbool.csv"), "time_column": "t"},
            "user_file_time_column: column 't' is of type bool; expected numeric seconds",
        ),
        (
            {"path": f(files / "latin1.txt")},
            "user_file_path: '.*latin1.txt' is not UTF-8 text \\(invalid byte at offset 3\\)",
        ),
        ({"path": f(files / "punct.txt")}, "user_file_path: 'punct.txt' has no words"),
        (
            {"path": f(files / "punct.txt"), "time_column": "t"},
            "user_file_time_column: a text file has no columns",
        ),
        ({"path": f(files / "ok.csv"), "format": "xml"}, "user_file_format: 'xml' is not one of"),
        (
            {"path": f(files / "ok.csv"), "key_column": "user", "sha256": "xyz"},
            "user_file_sha256: 'xyz' does not match",
        ),
    ]


def test_bad_inputs_fail_fast_naming_the_field_and_leave_nothing(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    out = tmp_path / "out"
    for params, needle in _bad_inputs(files):
        with pytest.raises(ValueError, match=needle):
            _run(out, **params)
        assert _nothing_left(out), (params, sorted(out.rglob("*")))
