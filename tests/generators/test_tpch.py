"""The ``tpch`` generator: TPC-H tables from tpchgen-cli with Zipf-skewed lineitem keys."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, get_generator, load_manifest, tpch
from balancebench.generators.common import Manifest
from balancebench.generators.tpch import (
    TABLES,
    expected_rows,
    lineitem_rows_band,
    max_orderkey,
    run_tpchgen,
    to_plain,
)

SF = 0.01
PARAMS = {"tpch_scale_factor": SF, "zipf_s": 0.8, "seed": 7}
SETTINGS = {"zipf_fit_tolerance": 0.1}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest]:
    return generate("tpch", tmp_path_factory.mktemp("tpch"), PARAMS)


@pytest.fixture(scope="module")
def raw_tpch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tpchgen-cli's own output at the same scale factor (no skew, original types)."""
    folder = tmp_path_factory.mktemp("raw")
    run_tpchgen(SF, folder)
    return folder


def _column(dataset_dir: Path, table: str, column: str) -> np.ndarray:
    return pq.read_table(dataset_dir / f"{table}.parquet", columns=[column]).column(0).to_numpy()


def _profile(dataset_dir: Path, manifest: Manifest, frame: str):
    frames = get_generator("tpch").validation_frames(dataset_dir, manifest, SETTINGS)
    return frames[frame]()


def test_same_seed_same_digest_other_seed_other_digest(
    dataset: tuple[Path, Manifest], tmp_path: Path
) -> None:
    _, manifest = dataset
    _, again = generate("tpch", tmp_path / "a", PARAMS)
    _, other = generate("tpch", tmp_path / "b", {**PARAMS, "seed": 8})
    assert again.digest == manifest.digest
    assert other.digest != manifest.digest


def test_tables_row_counts_and_types(dataset: tuple[Path, Manifest]) -> None:
    dataset_dir, manifest = dataset
    assert list(manifest.tables) == list(TABLES)
    assert manifest.main_table == "lineitem"
    assert manifest.row_count == manifest.rows("lineitem")
    rows = expected_rows(SF)
    assert rows == {
        "region": 5,
        "nation": 25,
        "supplier": 100,
        "customer": 1500,
        "part": 2000,
        "partsupp": 8000,
        "orders": 15000,
    }
    for table, n in rows.items():
        assert manifest.rows(table) == n, table
    low, high = lineitem_rows_band(rows["orders"])
    assert low <= manifest.rows("lineitem") <= high
    assert max_orderkey(rows["orders"]) == _column(dataset_dir, "orders", "o_orderkey").max()
    schema = pq.read_schema(dataset_dir / "lineitem.parquet")
    assert schema.field("l_suppkey").type == pa.int64()
    assert schema.field("l_linenumber").type == pa.int32()
    assert schema.field("l_quantity").type == pa.float64()
    assert schema.field("l_shipdate").type == pa.date32()
    assert schema.field("l_shipmode").type == pa.string()
    for table in TABLES:  # no string_view or decimal left anywhere
        for field in pq.read_schema(dataset_dir / f"{table}.parquet"):
            assert not pa.types.is_string_view(field.type), (table, field.name)
            assert not pa.types.is_decimal(field.type), (table, field.name)


def test_only_the_skewed_keys_change(dataset: tuple[Path, Manifest], raw_tpch: Path) -> None:
    dataset_dir, _ = dataset
    ours = pq.read_table(dataset_dir / "lineitem.parquet")
    theirs = pq.read_table(raw_tpch / "lineitem.parquet")
    for name in ours.column_names:
        same = ours.column(name).equals(to_plain(theirs.column(name), ours.schema.field(name).type))
        assert same == (name not in ("l_suppkey", "l_orderkey")), name
    # Money columns are the doubles nearest to TPC-H's decimals.
    prices = theirs.column("l_extendedprice").to_pylist()
    assert ours.column("l_extendedprice").to_pylist() == [float(x) for x in prices]
    orders = pq.read_table(dataset_dir / "orders.parquet")
    raw_orders = pq.read_table(raw_tpch / "orders.parquet")
    for field in orders.schema:
        assert orders.column(field.name).equals(
            to_plain(raw_orders.column(field.name), field.type)
        ), field.name


