"""``user_file``: a user's own CSV, Parquet or text file replayed as a key stream.

This is how the pipeline runs on real data. Table ``events``: ``tuple_id`` (int64,
0..n-1 in event-time order), ``event_time_s`` (float64, seconds since the first event:
starts at 0, non-decreasing), ``key`` (int64). Table ``keys``: ``key`` (int64),
``value`` (string): one row per distinct key, sorted by ``key``.

- **Keys.** CSV/Parquet: the ``user_file_key_column`` column; a text file: its words.
  Integer columns (and text keys, from a CSV, a Parquet string column or a text file's
  words, whose every value is the canonical text of an int64, e.g. ``42`` but not ``007``)
  keep their integers as keys and ``keys.value`` is ``str(key)``. Any other key column
  (other text, floats, dates, ...) is dictionary-encoded: its values as text, sorted by
  UTF-8 bytes (code-point order) and numbered 0..k-1, so the encoding is deterministic.
  ``keys`` is written in both cases, so every dataset of this generator has one layout.
  In a CSV only an empty field is a null (``NA``, ``null`` are ordinary keys).
- **Text.** Every word is one tuple, in reading order: words are maximal runs of
  ``[\\p{L}\\p{N}_]`` (Unicode letters, digits, underscore: Python's ``\\w+`` up to rare
  code points) after Unicode lower-casing (Arrow's ``utf8_lower``); see :func:`words`.
  The same pattern works in RE2, Java (Spark) and the ``regex`` module.
- **Time.** With ``user_file_time_column``, numeric seconds or timestamps (ISO-8601 text
  in a CSV) become seconds since the earliest value; rows are sorted by it (stable, so
  ties keep file order). Without it, arrivals are a Poisson process at the shared
  ``input_rate_tuples_per_s`` from ``seed`` (the first tuple at 0 s).
- **Identity.** The dataset folder name hashes the params, and the params name only the
  path, so ``resolve`` records the file's sha256 in ``user_file_sha256``: a changed file
  gets a new dataset instead of a stale one. Given by the user, ``user_file_sha256`` pins
  the content (a different file fails).

Bad input fails before any table is written, with a ``ValueError`` naming the Param,
and all of it at the door: ``check`` (which ``balancebench.experiment.params.check_inputs`` calls
before a DAG run starts) refuses a missing, empty or unreadable path; anything but a
regular file (a directory, FIFO, device) and pseudo-files under ``/proc``, ``/sys`` and
``/dev`` (their size is not their content); an unknown extension; content that is not
its format (sniffed, whatever the name says: Parquet starts and ends with ``PAR1``; a
CSV or text file with a NUL byte in its first 64 KiB is binary; and it must be UTF-8
throughout); CSV rows whose column count differs from the header's; duplicate column
names; a missing key or time column (the columns found are listed); no data rows, or a
text without words; nulls or NaN in the key column, key values that are not scalars;
nulls in the time column, or a time column that is neither numbers nor timestamps.
``check`` reads the key and time columns to find these; ``write`` loads them again and
keeps the value checks, so a direct call fails the same way before writing anything.
Messages quote a user's value (file and column names, a key or time value) with
:func:`balancebench.core.schema.quoted` (escaped, at most a short excerpt) and never a
library message that could hold a line of the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from balancebench.core.lazy import lazy_module
from balancebench.core.schema import quoted
from balancebench.generators.common import (
    CHUNK_ROWS,
    Generator,
    Manifest,
    TableWriter,
    poisson_times,
    read_table,
)
from balancebench.generators.user_file_door import (
    check_csv_rows,
    csv_error,
    csv_reader,
    existing_file,
    file_format,
    file_sha256,
    missing_column,
    no_duplicate_columns,
    pin_sha256,
    sniff,
)

#: A word: a maximal run of Unicode letters, digits and underscores (RE2/Java syntax).
WORD_PATTERN = r"[\p{L}\p{N}_]+"
#: What separates words (the complement of ``WORD_PATTERN``).
NON_WORD_PATTERN = r"[^\p{L}\p{N}_]+"
#: Bytes read at a time from a text file (cut at a newline).
TEXT_BLOCK_BYTES = 1 << 25


EVENTS_SCHEMA = pa.schema(
    [("tuple_id", pa.int64()), ("event_time_s", pa.float64()), ("key", pa.int64())]
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")
KEYS_SCHEMA = pa.schema([("key", pa.int64()), ("value", pa.string())])


# --- Files, shared with the ``tasks`` generator -------------------------------------------


def read_lines(path: Path, block_bytes: int = TEXT_BLOCK_BYTES) -> Iterator[pa.Array]:
    """The file's lines (without ``\\n`` / ``\\r\\n``), as string arrays, block by block.

    A final line without a newline counts; a trailing newline does not add an empty line.
    """
    with path.open("rb") as f:
        rest = b""
        while True:
            block = f.read(block_bytes)
            data = rest + block
            if not block:
                if data:
                    yield _lines_array(data)
                return
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1 :]
            yield _lines_array(data[:cut])


def _lines_array(data: bytes) -> pa.Array:
    lines = data.decode("utf-8").split("\n")
    array = pa.array(lines, type=pa.string())
    return pc.replace_substring_regex(array, r"\r$", "")


def words(lines: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The lower-cased words of ``lines`` in reading order (the tokenizer of this project)."""
    split = pc.split_pattern_regex(pc.utf8_lower(lines), NON_WORD_PATTERN)
    flat = pc.list_flatten(split)
    return pc.filter(flat, pc.not_equal(flat, ""))


