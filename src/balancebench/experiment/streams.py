"""The replayed input of a workload: one table of tuples in arrival order.

Every workload is replayed from a *stream file* with the columns

- ``side`` (string): ``"A"`` for an aggregation; ``"R"``/``"S"`` for the two join inputs
  (eq5: ``R`` = lineitem, ``S`` = supplier; band: ``R`` = L1, ``S`` = L2);
- ``tuple_id`` (int64): unique over both sides, ``0..n-1`` in arrival order;
- ``key`` (int64): the grouping or join key;
- ``event_time_s`` (float64): arrival time, non-decreasing;
- ``payload`` (int64): carried to the output (eq5: the supplier's region key after the
  ``Region ⋈ Nation ⋈ Supplier`` dimension join; band/wordcount/streams: 0 or the
  source row).

A stream dataset (``kind == "stream"``) already is such a table (its ``events``), so it
is read in place. TPC-H joins and the ``tasks`` text are turned into a stream file here,
deterministically from the dataset digest and the Params (``seed``,
``input_rate_tuples_per_s``, ``band_width`` is not needed): the tuples of both join
sides are interleaved in a seeded random order and given Poisson arrival times at
``input_rate_tuples_per_s``, so both sides are streamed; with ``join_arrival`` =
``s_first`` every S tuple arrives before the R tuples (each side in its interleaved
order, the same Poisson times). Stream files are cached under
``.local/streams/<id>/`` and written atomically.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from balancebench.core.workloads import get_workload
from balancebench.experiment.params import WORKLOAD_ONLY
from balancebench.generators import get_generator, load_manifest, read_table
from balancebench.generators.common import poisson_times, write_atomically
from balancebench.state.paths import local_dir

STREAM_SCHEMA = pa.schema(
    [
        ("side", pa.string()),
        ("tuple_id", pa.int64()),
        ("key", pa.int64()),
        ("event_time_s", pa.float64()),
        ("payload", pa.int64()),
    ]
)
#: Bump when a stream's construction changes (part of the cache id).
STREAM_VERSION = 1

#: B_NCI's filters (paper 000 §5.1.3).
BAND_L1_SHIPMODE = "TRUCK"
BAND_L2_SHIPINSTRUCT = "NONE"
BAND_L2_MIN_QUANTITY = 48


@dataclass(frozen=True)
class ReplayStream:
    """Where a workload's tuples are and how to read them."""

    workload: str
    #: Parquet files of the stream.
    files: list[str]
    #: Columns of the files to read as (side, tuple_id, key, event_time_s, payload);
    #: a value starting with ``=`` is a literal (``"=A"``, ``"=0"``).
    columns: dict[str, str]
    n_tuples: int
    sides: tuple[str, ...]
    dataset_digest: str
    #: What the workload's keys are (e.g. "suppkey", "orderkey", "word id").
    key_meaning: str = "key"
    #: For wordcount on text: the word of every key id (key -> word).
    dictionary_file: str | None = None


