"""``tpch``: real TPC-H tables with Zipf skew injected into ``lineitem``'s join keys.

Follows paper 000 §5.1.2: the TPC-H tables at a scale factor, with the join keys of
``lineitem`` re-drawn from a Zipf law (default ``z = 0.8``, swept 0-1.5) so that the
``EQ5`` equi-join (``region ⋈ nation ⋈ supplier ⋈ lineitem`` on suppkey) and the
``B_NCI`` band join (``|L1.l_orderkey - L2.l_orderkey| <= 1``) see skewed keys.

- The eight tables (``region``, ``nation``, ``supplier``, ``customer``, ``part``,
  ``partsupp``, ``orders``, ``lineitem``) come from ``tpchgen-cli`` (PyPI, a native
  TPC-H ``dbgen`` port that is deterministic by scale factor), with the TPC-H column names
  and rows in dbgen order. Row counts: region 5, nation 25, and ``floor(base * SF)`` for
  supplier (10,000), customer (150,000), part (200,000), orders (1,500,000); partsupp is
  4 per part; lineitem has 1-7 lines per order (about ``4 * orders``).
- Types: strings are plain Arrow ``string`` (tpchgen writes ``string_view``, which older
  readers do not take), dates ``date32``, keys ``int64``, small counters ``int32``.
  *Interpreted:* the money/quantity columns (TPC-H ``DECIMAL(15,2)``: ``l_quantity``,
  ``l_extendedprice``, ``l_discount``, ``l_tax``, ``o_totalprice``, ``ps_supplycost``,
  ``p_retailprice``, ``s_acctbal``, ``c_acctbal``) are ``float64``, as Spark TPC-H kits
  do with ``useDoubleForDecimal``: the dataset digest hashes values through numpy, where
  a decimal column is an array of Python objects (not a stable byte string), and pandas
  and GX handle float64 natively. Each value is the double nearest to the two-decimal
  TPC-H value (converted through its text), so nothing the workloads compare
  (``l_quantity > 48``) changes.
- Skew (the reconstructed rule): for each column in ``tpch_skew_columns``, every
  lineitem row gets a new value drawn from a finite Zipf law with exponent ``zipf_s``
  over the parent's existing keys (``supplier.s_suppkey`` for ``l_suppkey``,
  ``orders.o_orderkey`` for ``l_orderkey``; TPC-H order keys are sparse, so a rank picks
  an index into the sorted array of existing keys). Ranks go through a seeded random
  permutation of that array, so the hot keys are random keys, not the smallest ones (as in
  ``zipf_stream``). ``zipf_s = 0`` is uniform over the parent's keys. Each column has its
  own random stream (seeded by ``seed`` and the column), so skewing one column or both
  gives the same values for it. Row order and all other columns stay as tpchgen wrote
  them, so the original keys are one ``tpchgen-cli`` call away (by row position); they
  are not stored, which keeps ``lineitem`` the 16-column TPC-H schema.
- What the skew keeps: every skewed key exists in its parent table (``supplier`` /
  ``orders``), which is all ``EQ5`` and ``B_NCI`` need. What it breaks, on purpose: the
  composite key ``(l_partkey, l_suppkey)`` no longer exists in ``partsupp``;
  ``(l_orderkey, l_linenumber)`` is no longer unique; an order's lines no longer match its
  ``o_totalprice`` / ``o_orderstatus`` / ``o_orderdate``. TPC-H queries that depend on
  those (Q9, Q20, Q21 ...) give results of a different database, not errors.

Same params (seed included) -> same values -> same digest.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from balancebench.core.lazy import lazy_module
from balancebench.core.profiles import zipf_fit_row
from balancebench.generators.common import (
    CHUNK_ROWS,
    Generator,
    Manifest,
    TableWriter,
    read_table,
)
from balancebench.generators.zipf_stream import zipf_sampler

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")

#: Tables in the order they are written (parents first).
TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

#: Skewable lineitem column -> (parent table, parent key column).
SKEW_PARENTS: dict[str, tuple[str, str]] = {
    "l_suppkey": ("supplier", "s_suppkey"),
    "l_orderkey": ("orders", "o_orderkey"),
}

#: Every single-column foreign key of TPC-H: (table, column, parent table, parent column).
#: The composite (l_partkey, l_suppkey) -> partsupp is left out: the skew breaks it.
FOREIGN_KEYS = (
    ("nation", "n_regionkey", "region", "r_regionkey"),
    ("supplier", "s_nationkey", "nation", "n_nationkey"),
    ("customer", "c_nationkey", "nation", "n_nationkey"),
    ("partsupp", "ps_partkey", "part", "p_partkey"),
    ("partsupp", "ps_suppkey", "supplier", "s_suppkey"),
    ("orders", "o_custkey", "customer", "c_custkey"),
    ("lineitem", "l_orderkey", "orders", "o_orderkey"),
    ("lineitem", "l_partkey", "part", "p_partkey"),
    ("lineitem", "l_suppkey", "supplier", "s_suppkey"),
)

#: TPC-H base cardinalities (rows at scale factor 1).
BASE_ROWS = {"supplier": 10_000, "customer": 150_000, "part": 200_000, "orders": 1_500_000}
PARTSUPP_PER_PART = 4
#: Lines per order are uniform on 1..7: mean 4, variance 4.
LINES_PER_ORDER_MEAN = 4
LINES_PER_ORDER_MAX = 7
#: lineitem rows may differ from ``4 * orders`` by this fraction (or 6 standard
#: deviations of the sum, whichever is larger: small scale factors have few orders).
LINEITEM_ROWS_TOLERANCE = 0.03


def expected_rows(scale_factor: float) -> dict[str, int]:
    """Rows of the fixed-size tables at ``scale_factor`` (TPC-H spec §4.2.5, as tpchgen
    computes them: ``floor(base * SF)`` in float64; partsupp is 4 rows per part)."""
    rows = {name: math.floor(base * scale_factor) for name, base in BASE_ROWS.items()}
    rows["partsupp"] = PARTSUPP_PER_PART * rows["part"]
    return {"region": 5, "nation": 25, **rows}


def lineitem_rows_band(orders: int) -> tuple[int, int]:
    """Allowed ``[min, max]`` lineitem rows for ``orders`` orders."""
    mean = LINES_PER_ORDER_MEAN * orders
    slack = max(LINEITEM_ROWS_TOLERANCE * mean, 6 * 2 * math.sqrt(orders))
    low = max(orders, math.floor(mean - slack))
    high = min(LINES_PER_ORDER_MAX * orders, math.ceil(mean + slack))
    return low, high


def max_orderkey(orders: int) -> int:
    """Largest ``o_orderkey`` of ``orders`` orders: dbgen's sparse keys use the first 8
    of every 32 numbers (order ``i`` 1-based gets ``(i // 8) * 32 + i % 8``)."""
    return (orders // 8) * 32 + orders % 8


def tpchgen_binary() -> Path:
    """The ``tpchgen-cli`` executable installed with the ``tpchgen-cli`` wheel."""
    beside = Path(sys.executable).parent / "tpchgen-cli"
    if beside.exists():
        return beside
    found = shutil.which("tpchgen-cli")
    if found:
        return Path(found)
    raise RuntimeError(
        f"tpchgen-cli: executable not found next to {sys.executable} nor on PATH; "
        "install the project's dependencies (uv sync) which include the tpchgen-cli wheel"
    )


def run_tpchgen(scale_factor: float, output_dir: Path) -> None:
    """Write the eight TPC-H tables as ``<output_dir>/<table>.parquet``."""
    command = [
        str(tpchgen_binary()),
        "parquet",
        "--scale-factor",
        repr(float(scale_factor)),
        f"--output-dir={output_dir}",
        "--quiet",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"tpchgen-cli: exit code {done.returncode} for {' '.join(command)}: "
            f"{done.stderr.strip()[-2000:]}"
        )


def plain_type(dtype: pa.DataType) -> pa.DataType:
    """The type a table column is written as (see the module docstring)."""
    if pa.types.is_string_view(dtype) or pa.types.is_large_string(dtype):
        return pa.string()
    if pa.types.is_decimal(dtype):
        return pa.float64()
    return dtype


def to_plain(array: pa.Array, dtype: pa.DataType) -> pa.Array:
    """``array`` cast to its plain type. Decimals go through their text, so each value is
    the double nearest to it (Arrow's direct decimal-to-double cast is one ulp off for
    about 1 in 7 ``l_extendedprice`` values, e.g. 24386.670000000002)."""
    if pa.types.is_decimal(array.type):
        return array.cast(pa.string()).cast(dtype)
    return array.cast(dtype)


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with plain types and without tpchgen's field ids."""
    return pa.schema([pa.field(f.name, plain_type(f.type), f.nullable) for f in schema])


def sorted_keys(path: Path, column: str) -> np.ndarray:
    """The distinct non-null values of ``column`` in the Parquet file, sorted (int64)."""
    values = pq.read_table(path, columns=[column]).column(0).drop_null().to_numpy()
    return np.unique(values.astype(np.int64))


def key_drawer(
    seed: int, column: str, parent_keys: np.ndarray, zipf_s: float
) -> Callable[[int], np.ndarray]:
    """``draw(rows) -> keys``: Zipf(``zipf_s``) over ``parent_keys`` with random hot keys."""
    rng = np.random.default_rng([seed, list(SKEW_PARENTS).index(column)])
    rank_to_key = parent_keys[rng.permutation(len(parent_keys))]
    draw_rank = zipf_sampler(rng, len(parent_keys), zipf_s)
    return lambda rows: rank_to_key[draw_rank(rows)]


class TpchGenerator(Generator):
    name = "tpch"
    description = "TPC-H tables (tpchgen-cli) with Zipf-skewed lineitem join keys."
    reference = "paper 000 §5.1.2 (TPC-H with Zipf skew in join keys; EQ5, B_NCI)"
    kind = "tables"
    main_table = "lineitem"
    params = ("zipf_s", "tpch_scale_factor", "tpch_skew_columns", "seed")
    own_params = {
        "tpch_scale_factor": {
            "type": "number",
            "minimum": 0.001,
            "maximum": 100,
            "default": 0.1,
            "title": "TPC-H scale factor",
            "description": "TPC-H size: SF 1 is about 1 GB of text (6M lineitem rows); "
            "SF 0.1 writes ~600k lineitem rows in seconds. At least 0.001 (10 suppliers).",
        },
        "tpch_skew_columns": {
            "type": "array",
            "items": {"type": "string", "enum": list(SKEW_PARENTS)},
            "uniqueItems": True,
            "default": list(SKEW_PARENTS),
            "title": "TPC-H skewed columns",
            "description": "lineitem join keys re-drawn from Zipf(zipf_s) over their parent's "
            "keys (l_suppkey for EQ5, l_orderkey for the B_NCI band join); [] keeps TPC-H's.",
        },
    }

    def check(self, params: dict[str, Any]) -> None:
        tpchgen_binary()

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory(prefix=".tpchgen-", dir=out.folder) as tmp:
            raw = Path(tmp)
            run_tpchgen(params["tpch_scale_factor"], raw)
            drawers = {
                column: key_drawer(
                    params["seed"],
                    column,
                    sorted_keys(
                        raw / f"{SKEW_PARENTS[column][0]}.parquet", SKEW_PARENTS[column][1]
                    ),
                    params["zipf_s"],
                )
                for column in SKEW_PARENTS
                if column in params["tpch_skew_columns"]
            }
            for table in TABLES:
                source = pq.ParquetFile(raw / f"{table}.parquet")
                schema = plain_schema(source.schema_arrow)
                with out.table(table, schema) as write:
                    for batch in source.iter_batches(batch_size=CHUNK_ROWS):
                        columns = dict(zip(batch.schema.names, batch.columns, strict=True))
                        if table == "lineitem":
                            for column, draw in drawers.items():
                                columns[column] = pa.array(draw(batch.num_rows))
                        write(
                            pa.record_batch(
                                [to_plain(columns[f.name], f.type) for f in schema], schema=schema
                            )
                        )

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        def table_frame(table: str) -> Callable[[], pd.DataFrame]:
            # Dates as datetime64 (not Python objects): typed checks, less memory.
            return lambda: read_table(dataset_dir, manifest, table).to_pandas(date_as_object=False)

        frames = {table: table_frame(table) for table in manifest.tables}
        frames["profile_foreign_keys"] = lambda: foreign_key_profile(dataset_dir, manifest)
        frames["profile_zipf_fit"] = lambda: zipf_fit_profile(
            dataset_dir, manifest, settings["zipf_fit_tolerance"]
        )
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        rows = expected_rows(manifest.params["tpch_scale_factor"])
        low, high = lineitem_rows_band(rows["orders"])
        return {
            **{f"expected_rows_{table}": n for table, n in rows.items()},
            "lineitem_rows_min": low,
            "lineitem_rows_max": high,
            "max_orderkey": max_orderkey(rows["orders"]),
            "n_skewed_columns": len(manifest.params["tpch_skew_columns"]),
        }


def _column_or_none(
    dataset_dir: Path, manifest: Manifest, table: str, column: str
) -> np.ndarray | None:
    """Non-null int64 values of ``table.column``; None when the table or column is missing
    (the table's suite reports that)."""
    try:
        values = read_table(dataset_dir, manifest, table, [column]).column(0).drop_null()
        return values.cast(pa.int64()).to_numpy()
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, FileNotFoundError):
        return None


def foreign_key_profile(dataset_dir: Path, manifest: Manifest) -> pd.DataFrame:
    """One row per TPC-H foreign key: values not found in the parent key (orphans)."""
    skewed = set(manifest.params["tpch_skew_columns"])
    rows = []
    for table, column, parent, parent_column in FOREIGN_KEYS:
        values = _column_or_none(dataset_dir, manifest, table, column)
        keys = _column_or_none(dataset_dir, manifest, parent, parent_column)
        if values is None or keys is None:
            checked, orphans = 0, -1
        else:
            checked, orphans = len(values), int(np.count_nonzero(~np.isin(values, keys)))
        rows.append(
            {
                "column": f"{table}.{column}",
                "parent": f"{parent}.{parent_column}",
                "skewed": int(table == "lineitem" and column in skewed),
                "values_checked": checked,
                "orphan_count": orphans,
                "within_allowed": int(orphans == 0),
                # Shown in the failure message (GX lists unexpected values, not rows).
                "status": "ok"
                if orphans == 0
                else f"{table}.{column}: {'missing' if orphans < 0 else orphans} values "
                f"not in {parent}.{parent_column}",
            }
        )
    return pd.DataFrame(rows)


def zipf_fit_profile(dataset_dir: Path, manifest: Manifest, tolerance: float) -> pd.DataFrame:
    """One row per skewed column: the Zipf exponent fitted from the rank-frequency of its
    values over the parent's keys (values not in the parent are ignored here)."""
    rows = []
    for column in manifest.params["tpch_skew_columns"]:
        parent, parent_column = SKEW_PARENTS[column]
        values = _column_or_none(dataset_dir, manifest, "lineitem", column)
        keys = _column_or_none(dataset_dir, manifest, parent, parent_column)
        values = np.empty(0, np.int64) if values is None else values
        keys = np.unique(np.empty(0, np.int64) if keys is None else keys)
        counts = np.zeros(len(keys), np.int64)
        if len(keys):
            index = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
            found = keys[index] == values
            counts = np.bincount(index[found], minlength=len(keys))
        row = zipf_fit_row(counts, len(keys), manifest.params["zipf_s"], tolerance)
        status = "ok"
        if not row["within_allowed"]:
            status = (
                f"{column}: fitted s {row['fitted_s']:.3f}, requested {row['requested_s']}, "
                f"error {row['abs_error']:.3f} > allowed {row['allowed_error']:.3f}"
            )
        rows.append(
            {"column": column, "parent": f"{parent}.{parent_column}", **row, "status": status}
        )
    columns = ["column", "parent", *zipf_fit_row(np.zeros(0), 0, 0.0, 0.0), "status"]
    return pd.DataFrame(rows, columns=columns)