def count_words(lines: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Words per line (int64; null lines count 0), same tokenizer as :func:`words`."""
    counts = pc.count_substring_regex(lines, WORD_PATTERN)
    return pc.fill_null(counts, 0).to_numpy(zero_copy_only=False).astype(np.int64)


# --- The generator -------------------------------------------------------------------------


class UserFile(Generator):
    name = "user_file"
    description = "A user's CSV, Parquet or text file (words become keys) replayed as a stream."
    reference = "issue: user files (real data through the same pipeline)"
    kind = "stream"
    main_table = "events"
    params = (
        "user_file_path",
        "user_file_format",
        "user_file_key_column",
        "user_file_time_column",
        "user_file_sha256",
        "input_rate_tuples_per_s",
        "seed",
    )
    own_params = {
        "user_file_path": {
            # Null by default: an empty string would make Airflow's trigger form refuse
            # the defaults of every DAG (it treats "" as a missing required field).
            "type": ["string", "null"],
            "maxLength": 4096,
            "default": None,
            "title": "User file: path",
            "description": "The CSV, Parquet or text file to replay (required for this "
            "dataset; an absolute path is safest, Airflow tasks may run elsewhere).",
        },
        "user_file_format": {
            "type": "string",
            "enum": ["auto", "csv", "parquet", "text"],
            "default": "auto",
            "title": "User file: format",
            "description": "auto: from the extension (.csv; .parquet/.pq; .txt/.text). "
            "text: every lower-cased word (run of letters, digits, _) is one tuple.",
        },
        "user_file_key_column": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "default": "key",
            "title": "User file: key column",
            "description": "CSV/Parquet column holding the key (ignored for text). Integers "
            "stay keys; other values are numbered in sorted order (table keys).",
        },
        "user_file_time_column": {
            "type": ["string", "null"],
            "maxLength": 1000,
            "default": None,
            "title": "User file: time column",
            "description": "Optional CSV/Parquet column of event times (numeric seconds or "
            "timestamps); rows are sorted by it. Null: Poisson arrivals at "
            "input_rate_tuples_per_s.",
        },
        "user_file_sha256": {
            "type": ["string", "null"],
            "pattern": "^([0-9a-fA-F]{64})?$",
            "default": None,
            "title": "User file: sha256",
            "description": "Recorded by the generator (the file's content digest, part of "
            "the dataset id). Set it to pin the content: a different file fails.",
        },
    }

    # --- checks before any work ---

    def check(self, params: dict[str, Any]) -> None:
        """Everything ``write`` would refuse, refused here first: the file, its format
        (sniffed from the content), its columns and the key and time values (read)."""
        path_text = params["user_file_path"]
        if not path_text:
            raise ValueError(
                "user_file_path: required for dataset 'user_file'; expected the path of a "
                "CSV, Parquet or text file (e.g. /data/clicks.csv)"
            )
        path = existing_file("user_file_path", path_text, "CSV, Parquet or text file")
        fmt = file_format(params, path)
        if fmt == "text" and params["user_file_time_column"]:
            raise ValueError(
                "user_file_time_column: a text file has no columns; expected null for "
                "format 'text' (words arrive at input_rate_tuples_per_s)"
            )
        sniff(params, path, fmt)
        if fmt != "parquet":
            file_sha256("user_file_path", path, utf8=True)  # names the first invalid byte
        if fmt == "text":
            if not any(count_words(lines).any() for lines in read_lines(path)):
                raise _no_words(path)
            return
        names = self._columns(path, fmt)
        no_duplicate_columns(params, path, names)
        key = params["user_file_key_column"]
        time_col = params["user_file_time_column"]
        for field, column in (("user_file_key_column", key), ("user_file_time_column", time_col)):
            if column and column not in names:
                if fmt == "csv":
                    check_csv_rows(path)  # a text that is not CSV: say so, not its "columns"
                raise missing_column(field, column, path, names)
        keys, _ = self._load(params)
        _check_key_type(key, keys)

    def resolve(self, params: dict[str, Any]) -> dict[str, Any]:
        path = Path(params["user_file_path"]).expanduser()
        sha = file_sha256("user_file_path", path, utf8=file_format(params, path) == "text")
        return pin_sha256(params, "user_file_sha256", sha)

    def input_files(self, params: dict[str, Any]) -> dict[str, tuple[Path, str]]:
        path = Path(params["user_file_path"]).expanduser()
        return {"user_file_path": (path, params["user_file_sha256"])}

    @staticmethod
    def _columns(path: Path, fmt: str) -> list[str]:
        if fmt == "parquet":
            try:
                return list(pq.ParquetFile(path).schema_arrow.names)
            except (pa.ArrowException, OSError):
                raise ValueError(
                    f"user_file_path: {quoted(path.name)} is not a readable Parquet file (its "
                    "metadata is corrupt or uses a feature this pyarrow cannot read); expected "
                    "a Parquet file, or set user_file_format"
                ) from None
        return list(csv_reader(path).schema.names)

    # --- loading (the value checks: run by ``check``, and again before writing) ---

    def _load(self, params: dict[str, Any]) -> tuple[pa.ChunkedArray, np.ndarray | None]:
        """The key values in file order and the seconds since the first event (or None)."""
        path = Path(params["user_file_path"]).expanduser()
        fmt = file_format(params, path)
        if fmt == "text":
            chunks = [words(lines) for lines in read_lines(path)]
            tokens = pa.chunked_array(chunks, type=pa.string())
            if len(tokens) == 0:
                raise _no_words(path)
            return tokens, None
        key_col, time_col = params["user_file_key_column"], params["user_file_time_column"]
        columns = [key_col] + ([time_col] if time_col and time_col != key_col else [])
        if fmt == "parquet":
            try:
                table = pq.read_table(path, columns=columns)
            except (pa.ArrowException, OSError):
                raise ValueError(
                    f"user_file_path: cannot read {quoted(path.name)} as Parquet (its data is "
                    "corrupt or uses a feature this pyarrow cannot read); expected a readable "
                    "Parquet file"
                ) from None
        else:
            try:
                table = pacsv.read_csv(
                    path,
                    convert_options=pacsv.ConvertOptions(
                        include_columns=columns,
                        column_types={key_col: pa.string()},
                        null_values=[""],
                        strings_can_be_null=True,
                    ),
                )
            except pa.ArrowException as exc:
                raise csv_error(path, exc) from None
        if table.num_rows == 0:
            raise ValueError(
                f"user_file_path: {quoted(path.name)} has no data rows; expected at least one row"
            )
        keys = table.column(key_col)
        _no_nulls("user_file_key_column", key_col, keys)
        _no_nan_keys(key_col, keys)
        seconds = None
        if time_col:
            times = table.column(time_col)
            _no_nulls("user_file_time_column", time_col, times)
            seconds = _seconds_since_first(time_col, times)
        return keys, seconds

    # --- writing ---

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        values, seconds = self._load(params)
        keys, dictionary = encode_keys(params["user_file_key_column"], values)
        del values
        n = len(keys)
        if seconds is None:
            rng = np.random.default_rng(params["seed"])
            times = np.zeros(n)
            if n > 1:
                times[1:] = poisson_times(rng, n - 1, params["input_rate_tuples_per_s"], 0.0)
        else:
            order = np.argsort(seconds, kind="stable")
            keys, times = keys[order], seconds[order]
        with out.table("events", EVENTS_SCHEMA) as write:
            for start in range(0, n, CHUNK_ROWS):
                stop = min(n, start + CHUNK_ROWS)
                write(
                    pa.record_batch(
                        [
                            pa.array(np.arange(start, stop, dtype=np.int64)),
                            pa.array(times[start:stop]),
                            pa.array(keys[start:stop]),
                        ],
                        schema=EVENTS_SCHEMA,
                    )
                )
        out.write_table("keys", dictionary)

    # --- validation ---

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)

        def profile_keys() -> pd.DataFrame:
            events = read_table(dataset_dir, manifest, "events", ["key"]).column(0).drop_null()
            listed = read_table(dataset_dir, manifest, "keys", ["key"]).column(0).drop_null()
            distinct = pc.unique(events)
            known = pc.sum(pc.is_in(distinct, value_set=listed)).as_py() or 0
            unknown = len(distinct) - int(known)
            counts = pc.value_counts(events).field("counts") if len(events) else pa.array([0])
            top = int(pc.max(counts).as_py() or 0)
            row = {
                "tuples": len(events),
                "distinct_keys": len(distinct),
                "keys_listed": len(listed),
                "unknown_keys": unknown,
                "top_key_share": top / len(events) if len(events) else 0.0,
                # Every key of the stream is listed, and nothing else is.
                "keys_match": int(unknown == 0 and len(distinct) == len(pc.unique(listed))),
            }
            return pd.DataFrame([row])

        frames["profile_keys"] = profile_keys
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        return {"max_tuple_id": manifest.row_count - 1}


def _no_words(path: Path) -> ValueError:
    return ValueError(
        f"user_file_path: {quoted(path.name)} has no words (runs of letters, digits or _); "
        "expected a text file with at least one word"
    )


def _no_nulls(field: str, column: str, values: pa.ChunkedArray) -> None:
    nulls = values.null_count
    if nulls:
        first = int(np.flatnonzero(pc.is_null(values).to_numpy(zero_copy_only=False))[0])
        raise ValueError(
            f"{field}: column {quoted(column)} has {nulls} null value(s), the first in data row "
            f"{first} (0-based); expected a value in every row"
        )


def _no_nan_keys(column: str, values: pa.ChunkedArray) -> None:
    """NaN is not a key (NaN != NaN; as text it would become a key ``"nan"``): refused in
    a float column, and in a text column whose every value is a number."""
    kind = values.type
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        try:
            values = values.cast(pa.float64())
        except pa.ArrowException:
            return  # words: "nan" is a word like any other
    elif not pa.types.is_floating(kind):
        return
    nan = pc.is_nan(values).to_numpy(zero_copy_only=False)
    if nan.any():
        raise ValueError(
            f"user_file_key_column: column {quoted(column)} has {int(nan.sum())} NaN value(s), the "
            f"first in data row {int(np.flatnonzero(nan)[0])} (0-based); expected a number "
            "in every row (NaN equals no key, itself included)"
        )


def _seconds_since_first(column: str, values: pa.ChunkedArray) -> np.ndarray:
    """float64 seconds since the earliest value of a numeric or timestamp column."""
    field = "user_file_time_column"
    expected = "expected numeric seconds or timestamps (ISO-8601 text in a CSV)"
    kind = values.type
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        values = _parse_time_text(column, values)
        kind = values.type
    if pa.types.is_date(kind):
        values = values.cast(pa.timestamp("ms"))
        kind = values.type
    if pa.types.is_timestamp(kind):
        ticks = values.cast(pa.int64()).to_numpy()
        per_second = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[kind.unit]
        return (ticks - ticks.min()).astype(np.float64) / per_second
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        numbers = values.cast(pa.float64()).to_numpy()
        bad = ~np.isfinite(numbers)
        if bad.any():
            raise ValueError(
                f"{field}: column {quoted(column)} has {int(bad.sum())} value(s) that are not "
                f"finite numbers, the first in data row {int(np.flatnonzero(bad)[0])}; {expected}"
            )
        return numbers - numbers.min()
    raise ValueError(f"{field}: column {quoted(column)} is of type {kind}; {expected}")


def _parse_time_text(column: str, values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Text times: numbers of seconds, or ISO-8601 timestamps (naive or with an offset)."""
    for target in (pa.float64(), pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")):
        try:
            return values.cast(target)
        except pa.ArrowException:
            continue
    row, value = _first_unparsable(values)
    where = f"e.g. {quoted(value)} in data row {row}" if row >= 0 else "mixed formats"
    raise ValueError(
        f"user_file_time_column: column {quoted(column)} holds text that is neither numbers nor "
        f"ISO-8601 timestamps ({where}); expected numeric seconds or timestamps, all naive "
        "or all with a zone offset"
    )


def _first_unparsable(values: pa.ChunkedArray) -> tuple[int, str]:
    """(row, value) of the first text that is neither a number nor an ISO-8601 time."""
    for row, value in enumerate(values.to_pylist()):
        try:
            float(value)
            continue
        except ValueError:
            pass
        try:
            datetime.fromisoformat(value)
        except ValueError:
            return row, value
    return -1, ""


def encode_keys(column: str, values: pa.ChunkedArray) -> tuple[np.ndarray, pa.Table]:
    """int64 keys and the ``keys`` table (key, value) for key values in file order.

    Integers are kept; anything else is numbered by the sorted order of its text.
    """
    kind = values.type
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if pa.types.is_integer(kind) and kind != pa.uint64():
        ints = values.cast(pa.int64())
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        ints = _canonical_ints(values)
    elif kind == pa.uint64() and (pc.max(values).as_py() or 0) < 2**63:
        ints = values.cast(pa.int64())
    else:
        ints = None
    if ints is not None:
        keys = ints.to_numpy()
        unique = np.unique(keys)
        table = pa.table(
            {"key": pa.array(unique), "value": pc.cast(pa.array(unique), pa.string())},
            schema=KEYS_SCHEMA,
        )
        return keys, table
    _check_key_type(column, values)
    text = values.cast(pa.string())
    unique = pc.unique(text)
    unique = unique.take(pc.sort_indices(unique))
    keys = pc.index_in(text, value_set=unique).to_numpy().astype(np.int64)
    table = pa.table(
        {"key": pa.array(np.arange(len(unique), dtype=np.int64)), "value": unique},
        schema=KEYS_SCHEMA,
    )
    return keys, table


def _check_key_type(column: str, values: pa.ChunkedArray) -> None:
    """Refuse key values that are not scalars or do not read as text (a type check;
    only a column of another kind, such as bytes, is cast to find out)."""
    kind = values.type
    if pa.types.is_dictionary(kind):
        values = values.cast(kind.value_type)
        kind = values.type
    if pa.types.is_nested(kind):
        raise ValueError(
            f"user_file_key_column: column {quoted(column)} is of type {kind}; expected scalar "
            "keys (integers, text, numbers, dates)"
        )
    always_text = (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_decimal,
        pa.types.is_temporal,
        pa.types.is_boolean,
        pa.types.is_string,
        pa.types.is_large_string,
    )
    if any(test(kind) for test in always_text):
        return
    try:
        values.cast(pa.string())
    except pa.ArrowException:
        raise ValueError(
            f"user_file_key_column: column {quoted(column)} of type {kind} cannot be read as "
            "text (e.g. bytes that are not UTF-8); expected integers or text"
        ) from None


def _canonical_ints(text: pa.ChunkedArray) -> pa.ChunkedArray | None:
    """The values as int64 if every one is the canonical text of an int64, else None."""
    # A failing cast scans the whole column (seconds at 10M rows): try a prefix first.
    for values in (text.slice(0, 1000), text):
        try:
            ints = values.cast(pa.int64())
        except pa.ArrowException:
            return None
        if not pc.all(pc.equal(ints.cast(pa.string()), values)).as_py():
            return None
    return ints
