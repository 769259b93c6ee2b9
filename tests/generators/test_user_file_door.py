"""The ``user_file`` dataset's file is checked at the door: ``check_inputs`` (what
``balancebench run`` calls before a DAG starts) refuses every bad file and value that
generation would, naming the Param, in a short message a terminal shows as is."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.params import check_inputs, validate_params

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
    "alice:x:1000:1000:Alice Liddell,,,:/home/alice:/bin/bash\n"
)


@pytest.fixture(autouse=True)
def _no_hang():
    """A check that opened a FIFO for reading would block: fail instead."""

    def expired(*_):
        raise TimeoutError("the check blocked")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _params(path, **params):
    values = {"dataset": "user_file", "workload": "topk", "user_file_path": str(path)}
    values.update({f"user_file_{k}": v for k, v in params.items() if k != "workload"})
    values["workload"] = params.get("workload", values["workload"])
    return validate_params(values)


def _refused(path, field="user_file_path", content="", **params) -> str:
    """The message ``check_inputs`` refuses ``path`` with, checked to be terminal-safe."""
    with pytest.raises(ValueError) as info:
        check_inputs(_params(path, **params))
    msg = str(info.value)
    assert msg.startswith(f"{field}: "), msg
    assert not [c for c in msg if ord(c) < 32 or 0x7F <= ord(c) < 0xA0], msg
    assert len(msg) <= 600, msg
    for line in content.splitlines():
        if len(line) >= 8:
            assert line not in msg, msg
    return msg


def _write(path: Path, data: bytes | str) -> Path:
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# --- 1. regular files only ---------------------------------------------------------------


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    msg = _refused(fifo)
    assert "is not a regular file (it is a FIFO" in msg


def test_a_directory_is_refused(tmp_path):
    folder = tmp_path / "data.csv"
    folder.mkdir()
    assert "(it is a directory)" in _refused(folder)


def test_a_device_is_refused():
    if not Path("/dev/null").exists():
        pytest.skip("no /dev/null")
    assert "is not a regular file (it is a character device)" in _refused(
        "/dev/null", format="text", workload="wordcount"
    )


@pytest.mark.parametrize("via_link", [False, True])
def test_a_proc_pseudo_file_is_refused_not_called_empty(tmp_path, via_link):
    status = Path("/proc/self/status")
    if not status.exists():
        pytest.skip("no /proc")
    path = status
    if via_link:
        path = tmp_path / "status.txt"
        path.symlink_to(status)
    msg = _refused(path, format="text", workload="wordcount")
    assert "is not a regular file (a pseudo-file under /proc" in msg
    assert "empty" not in msg


# --- 2. the format sniffed from the content -----------------------------------------------


def test_a_parquet_file_named_csv_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    pq.write_table(pa.table({"key": [1, 2, 3]}), path)
    msg = _refused(path)
    assert msg.startswith(
        "user_file_path: 'x.csv' is a Parquet file (it starts with PAR1), but its format is csv"
    ), msg
    assert "user_file_format to 'parquet'" in msg


def test_a_parquet_file_named_txt_is_refused(tmp_path):
    path = tmp_path / "x.txt"
    pq.write_table(pa.table({"key": ["a", "b"]}), path)
    assert "is a Parquet file" in _refused(path, workload="wordcount")


def test_a_text_file_named_parquet_is_refused(tmp_path):
    path = _write(tmp_path / "x.parquet", "key\n1\n2\n")
    msg = _refused(path, content="key\n1\n2\n")
    assert "'x.parquet' is not a Parquet file (it does not start and end with PAR1" in msg
    assert "looks like text" in msg


def test_a_csv_with_a_nul_byte_is_binary(tmp_path):
    path = _write(tmp_path / "k.csv", b"key\na\x00b\nc\n")
    msg = _refused(path)
    assert "'k.csv' is binary (a NUL byte at offset 5)" in msg


def test_a_utf16_csv_is_named_as_such(tmp_path):
    path = _write(tmp_path / "k.csv", "key\na\nb\n".encode("utf-16"))
    assert "is UTF-16 text" in _refused(path)


def test_a_non_utf8_text_file_is_refused_at_the_door(tmp_path):
    path = _write(tmp_path / "t.txt", b"caf\xe9 ok")
    msg = _refused(path, workload="wordcount")
    assert "is not UTF-8 text (invalid byte at offset 3)" in msg


def test_a_non_utf8_csv_is_refused_at_the_door(tmp_path):
    path = _write(tmp_path / "k.csv", b"key\ncaf\xe9\nok\n")
    assert "is not UTF-8 text (invalid byte at offset 7)" in _refused(path)


@pytest.mark.parametrize(
    ("content", "offset"),
    [
        (b"abcdef\xe2\x82A rest", 6),  # a character cut by a block's end, then broken
        (b"abcdef\xe2\x82\xacok\xff", 11),  # a cut character completed; a bad byte after
        (b"abcdefgh" * 3 + b"\xff", 24),  # the first byte of a later block
    ],
)
def test_the_offset_of_an_invalid_byte_is_right_across_blocks(
    tmp_path, monkeypatch, content, offset
):
    """The file is read (and hashed) in blocks; the offset named is the byte's in the file,
    also where a character spans two blocks (8-byte blocks here, 1 MiB in use)."""
    from balancebench.generators import common

    monkeypatch.setattr(common, "_READ_CHUNK", 8)
    path = _write(tmp_path / "t.txt", content)
    msg = _refused(path, workload="wordcount")
    assert f"is not UTF-8 text (invalid byte at offset {offset})" in msg


# --- 3. values at the door ----------------------------------------------------------------


def test_a_nan_key_in_a_parquet_float_column_is_refused(tmp_path):
    path = tmp_path / "k.parquet"
    pq.write_table(pa.table({"key": [1.5, float("nan"), 2.0]}), path)
    msg = _refused(path, "user_file_key_column")
    assert "column 'key' has 1 NaN value(s), the first in data row 1" in msg


def test_a_null_key_in_a_parquet_is_refused(tmp_path):
    path = tmp_path / "k.parquet"
    pq.write_table(pa.table({"key": pa.array([1, None, 3])}), path)
    msg = _refused(path, "user_file_key_column")
    assert "column 'key' has 1 null value(s), the first in data row 1" in msg


def test_an_empty_key_field_in_a_csv_is_a_null_refused(tmp_path):
    path = _write(tmp_path / "k.csv", "key,v\na,1\n,2\nb,3\n")
    msg = _refused(path, "user_file_key_column")
    assert "column 'key' has 1 null value(s), the first in data row 1" in msg


def test_a_list_key_column_is_refused(tmp_path):
    path = tmp_path / "k.parquet"
    pq.write_table(pa.table({"key": pa.array([[1], [2]])}), path)
    assert "column 'key' is of type list" in _refused(path, "user_file_key_column")


def test_a_null_time_is_refused(tmp_path):
    path = _write(tmp_path / "k.csv", "key,t\na,1\nb,\n")
    msg = _refused(path, "user_file_time_column", time_column="t")
    assert "column 't' has 1 null value(s)" in msg


def test_an_unparsable_time_is_refused_quoting_a_short_excerpt(tmp_path):
    late = "later" + "\x1b[2J" + "z" * 500
    path = _write(tmp_path / "k.csv", f"key,t\na,soon\nb,{late}\n")
    msg = _refused(path, "user_file_time_column", time_column="t")
    assert "holds text that is neither numbers nor ISO-8601 timestamps (e.g. 'soon'" in msg


def test_a_text_without_words_is_refused(tmp_path):
    path = _write(tmp_path / "p.txt", "... !!! ---\n")
    assert "'p.txt' has no words" in _refused(path, workload="wordcount")


# --- 4. duplicate column names ------------------------------------------------------------


def test_a_csv_header_key_key_is_refused(tmp_path):
    path = _write(tmp_path / "k.csv", "key,key\n1,2\n3,4\n")
    msg = _refused(path, "user_file_key_column")
    assert "'k.csv' has 2 columns named 'key'; expected distinct column names" in msg


def test_a_parquet_with_duplicate_fields_is_refused(tmp_path):
    path = tmp_path / "k.parquet"
    table = pa.table(
        [pa.array([1, 2]), pa.array([3, 4]), pa.array([5, 6])], names=["a", "key", "a"]
    )
    pq.write_table(table, path)
    msg = _refused(path)
    assert "'k.parquet' has 2 columns named 'a'" in msg


# --- 5. no raw file content ---------------------------------------------------------------


def _no_passwd(msg):
    assert ":x:" not in msg and "root" not in msg and "alice" not in msg.lower(), msg


def test_a_passwd_like_csv_is_not_quoted(tmp_path):
    path = _write(tmp_path / "passwd.csv", PASSWD)
    msg = _refused(path, content=PASSWD)
    _no_passwd(msg)
    assert (
        "cannot read 'passwd.csv' as CSV (line 3 has 4 columns, the header has 1); expected a "
        "CSV file with a header row" in msg
    )


def test_a_ragged_row_after_a_good_header_is_not_quoted(tmp_path):
    content = "key,a,b\n1,2,3\n" + PASSWD
    path = _write(tmp_path / "mixed.csv", content)
    msg = _refused(path, content=content)
    _no_passwd(msg)
    assert "(line 3 has 1 column, the header has 3)" in msg


def test_a_huge_column_name_is_cut(tmp_path):
    name = "secret-" + "x" * 5000
    path = _write(tmp_path / "k.csv", f"{name},other\n1,2\n")
    msg = _refused(path, "user_file_key_column")
    assert "no column 'key' in 'k.csv'; columns found: ['secret-" in msg
    assert "x" * 100 not in msg


def test_a_control_character_file_name_is_escaped(tmp_path):
    path = tmp_path / "\x1b[31mred\x07\u202e.csv"
    pq.write_table(pa.table({"key": [1]}), path)
    msg = _refused(path)
    assert "\\x1b[31mred\\x07\\u202e.csv" in msg
    assert "is a Parquet file" in msg


# --- what passes --------------------------------------------------------------------------


def test_good_files_pass_at_the_door(tmp_path):
    csv = _write(tmp_path / "good.csv", "key,t\napple,1\npear,0.5\nnan,2\n")
    check_inputs(_params(csv, time_column="t"))
    parquet = tmp_path / "good.parquet"
    pq.write_table(pa.table({"key": [5, 3, 5], "t": [0.5, 0.1, 0.2]}), parquet)
    check_inputs(_params(parquet, time_column="t"))
    text = _write(tmp_path / "good.txt", "Über cat, the hat!\n")
    check_inputs(_params(text, workload="wordcount"))
    named = _write(tmp_path / "data.dat", "key\n1\n")  # the format set, not the extension
    check_inputs(_params(named, format="csv"))


def test_a_path_with_a_nul_character_is_refused_naming_the_field(tmp_path):
    msg = _refused(f"{tmp_path}/a\x00b.csv")
    assert "a\\x00b.csv' is not a valid path (it holds a NUL character)" in msg
