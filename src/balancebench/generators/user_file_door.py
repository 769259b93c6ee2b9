"""The user file's door: what a path must be (a regular, readable file outside the
pseudo file systems), its sha256 pinned and re-checked, its format sniffed and its CSV
header and rows checked before the generator reads it; each refusal one line naming the
field and what is allowed. The generator that reads it is :mod:`.user_file`."""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import stat
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from balancebench.core.schema import quoted, shown_path
from balancebench.generators import common

FORMATS_BY_SUFFIX = {
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".txt": "text",
    ".text": "text",
}


#: Bytes sniffed at the start of a file to tell its format (and binary from text).
SNIFF_BYTES = 1 << 16


#: Parquet's magic number, at the start and at the end of every Parquet file.
PARQUET_MAGIC = b"PAR1"


#: Pseudo-file systems: their files' sizes are not their contents (``/dev/shm`` is real).
PSEUDO_ROOTS = ("/proc", "/sys", "/dev")


def file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO, a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "a special file")


def pseudo_root(path: Path) -> str | None:
    """``/proc``, ``/sys`` or ``/dev`` when the real path is under one (not ``/dev/shm``)."""
    real = os.path.realpath(path)
    if real == "/dev/shm" or real.startswith("/dev/shm/"):
        return None
    return next((r for r in PSEUDO_ROOTS if real == r or real.startswith(r + "/")), None)


def existing_file(field: str, path: str | Path, what: str) -> Path:
    """``path`` as a Path if it is an existing, readable, non-empty regular file, else
    ``ValueError(field...)``. A FIFO is refused from ``stat`` (opening it would block),
    and so are pseudo-files under /proc, /sys and /dev (their size is not their content)."""
    p = Path(path).expanduser()
    shown = shown_path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise ValueError(f"{field}: {shown} does not exist; expected an existing {what}") from None
    except ValueError:  # a NUL character (os.stat refuses it before asking the system)
        raise ValueError(
            f"{field}: {shown} is not a valid path (it holds a NUL character); expected the "
            f"path of an existing {what}"
        ) from None
    except OSError as exc:
        raise ValueError(
            f"{field}: cannot read {shown} ({exc.strerror or type(exc).__name__}); expected a "
            f"readable {what}"
        ) from None
    if stat.S_ISDIR(mode):
        raise ValueError(
            f"{field}: {shown} is not a file (it is a directory); expected a regular file: an "
            f"existing {what}"
        )
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"{field}: {shown} is not a regular file (it is {file_kind(mode)}); expected an "
            f"existing {what}"
        )
    root = pseudo_root(p)
    if root is not None:
        raise ValueError(
            f"{field}: {shown} is not a regular file (a pseudo-file under {root}, whose size "
            f"is not its content); expected an existing {what} (copy it to a file first)"
        )
    try:
        with p.open("rb"):
            pass
    except OSError as exc:
        raise ValueError(
            f"{field}: cannot read {shown} ({exc.strerror or type(exc).__name__}); expected a "
            f"readable {what}"
        ) from None
    if p.stat().st_size == 0:
        raise ValueError(f"{field}: {shown} is empty; expected a non-empty {what}")
    return p