def test_skewing_one_column_keeps_the_other(dataset: tuple[Path, Manifest], tmp_path: Path) -> None:
    dataset_dir, _ = dataset
    one_dir, manifest = generate("tpch", tmp_path, {**PARAMS, "tpch_skew_columns": ["l_suppkey"]})
    # Each column has its own random stream: l_suppkey is the same as when both are skewed.
    assert np.array_equal(
        _column(one_dir, "lineitem", "l_suppkey"), _column(dataset_dir, "lineitem", "l_suppkey")
    )
    # l_orderkey is TPC-H's: non-decreasing, 1-7 lines per order.
    orderkey = _column(one_dir, "lineitem", "l_orderkey")
    assert np.all(np.diff(orderkey) >= 0)
    assert np.bincount(orderkey)[orderkey].max() <= 7
    fit = _profile(one_dir, manifest, "profile_zipf_fit")
    assert list(fit["column"]) == ["l_suppkey"]
    assert fit["within_allowed"].tolist() == [1]
    keys = _profile(one_dir, manifest, "profile_foreign_keys")
    assert (
        keys["skewed"].sum()
        == 1
        == get_generator("tpch").suite_parameters(manifest)["n_skewed_columns"]
    )
    assert (keys["within_allowed"] == 1).all()


def test_skewed_keys_exist_in_their_parent(dataset: tuple[Path, Manifest]) -> None:
    dataset_dir, manifest = dataset
    suppkey = _column(dataset_dir, "lineitem", "l_suppkey")
    orderkey = _column(dataset_dir, "lineitem", "l_orderkey")
    assert np.isin(suppkey, _column(dataset_dir, "supplier", "s_suppkey")).all()
    assert np.isin(orderkey, _column(dataset_dir, "orders", "o_orderkey")).all()
    # The skew concentrates rows: the hottest supplier gets far more than 1/100 of them,
    # and it is not simply the smallest key (ranks are permuted).
    counts = np.bincount(suppkey)
    assert counts.max() > 5 * len(suppkey) / 100
    profile = _profile(dataset_dir, manifest, "profile_foreign_keys")
    assert len(profile) == len(tpch.FOREIGN_KEYS)
    assert (profile["orphan_count"] == 0).all()
    assert set(profile.loc[profile["skewed"] == 1, "column"]) == {
        "lineitem.l_suppkey",
        "lineitem.l_orderkey",
    }


def _assert_fit(profile, zipf_s: float) -> None:
    assert list(profile["column"]) == ["l_suppkey", "l_orderkey"]
    assert (profile["within_allowed"] == 1).all(), profile.to_dict("records")
    for fitted in profile["fitted_s"]:
        if zipf_s == 0:
            # Sorting few counts per key looks like skew (about 4 lines per order here).
            assert fitted < 0.15
        else:
            assert abs(fitted - zipf_s) < 0.05


def test_fitted_exponent_default(dataset: tuple[Path, Manifest]) -> None:
    _assert_fit(_profile(*dataset, "profile_zipf_fit"), PARAMS["zipf_s"])


@pytest.mark.parametrize("zipf_s", [0.0, 1.2])
def test_fitted_exponent(zipf_s: float, tmp_path: Path) -> None:
    dataset_dir, manifest = generate("tpch", tmp_path, {**PARAMS, "zipf_s": zipf_s})
    _assert_fit(_profile(dataset_dir, manifest, "profile_zipf_fit"), zipf_s)


def test_validation_passes(dataset: tuple[Path, Manifest], tmp_path: Path) -> None:
    report = validate_dataset(dataset[0], tmp_path / "r.json")
    assert report.success, report.message()
    assert set(report.frames) == {*TABLES, "profile_foreign_keys", "profile_zipf_fit"}


def test_validation_fails_on_keys_not_in_their_parent(
    dataset: tuple[Path, Manifest], tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt"
    shutil.copytree(dataset[0], corrupt)
    path = corrupt / "lineitem.parquet"
    table = pq.read_table(path)
    suppkey = table.column("l_suppkey").to_numpy().copy()
    suppkey[0] = 101  # suppliers are 1..100
    orderkey = table.column("l_orderkey").to_numpy().copy()
    # Inside the key range, but no order has it (dbgen's order keys are sparse): only the
    # foreign-key profile can see it.
    orderkey[1] = 8
    assert 8 not in set(_column(corrupt, "orders", "o_orderkey"))
    for name, values in (("l_suppkey", suppkey), ("l_orderkey", orderkey)):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), pa.array(values))
    pq.write_table(table, path)

    report = validate_dataset(corrupt, tmp_path / "r.json")
    assert not report.success
    failed = "\n".join(report.failed)
    assert "profile_foreign_keys" in failed
    assert "lineitem.l_suppkey: 1 values not in supplier.s_suppkey" in failed
    assert "lineitem.l_orderkey: 1 values not in orders.o_orderkey" in failed
    # The range check of the lineitem suite also sees the supplier key, not the order key.
    assert any(f.startswith("lineitem: ") and "'l_suppkey'" in f for f in report.failed)
    assert not any(f.startswith("lineitem: ") and "'l_orderkey'" in f for f in report.failed)


