"""What every dataset shares: the generator contract, a manifest, a digest, an atomic write.

A dataset is a folder of Parquet tables plus ``manifest.json`` (generator, params, rows
and schema per table, content digest). It is written under a temporary name and renamed
into place at the end, so a failed or interrupted run never leaves a partial dataset
behind. The digest hashes table names, column names, types and values (not Parquet
bytes), so it identifies the data whatever the writer version.

A cached dataset proves itself before it is reused (:func:`verify_dataset`): every file its
manifest names lies inside its folder, and the manifest keeps, per file, its size, the
sha256 of its Parquet footer and the sha256 of all its bytes, which every reuse compares
(cheapest first). A dataset that fails is written again, said in one line naming the
file (on stderr, or as a progress line under ``balancebench run``; one made from a user's
file is read again from that file, whose sha256 its folder's id holds).

A generator is one small class (:class:`Generator`): the flat Params it reads (names in
``DATASET_PARAMS``; a name shared by several generators means the same thing in each),
``write`` (its tables, deterministic from ``params["seed"]``), and the frames its Great
Expectations suites check (``validation_frames``: its tables plus computed *profiles*
such as the fitted Zipf exponent, see ``balancebench.core.profiles``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from balancebench.core.lazy import lazy_module
from balancebench.core.schema import (
    check_values,
    quoted,
    shown_path,
    spec_defaults,
    terminal_safe,
)
from balancebench.state.reaper import remove_orphaned_folders

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")

MANIFEST = "manifest.json"
#: Bumped when the dataset layout changes, so cached datasets of an older layout are
#: regenerated instead of reused (it is part of the folder name).
FORMAT_VERSION = 2
#: Rows per record batch when a generator writes in chunks.
CHUNK_ROWS = 1 << 21

#: Columns every stream-shaped table (``Generator.kind == "stream"``) starts with: what
#: the Spark workloads replay.
STREAM_COLUMNS = ("tuple_id", "event_time_s", "key")


@dataclass(frozen=True)
class Manifest:
    generator: str
    params: dict[str, Any]
    #: Rows of the main table.
    row_count: int
    #: Schema of the main table.
    schema: dict[str, str]
    digest: str
    #: Every file of the dataset (all tables).
    files: list[str]
    #: table -> {"files": [...], "rows": n, "schema": {column: type}}
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    main_table: str = ""
    format_version: int = FORMAT_VERSION
    #: Wall time of the generation (s); not part of the digest.
    generate_s: float = 0.0
    #: file -> {"bytes", "footer_sha256", "sha256"}: what :func:`verify_dataset` compares.
    file_facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    def table_files(self, table: str | None = None) -> list[str]:
        """Files of ``table`` (default: the main table)."""
        name = table or self.main_table
        if name not in self.tables:
            raise KeyError(f"table: dataset has no table {name!r}; it has {sorted(self.tables)}")
        return list(self.tables[name]["files"])

    def rows(self, table: str) -> int:
        return int(self.tables[table]["rows"])


def load_manifest(dataset_dir: str | Path) -> Manifest:
    path = Path(dataset_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"dataset_dir: no {MANIFEST} in {quoted(str(dataset_dir))}")
    fields = sorted(Manifest.__dataclass_fields__)
    expected = f"expected an object with {fields}, as `balancebench generate` writes it"
    where = f"dataset_dir: {MANIFEST} in {quoted(str(dataset_dir))}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON
        raise ValueError(f"{where} is not JSON ({type(exc).__name__}); {expected}") from None
    try:
        manifest = Manifest(**data)
    except TypeError:  # not an object, or fields missing or unknown
        raise ValueError(
            f"{where} is not a dataset manifest (a JSON {type(data).__name__} without its "
            f"fields); {expected}"
        ) from None
    _inside(Path(dataset_dir), manifest, where)
    return manifest


def _named_files(manifest: Manifest) -> list[Any]:
    """Every file name a manifest holds: its files, its tables' and its digests' keys."""
    names = list(manifest.files) if isinstance(manifest.files, list) else [manifest.files]
    tables = manifest.tables if isinstance(manifest.tables, dict) else {}
    for table in tables.values():
        names += table.get("files", []) if isinstance(table, dict) else [table]
    facts = manifest.file_facts if isinstance(manifest.file_facts, dict) else {}
    return names + list(facts)


def _inside(folder: Path, manifest: Manifest, where: str) -> None:
    """``ValueError`` unless every file the manifest names is a file name inside
    ``folder`` (no absolute path, no ``..``, no link out of it): a dataset is what its
    folder holds, and nothing outside it is ever read through its manifest."""
    root = folder.resolve()
    for name in _named_files(manifest):
        path = Path(name) if isinstance(name, str) else None
        if (
            path is None
            or not name
            or path.is_absolute()
            or ".." in path.parts
            or not (root / path).resolve().is_relative_to(root)
        ):
            raise ValueError(
                f"{where} names {quoted(str(name))}, which is not a file inside the dataset "
                "folder; allowed: file names inside it, as `balancebench generate` writes them"
            )


#: A Parquet file ends with its footer's length (4 bytes, little-endian) and ``PAR1``.
_PARQUET_TAIL = 8
_READ_CHUNK = 1 << 20


def _footer(path: Path, size: int) -> bytes:
    """A Parquet file's footer (its file metadata with the 8-byte tail); for a file too
    short or not ending in ``PAR1``, its last bytes (which then differ from the manifest's)."""
    with path.open("rb") as f:
        f.seek(max(0, size - _PARQUET_TAIL))
        tail = f.read(_PARQUET_TAIL)
        length = int.from_bytes(tail[:4], "little") if len(tail) == _PARQUET_TAIL else -1
        if tail[4:] != b"PAR1" or not 0 <= length <= size - 2 * _PARQUET_TAIL:
            return tail
        f.seek(size - _PARQUET_TAIL - length)
        return f.read(length + _PARQUET_TAIL)


def file_sha256(path: Path, each_block: Callable[[bytes], None] | None = None) -> str:
    """sha256 of every byte of ``path``, read once; ``each_block`` sees each block read
    (a check of the same bytes, such as a user file's UTF-8, needs no second read)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_READ_CHUNK):
            digest.update(chunk)
            if each_block is not None:
                each_block(chunk)
    return digest.hexdigest()


def file_facts(path: Path) -> dict[str, Any]:
    """What the manifest keeps of one written file (:func:`verify_dataset` compares it)."""
    size = path.stat().st_size
    footer = hashlib.sha256(_footer(path, size)).hexdigest()
    return {"bytes": size, "footer_sha256": footer, "sha256": file_sha256(path)}


def verify_dataset(folder: Path, manifest: Manifest) -> str | None:
    """None when every file of the dataset is the one its manifest lists; else what differs,
    in words naming the file: each file's size, its Parquet footer, then every byte's
    sha256 (a byte changed inside a data page keeps the size and the footer; measured by
    ``benchmarks/dataset_reuse_check.py``, the sha256 is a small part of a run)."""
    if not manifest.file_facts or set(manifest.file_facts) != set(manifest.files):
        return f"its {MANIFEST} keeps no digests of its files (written before they were kept)"
    for name in manifest.files:
        path, want = folder / name, manifest.file_facts[name]
        try:
            size = path.stat().st_size
            if size != want["bytes"]:
                return f"{name} has {size} bytes where its manifest says {want['bytes']}"
            if hashlib.sha256(_footer(path, size)).hexdigest() != want["footer_sha256"]:
                return f"{name}'s Parquet footer is not the one its manifest keeps"
            if file_sha256(path) != want["sha256"]:
                return f"{name}'s bytes are not the ones its manifest keeps (sha256)"
        except OSError as exc:
            return f"{name} cannot be read ({exc.strerror or type(exc).__name__})"
    return None


def params_id(generator: str, params: dict[str, Any]) -> str:
    """Stable id of a (generator, params, layout) triple: the dataset's folder name."""
    blob = json.dumps(
        {"generator": generator, "params": params, "format": FORMAT_VERSION}, sort_keys=True
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ColumnDigest:
    """Incremental sha256 over record batches, column by column, in a fixed order."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, batch: pa.RecordBatch, table: str = "") -> None:
        if table:
            self._h.update(b"\x00table:" + table.encode())
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            self._h.update(name.encode())
            self._h.update(str(column.type).encode())
            kind = column.type
            if (pa.types.is_integer(kind) or pa.types.is_floating(kind)) and column.null_count == 0:
                self._h.update(np.ascontiguousarray(column.to_numpy()))  # no copy
                continue
            # Anything else (strings, decimals, dates, nulls): the buffers of a compact copy
            # (offsets from 0) - never numpy object arrays, whose bytes are addresses.
            for buf in pa.concat_arrays([column]).buffers():
                if buf is not None:
                    self._h.update(buf)

    def hexdigest(self) -> str:
        return "sha256:" + self._h.hexdigest()


@contextmanager
def _terminate_removes_what_it_wrote(what: str) -> Iterator[None]:
    """Inside the block SIGTERM raises ``SystemExit(143)`` (after one line on stderr), so
    the write unwinds and removes its temporary folder: a stopped ``generate`` leaves
    nothing. Only in the main thread and where SIGTERM still has its default action: a
    host that handles it (Airflow's task runner, ``balancebench run``) keeps its own."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        print(f"{what}: stopped by SIGTERM; nothing of it was kept", file=sys.stderr, flush=True)
        raise SystemExit(128 + signum)

    # pyarrow imports pandas on its first array from numpy (its pandas shim), inside Cython
    # code: a SIGTERM raised there was lost and left pandas half imported, so the write
    # went on and failed with "module 'pandas' has no attribute '__version__'" (exit 1,
    # a traceback; seen under load in `make test`). The writers import it anyway: do it
    # before the handler is in place.
    pa.array(np.zeros(1))
    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def write_atomically(final_dir: Path, write: Callable[[Path], Any]) -> None:
    """Call ``write(tmp_dir)``, then rename ``tmp_dir`` to ``final_dir`` (replacing it).
    An exception, an interrupt or a SIGTERM removes ``tmp_dir``; a writer killed outright
    (SIGKILL) leaves it to the next writer (``reaper.remove_orphaned_folders``)."""
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    # The writer's pid in the name: a folder whose writer died is found and removed
    # (balancebench.state.reaper) by the next command.
    tmp = final_dir.parent / f".{final_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        with _terminate_removes_what_it_wrote(f"dataset {final_dir.name}"):
            write(tmp)
        # Out of the block: a SIGTERM between the two renames must not unwind them.
        if final_dir.exists():
            old = final_dir.parent / f".{final_dir.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            final_dir.rename(old)
            tmp.rename(final_dir)
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:  # a file or a link was in the dataset's place
                old.unlink(missing_ok=True)
        else:
            tmp.rename(final_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def parquet_writer(
    path: Path, schema: pa.Schema, delta_columns: tuple[str, ...] = ()
) -> pq.ParquetWriter:
    """The Parquet writer of every dataset table: zstd; dictionary encoding only for
    string columns (on high-cardinality numbers it is wasted work: measured on the Zipf
    stream, 2.63 s -> 1.88 s per 10M rows without it, 1.46 s with delta-encoded ids)."""
    strings = [
        f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
    ]
    return pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        use_dictionary=strings or False,
        column_encoding={c: "DELTA_BINARY_PACKED" for c in delta_columns} or None,
    )


class TableWriter:
    """Writes a dataset's tables into a folder and keeps the manifest facts and digest."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.digest = ColumnDigest()
        self.tables: dict[str, dict[str, Any]] = {}

    @contextmanager
    def table(
        self, name: str, schema: pa.Schema, delta_columns: tuple[str, ...] = ()
    ) -> Iterator[Callable[[pa.RecordBatch], None]]:
        """``with writer.table("events", SCHEMA) as write: write(batch)``.

        ``delta_columns``: integer columns stored with DELTA_BINARY_PACKED (ids in
        arrival order compress to almost nothing)."""
        path = self.folder / f"{name}.parquet"
        rows = 0
        # Two background threads, each in order (same bytes, same digest): one hashes, one
        # writes, while the generator draws the next batch. sha256 and the Parquet writer
        # release the GIL, so the three share the cores.
        hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"hash-{name}")
        writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"write-{name}")
        pending: list[tuple[Future, Future]] = []
        with parquet_writer(path, schema, delta_columns) as sink:

            def write(batch: pa.RecordBatch) -> None:
                nonlocal rows
                if batch.schema != schema:
                    batch = pa.RecordBatch.from_arrays(
                        [batch.column(i).cast(f.type) for i, f in enumerate(schema)],
                        schema=schema,
                    )
                while len(pending) >= 2:  # at most two batches in flight (bounded memory)
                    for future in pending.pop(0):
                        future.result()
                pending.append(
                    (
                        hasher.submit(self.digest.update, batch, name),
                        writer.submit(sink.write_batch, batch),
                    )
                )
                rows += batch.num_rows

            try:
                yield write
                for futures in pending:
                    for future in futures:
                        future.result()  # a failed write raises here, inside the atomic write
            finally:
                for futures in pending:
                    for future in futures:
                        future.cancel()
                hasher.shutdown(wait=True)
                writer.shutdown(wait=True)
        self.tables[name] = {
            "files": [path.name],
            "rows": rows,
            "schema": {f.name: str(f.type) for f in schema},
        }

    def write_table(self, name: str, table: pa.Table) -> None:
        """A whole in-memory table (small tables, or data already in Arrow)."""
        with self.table(name, table.schema) as write:
            for batch in table.to_batches(max_chunksize=CHUNK_ROWS):
                write(batch)
            if table.num_rows == 0:
                write(pa.RecordBatch.from_pylist([], schema=table.schema))


class Generator(ABC):
    """Base of every dataset generator; subclasses are registered in ``generators``."""

    name: ClassVar[str]
    #: One line: what the dataset is (shown by ``balancebench datasets``).
    description: ClassVar[str] = ""
    #: Paper section or source the dataset follows.
    reference: ClassVar[str] = ""
    #: Names (in ``DATASET_PARAMS``) of the Params this generator reads; ``seed`` included.
    params: ClassVar[tuple[str, ...]] = ()
    #: Specs of the Params only this generator reads (``<generator>_<param>`` names).
    own_params: ClassVar[dict[str, dict[str, Any]]] = {}
    #: The table the workloads read (and whose rows are ``Manifest.row_count``).
    main_table: ClassVar[str] = "events"
    #: ``stream`` when the main table starts with ``STREAM_COLUMNS`` (replayable).
    kind: ClassVar[str] = "stream"

    def check(self, params: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Checks beyond the schema, before any work (e.g. a user file exists)."""

    def input_files(self, params: dict[str, Any]) -> dict[str, tuple[Path, str]]:
        """The user's files the dataset is made from: Param naming the file -> (its path,
        the sha256 ``resolve`` recorded). Default: none (the dataset is generated)."""
        return {}

    def resolve(self, params: dict[str, Any]) -> dict[str, Any]:
        """Params completed from outside the Params, after ``check`` and before the
        dataset id is computed: e.g. the sha256 of an input file, so that an edited file
        makes a new dataset instead of reusing a stale one. Default: unchanged."""
        return params

    @abstractmethod
    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        """Write the tables; deterministic from ``params`` (``params["seed"]``)."""

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        """Frame name -> loader of the frame one GX suite checks: by default every table.

        ``settings`` carries validation Params (e.g. ``zipf_fit_tolerance``).
        """
        return {t: _table_loader(dataset_dir, manifest, t) for t in manifest.tables}

    def suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        """Values the suites refer to with ``{"$PARAMETER": name}``: the params, the
        rows of every table (``rows_<table>``), and what ``extra_suite_parameters`` adds."""
        out: dict[str, Any] = {
            k: v for k, v in manifest.params.items() if isinstance(v, int | float | str)
        }
        out["row_count"] = manifest.row_count
        for table, facts in manifest.tables.items():
            out[f"rows_{table}"] = facts["rows"]
        out.update(self.extra_suite_parameters(manifest))
        return out

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        return {}


def _table_loader(dataset_dir: Path, manifest: Manifest, table: str) -> Callable[[], pd.DataFrame]:
    return lambda: read_table(dataset_dir, manifest, table).to_pandas()


def read_table(
    dataset_dir: str | Path, manifest: Manifest, table: str, columns: list[str] | None = None
) -> pa.Table:
    files = [str(Path(dataset_dir) / f) for f in manifest.table_files(table)]
    return pq.ParquetDataset(files).read(columns=columns)


def say_on_stderr(line: str) -> None:
    """How a dataset's reuse or rewrite is said by default: one line on stderr."""
    print(terminal_safe(line), file=sys.stderr, flush=True)


def _cached(params: dict[str, Any], final_dir: Path, say: Callable[[str], None]) -> Manifest | None:
    """The dataset already in ``final_dir`` when it proves itself (:func:`verify_dataset`);
    None when there is none or it must be written again, which ``say`` tells in one line
    naming what was wrong. One made from a user's file is written again from that file
    too: the folder's id holds the file's sha256, which ``resolve`` has just computed, so
    the rewrite reads exactly the bytes the cached copy was made from."""
    if not final_dir.exists() and not final_dir.is_symlink():
        return None
    if not final_dir.is_dir() or final_dir.is_symlink():
        problem = "is not a dataset folder (a file or a link is in its place)"
    elif not (final_dir / MANIFEST).is_file():
        problem = f"has no {MANIFEST}"
    else:
        try:
            manifest = load_manifest(final_dir)
            problem = verify_dataset(final_dir, manifest)
        except (ValueError, TypeError) as exc:  # not JSON, not a manifest, a path outside
            problem = str(exc).removeprefix("dataset_dir: ")
    if problem is None:
        say(
            f"dataset {final_dir}: reused, {manifest.row_count:,} rows written earlier "
            "with these params (checked: every byte's sha256)"
        )
        return manifest
    say(f"dataset {final_dir}: {problem}; writing it again")
    return None


def _sources_unchanged(generator: Generator, params: dict[str, Any]) -> None:
    """The user's files still hold the bytes ``resolve`` hashed, so the dataset is made of
    exactly what its id names: one that changed while it was read is refused."""
    for param, (path, recorded) in generator.input_files(params).items():
        now = file_sha256(path)
        if now != recorded:
            raise ValueError(
                f"{param}: {shown_path(path)} changed while it was read (sha256 "
                f"{recorded[:12]}... before, {now[:12]}... after); nothing was kept: run "
                "again once the file is complete"
            )


def run_generator(
    generator: Generator,
    out_root: str | Path,
    values: dict[str, Any],
    specs: dict[str, dict],
    *,
    checked: bool = False,
    say: Callable[[str], None] = say_on_stderr,
) -> tuple[Path, Manifest]:
    """Check the params, then write the dataset under ``out_root/<name>/<params id>``
    (reused when one is already there and proves itself, :func:`verify_dataset`; ``say``
    tells either in one line). Temporary folders of writers that are gone are removed
    first.

    ``checked``: the values passed a door that checked them against these specs (the
    Params of a DAG, the CLI, a sweep cell): they are trusted, their defaults filled in;
    only the generator's own checks beyond the schema (``Generator.check``) run here."""
    mine = {k: specs[k] for k in generator.params}
    if checked:
        params = {**spec_defaults(mine), **{k: v for k, v in values.items() if k in mine}}
    else:
        params = check_values(mine, values, what=f"{generator.name} params")
    generator.check(params)
    params = generator.resolve(dict(params))
    remove_orphaned_folders(Path(out_root))
    final_dir = Path(out_root) / generator.name / params_id(generator.name, params)
    cached = _cached(params, final_dir, say)
    if cached is not None:
        return final_dir, cached
    result: dict[str, Manifest] = {}

    def write(tmp: Path) -> None:
        started = time.perf_counter()
        out = TableWriter(tmp)
        generator.write(out, params)
        _sources_unchanged(generator, params)
        main = out.tables[generator.main_table]
        manifest = Manifest(
            generator=generator.name,
            params=params,
            row_count=int(main["rows"]),
            schema=dict(main["schema"]),
            digest=out.digest.hexdigest(),
            files=[f for t in out.tables.values() for f in t["files"]],
            tables=out.tables,
            main_table=generator.main_table,
            generate_s=time.perf_counter() - started,
            file_facts={f: file_facts(tmp / f) for t in out.tables.values() for f in t["files"]},
        )
        (tmp / MANIFEST).write_text(manifest.to_json())
        result["manifest"] = manifest

    write_atomically(final_dir, write)
    return final_dir, result["manifest"]


def poisson_times(rng: np.random.Generator, rows: int, rate: float, start: float) -> np.ndarray:
    """Arrival times of a Poisson process at ``rate`` per second after ``start``."""
    return start + np.cumsum(rng.exponential(1.0 / rate, rows))