def _stream_id(workload: str, digest: str, params: dict[str, Any]) -> str:
    blob = json.dumps(
        {"workload": workload, "digest": digest, "params": params, "version": STREAM_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def build_stream(workload: str, dataset_dir: str | Path, params: dict[str, Any]) -> ReplayStream:
    """The replay stream of ``workload`` on the dataset in ``dataset_dir``."""
    dataset_dir = Path(dataset_dir)
    manifest = load_manifest(dataset_dir)
    gen = get_generator(manifest.generator)  # the pair was checked at the door (Params)
    if gen.kind == "stream":
        return ReplayStream(
            workload=workload,
            files=[str(dataset_dir / f) for f in manifest.table_files("events")],
            columns={
                "side": "=A",
                "tuple_id": "tuple_id",
                "key": "key",
                "event_time_s": "event_time_s",
                "payload": "=0",
            },
            n_tuples=manifest.row_count,
            sides=("A",),
            dataset_digest=manifest.digest,
            key_meaning="word id" if "user_file_format" in manifest.params else "key",
        )
    own = {"seed": params["seed"], "rate": params["input_rate_tuples_per_s"]}
    arrival = params.get("join_arrival", "interleaved")
    # Only the workloads that read it (the Params' own map); only when not interleaved,
    # so the interleaved streams keep their cache ids.
    if workload in WORKLOAD_ONLY["join_arrival"] and arrival != "interleaved":
        own["arrival"] = arrival
    folder = local_dir() / "streams" / _stream_id(workload, manifest.digest, own)
    stream_file = folder / "stream.parquet"
    build = STREAM_BUILDERS[get_workload(workload).stream_from or ""]
    if not stream_file.exists():

        def write(tmp: Path) -> None:
            extra = build(tmp, dataset_dir, manifest, own)
            (tmp / "stream.json").write_text(json.dumps({**extra, **own}, indent=2))

        write_atomically(folder, write)
    meta = json.loads((folder / "stream.json").read_text())
    dictionary = folder / "keys.parquet"
    return ReplayStream(
        workload=workload,
        files=[str(stream_file)],
        columns={c: c for c in STREAM_SCHEMA.names},
        n_tuples=int(meta["n_tuples"]),
        sides=tuple(meta["sides"]),
        dataset_digest=manifest.digest,
        key_meaning=meta["key_meaning"],
        dictionary_file=str(dictionary) if dictionary.exists() else None,
    )


def _interleave(
    folder: Path, sides: list[tuple[str, np.ndarray, np.ndarray]], own: dict[str, Any]
) -> int:
    """Write the union of ``(side, keys, payload)`` inputs in a seeded random arrival
    order with Poisson times (``own["arrival"]`` ``s_first``: the S tuples first, each
    side in its interleaved order); returns the number of tuples."""
    rng = np.random.default_rng([own["seed"], 7])
    side = np.concatenate([np.full(len(k), s, dtype=object) for s, k, _ in sides])
    key = np.concatenate([k for _, k, _ in sides]).astype(np.int64)
    payload = np.concatenate([p for _, _, p in sides]).astype(np.int64)
    order = rng.permutation(len(key))
    if own.get("arrival") == "s_first":
        # The interleaved order with the S tuples moved to the front (stable: each side
        # keeps its random order), so the two streams differ only in who arrives when.
        order = order[np.argsort(side[order] != "S", kind="stable")]
    n = len(key)
    times = poisson_times(rng, n, own["rate"], 0.0)
    table = pa.table(
        {
            "side": pa.array(side[order].astype(str), pa.string()),
            "tuple_id": pa.array(np.arange(n, dtype=np.int64)),
            "key": pa.array(key[order]),
            "event_time_s": pa.array(times),
            "payload": pa.array(payload[order]),
        },
        schema=STREAM_SCHEMA,
    )
    pq.write_table(table, folder / "stream.parquet", compression="zstd")
    return n


def _eq5(folder: Path, dataset_dir: Path, manifest: Any, own: dict[str, Any]) -> dict:
    """R = lineitem (key l_suppkey), S = supplier (key s_suppkey, payload = its region key
    from ``Region ⋈ Nation ⋈ Supplier``)."""
    lineitem = read_table(dataset_dir, manifest, "lineitem", ["l_suppkey"])
    supplier = read_table(dataset_dir, manifest, "supplier", ["s_suppkey", "s_nationkey"])
    nation = read_table(dataset_dir, manifest, "nation", ["n_nationkey", "n_regionkey"])
    region = read_table(dataset_dir, manifest, "region", ["r_regionkey"])
    nation = nation.filter(pc.is_in(nation.column("n_regionkey"), region.column("r_regionkey")))
    dims = supplier.join(nation, "s_nationkey", "n_nationkey", join_type="inner")
    n = _interleave(
        folder,
        [
            ("R", lineitem.column("l_suppkey").to_numpy(), np.zeros(lineitem.num_rows)),
            (
                "S",
                dims.column("s_suppkey").to_numpy(),
                dims.column("n_regionkey").to_numpy(),
            ),
        ],
        own,
    )
    return {"n_tuples": n, "sides": ["R", "S"], "key_meaning": "suppkey"}


def band_sides(lineitem: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of lineitem in L1 (shipmode TRUCK) and in L2 (shipinstruct NONE and
    quantity > 48): B_NCI's two inputs."""
    l1 = pc.equal(lineitem.column("l_shipmode"), BAND_L1_SHIPMODE)
    quantity = lineitem.column("l_quantity").cast(pa.float64())
    l2 = pc.and_(
        pc.equal(lineitem.column("l_shipinstruct"), BAND_L2_SHIPINSTRUCT),
        pc.greater(quantity, BAND_L2_MIN_QUANTITY),
    )
    return (
        np.flatnonzero(l1.to_numpy(zero_copy_only=False)),
        np.flatnonzero(l2.to_numpy(zero_copy_only=False)),
    )


def _band(folder: Path, dataset_dir: Path, manifest: Any, own: dict[str, Any]) -> dict:
    """R = L1, S = L2 (B_NCI's filters), key l_orderkey, payload = the lineitem row."""
    lineitem = read_table(
        dataset_dir,
        manifest,
        "lineitem",
        ["l_orderkey", "l_shipmode", "l_shipinstruct", "l_quantity"],
    )
    l1, l2 = band_sides(lineitem)
    keys = lineitem.column("l_orderkey").to_numpy()
    n = _interleave(folder, [("R", keys[l1], l1), ("S", keys[l2], l2)], own)
    return {"n_tuples": n, "sides": ["R", "S"], "key_meaning": "orderkey"}


def _wordcount_text(folder: Path, dataset_dir: Path, manifest: Any, own: dict[str, Any]) -> dict:
    """Every word of the ``tasks`` text is a tuple (reading order, Poisson times); keys
    number the distinct words in sorted order (``keys.parquet`` holds the words)."""
    from balancebench.generators.user_file import encode_keys, words

    lines = read_table(dataset_dir, manifest, "text", ["line"]).column("line")
    tokens = words(lines)
    tokens = pa.chunked_array([tokens]) if isinstance(tokens, pa.Array) else tokens
    keys, dictionary = encode_keys("word", tokens)
    pq.write_table(dictionary, folder / "keys.parquet")
    rng = np.random.default_rng([own["seed"], 11])
    n = len(keys)
    table = pa.table(
        {
            "side": pa.array(np.full(n, "A")),
            "tuple_id": pa.array(np.arange(n, dtype=np.int64)),
            "key": pa.array(np.asarray(keys, dtype=np.int64)),
            "event_time_s": pa.array(poisson_times(rng, n, own["rate"], 0.0)),
            "payload": pa.array(np.zeros(n, dtype=np.int64)),
        },
        schema=STREAM_SCHEMA,
    )
    pq.write_table(table, folder / "stream.parquet", compression="zstd")
    return {"n_tuples": n, "sides": ["A"], "key_meaning": "word id"}


#: How a workload's stream is built from a dataset that is not a stream
#: (``Workload.stream_from``): a new workload on the same sides names one of these.
STREAM_BUILDERS = {"eq5": _eq5, "band": _band, "wordcount": _wordcount_text}