def test_manifest_records_the_params(dataset: tuple[Path, Manifest]) -> None:
    manifest = load_manifest(dataset[0])
    assert manifest.params == {
        **PARAMS,
        "tpch_skew_columns": ["l_suppkey", "l_orderkey"],
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tpch_scale_factor", 0),
        ("tpch_scale_factor", -1),
        ("tpch_scale_factor", "big"),
        ("tpch_scale_factor", 1000),
        ("tpch_skew_columns", ["l_partkey"]),
        ("tpch_skew_columns", ["l_suppkey", "l_suppkey"]),
        ("zipf_s", -0.5),
    ],
)
def test_bad_inputs_fail_fast(field: str, value: object, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=field):
        generate("tpch", tmp_path, {**PARAMS, field: value})
    assert list(tmp_path.iterdir()) == []


def test_missing_binary_fails_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(RuntimeError, match="tpchgen-cli: executable not found"):
        generate("tpch", tmp_path / "out", PARAMS)
    assert not (tmp_path / "out").exists()


def test_a_failing_tpchgen_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tpch, "tpchgen_binary", lambda: Path(shutil.which("false") or "false"))
    with pytest.raises(RuntimeError, match="tpchgen-cli: exit code"):
        generate("tpch", tmp_path, PARAMS)
    leftovers = [p for p in tmp_path.rglob("*")]
    assert leftovers in ([], [tmp_path / "tpch"]), leftovers


def test_string_columns_are_readable(dataset: tuple[Path, Manifest]) -> None:
    modes = pq.read_table(dataset[0] / "lineitem.parquet", columns=["l_shipmode"]).column(0)
    assert set(pc.unique(modes).to_pylist()) == {
        "AIR",
        "FOB",
        "MAIL",
        "RAIL",
        "REG AIR",
        "SHIP",
        "TRUCK",
    }


def test_s_first_arrival_keeps_the_tuples_and_times_and_puts_every_supplier_first(
    dataset: tuple[Path, Manifest], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from balancebench.experiment.params import validate_params
    from balancebench.experiment.streams import build_stream

    monkeypatch.setenv("BALANCEBENCH_LOCAL", str(tmp_path))
    folder, _ = dataset
    base = {"seed": 3, "input_rate_tuples_per_s": 10_000.0}

    def read(params: dict) -> tuple[str, pa.Table]:
        replay = build_stream("eq5", folder, params)
        return replay.files[0], pq.read_table(replay.files[0])

    plain_file, plain = read(base)
    same_file, _ = read({**base, "join_arrival": "interleaved"})
    first_file, first = read({**base, "join_arrival": "s_first"})
    # The default's cache id (and so every earlier interleaved stream) is unchanged.
    assert same_file == plain_file and first_file != plain_file
    side = first.column("side").to_numpy(zero_copy_only=False)
    n_s = int((side == "S").sum())
    assert n_s > 0 and (side[:n_s] == "S").all() and (side[n_s:] == "R").all()
    assert first.column("event_time_s").equals(plain.column("event_time_s"))
    assert first.column("tuple_id").equals(plain.column("tuple_id"))

    def tuples(t: pa.Table) -> list:
        return sorted(
            zip(*(t.column(c).to_pylist() for c in ("side", "key", "payload")), strict=True)
        )

    assert tuples(first) == tuples(plain)
    # Each side keeps its interleaved (random) order, not the dataset's row order.
    s_keys = first.column("key").to_numpy()[:n_s]
    assert not (np.diff(s_keys) >= 0).all()
    plain_side = plain.column("side").to_numpy(zero_copy_only=False)
    assert (s_keys == plain.column("key").to_numpy()[plain_side == "S"]).all()
    with pytest.raises(ValueError, match="join_arrival"):
        validate_params({"workload": "eq5", "join_arrival": "suppliers"})