def file_sha256(field: str, path: Path, *, utf8: bool = False) -> str:
    """Hex sha256 of the file (:func:`common.file_sha256`, read once); with ``utf8``, the
    same blocks are checked to be UTF-8 text. An unreadable file or invalid text is a
    ``ValueError`` naming ``field``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0

    def check_text(block: bytes) -> None:
        nonlocal offset
        # The decoder puts a character cut by the last block in front of this one: its
        # error positions count from those kept bytes.
        kept = len(decoder.getstate()[0])
        try:
            decoder.decode(block)
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{field}: {shown_path(path)} is not UTF-8 text (invalid byte at "
                f"offset {offset - kept + exc.start}); expected a UTF-8 text file"
            ) from None
        offset += len(block)

    try:
        digest = common.file_sha256(path, check_text if utf8 else None)
    except OSError as exc:
        raise ValueError(
            f"{field}: cannot read {shown_path(path)} ({exc.strerror or type(exc).__name__}); "
            "expected a readable file"
        ) from None
    if utf8:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise ValueError(
                f"{field}: {shown_path(path)} is not UTF-8 text (truncated character at "
                "the end); expected a UTF-8 text file"
            ) from None
    return digest


def pin_sha256(params: dict[str, Any], field: str, actual: str) -> dict[str, Any]:
    """``params`` with ``actual`` in ``params[field]``; a digest the user gave must match.

    Called from ``resolve``, before the dataset id is computed, so the recorded digest
    makes the id (and the manifest) follow the file's content, not only its path.
    """
    given = params.get(field)
    if given not in (None, "") and str(given).lower() != actual:
        raise ValueError(
            f"{field}: the file's sha256 is {actual}, not the {quoted(given)} given; expected the "
            "digest of the current file (or null to accept any content)"
        )
    return {**params, field: actual}


def file_format(params: dict[str, Any], path: Path) -> str:
    fmt = params["user_file_format"]
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix not in FORMATS_BY_SUFFIX:
        raise ValueError(
            f"user_file_format: cannot tell the format of {quoted(path.name)} from its "
            f"extension {quoted(suffix)}; expected a file ending in {sorted(FORMATS_BY_SUFFIX)}, "
            "or set user_file_format to 'csv', 'parquet' or 'text'"
        )
    return FORMATS_BY_SUFFIX[suffix]


def names_shown(names: list[str], most: int = 10) -> str:
    """Column names as a message lists them: each quoted short, at most ``most`` of them."""
    shown = ", ".join(quoted(n, 40) for n in names[:most])
    more = f", ... (+{len(names) - most} more)" if len(names) > most else ""
    return f"[{shown}{more}]"


def missing_column(field: str, column: str, path: Path, names: list[str]) -> ValueError:
    return ValueError(
        f"{field}: no column {quoted(column)} in {quoted(path.name)}; columns found: "
        f"{names_shown(names)}; expected one of those"
    )


def sniff(params: dict[str, Any], path: Path, fmt: str) -> None:
    """Refuse content that is not ``fmt``, whatever the name says (a few bytes read)."""
    name = quoted(path.name)
    if params["user_file_format"] == "auto":
        source = f"from its extension {quoted(path.suffix.lower())}"
    else:
        source = "from user_file_format"
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES)
        f.seek(max(0, path.stat().st_size - len(PARQUET_MAGIC)))
        tail = f.read()
    starts_parquet = head.startswith(PARQUET_MAGIC)
    if fmt == "parquet":
        if not (starts_parquet and tail == PARQUET_MAGIC and len(head) >= 3 * 4):
            if head.startswith(b"\xef\xbb\xbf") or (b"\0" not in head and utf8_prefix(head)):
                looks = "; it looks like text"
            else:
                looks = ""
            raise ValueError(
                f"user_file_path: {name} is not a Parquet file (it does not start and end with "
                f"PAR1{looks}); expected a Parquet file, or set user_file_format to 'csv' or "
                "'text'"
            )
        return
    if starts_parquet:
        raise ValueError(
            f"user_file_path: {name} is a Parquet file (it starts with PAR1), but its format "
            f"is {fmt} ({source}); rename it to .parquet or set user_file_format to 'parquet'"
        )
    expected = "a CSV file in UTF-8 text" if fmt == "csv" else "a UTF-8 text file"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(
            f"user_file_path: {name} is UTF-16 text (it starts with a UTF-16 byte-order "
            f"mark); expected {expected} (convert it, e.g. iconv -f UTF-16 -t UTF-8)"
        )
    nul = head.find(b"\0")
    if nul >= 0:
        raise ValueError(
            f"user_file_path: {name} is binary (a NUL byte at offset {nul}); expected {expected}"
        )


def utf8_prefix(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 text, allowing a character cut at its end."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data)
    except UnicodeDecodeError:
        return False
    return True


def csv_error(path: Path, exc: Exception) -> ValueError:
    """The ``ValueError`` for a CSV pyarrow cannot read: numbers from its message, never
    its text (it quotes whole lines of the file)."""
    return ValueError(
        f"user_file_path: cannot read {quoted(path.name)} as CSV ({csv_reason(path, exc)}); "
        "expected a CSV file with a header row"
    )


def csv_reason(path: Path, exc: Exception) -> str:
    message = str(exc)
    if "Expected" in message and "columns" in message:
        bad: list[tuple[int, int, int | None]] = []

        def first_bad(row: Any) -> str:
            if not bad:
                bad.append((row.expected_columns, row.actual_columns, row.number))
            return "error"

        # Again, on one thread: the handler then knows the row's line number.
        with contextlib.suppress(pa.ArrowException, OSError):
            pacsv.read_csv(
                path,
                read_options=pacsv.ReadOptions(use_threads=False),
                parse_options=pacsv.ParseOptions(invalid_row_handler=first_bad),
            )
        if bad:
            expected, actual, line = bad[0]
            where = f"line {line}" if line else "a row"
            return f"{where} has {actual} column{'s' * (actual != 1)}, the header has {expected}"
        counts = re.search(r"Expected (\d+) columns, got (\d+)", message)
        if counts:
            expected, actual = int(counts.group(1)), int(counts.group(2))
            return f"a row has {actual} column{'s' * (actual != 1)}, the header has {expected}"
    if "Empty CSV file" in message:
        return "it has no header row"
    if "straddling object" in message:
        return "a row longer than 1 MiB"
    conversion = re.search(r"column #(\d+): CSV conversion error to ([\w\[\], ]+?):", message)
    if conversion:
        column, kind = conversion.groups()
        return f"a value in column #{column} (0-based) does not convert to {kind}"
    return "not well-formed CSV"


def csv_reader(path: Path, **convert: Any) -> pacsv.CSVStreamingReader:
    try:
        return pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=1 << 20),
            convert_options=pacsv.ConvertOptions(**convert),
        )
    except pa.ArrowException as exc:
        raise csv_error(path, exc) from None


def check_csv_rows(path: Path) -> None:
    """Parse every row of a CSV (one column converted): a ragged row is refused."""
    try:
        first = csv_reader(path).schema.names[0]
        pacsv.read_csv(
            path,
            convert_options=pacsv.ConvertOptions(
                include_columns=[first], column_types={first: pa.string()}
            ),
        )
    except pa.ArrowException as exc:
        raise csv_error(path, exc) from None


def no_duplicate_columns(params: dict[str, Any], path: Path, names: list[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            if name == params["user_file_key_column"]:
                field = "user_file_key_column"
            elif name == params["user_file_time_column"]:
                field = "user_file_time_column"
            else:
                field = "user_file_path"
            raise ValueError(
                f"{field}: {quoted(path.name)} has {names.count(name)} columns named "
                f"{quoted(name)}; expected distinct column names"
            )
        seen.add(name)
