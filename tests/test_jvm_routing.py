"""The JVM router's jar is used only when built from this source, a build without a JDK
leaves the Python path (and no stale jar), and the senders' states cross between the
paths as bytes unchanged. (Its decisions against the library's: tests/spark/
test_routing_spark.py.)"""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from balancebench.spark import jvm_routing
from balancebench.strategies import get_strategy


@pytest.fixture
def jar_in(tmp_path, monkeypatch):
    """A checkout whose jar lives under ``tmp_path`` (the real one is left alone)."""
    jar = tmp_path / "jvm" / "balancebench-routing.jar"
    monkeypatch.setattr(jvm_routing, "jar_path", lambda: jar)
    return jar


def _jar(path, digest: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(jvm_routing.DIGEST_ENTRY, digest + "\n")


def test_a_jar_is_used_only_when_built_from_this_source(jar_in):
    # No jar: the Python path, and the reason names make setup
    assert "make setup compiles it" in jvm_routing.jar_problem()
    assert jvm_routing.spark_conf() == {}
    # A jar built from another source
    _jar(jar_in, "0" * 64)
    assert "built from other sources" in jvm_routing.jar_problem()
    assert jvm_routing.spark_conf() == {}
    # A file that is not a jar
    jar_in.write_bytes(b"not a zip")
    assert "unreadable" in jvm_routing.jar_problem()
    # The jar of this source
    _jar(jar_in, jvm_routing.source_digest())
    assert jvm_routing.jar_problem() is None
    assert jvm_routing.spark_conf() == {"spark.jars": str(jar_in)}


def test_a_build_without_a_jdk_removes_a_stale_jar(jar_in, monkeypatch):
    _jar(jar_in, "0" * 64)
    monkeypatch.setattr(jvm_routing.shutil, "which", lambda *a, **k: None)
    message = jvm_routing.build()
    assert "will route in Python workers" in message
    assert not jar_in.exists()


def test_an_up_to_date_jar_is_not_rebuilt(jar_in):
    _jar(jar_in, jvm_routing.source_digest())
    before = jar_in.stat().st_mtime_ns
    assert "up to date" in jvm_routing.build(javac="/nonexistent/javac")
    assert jar_in.stat().st_mtime_ns == before


def test_states_cross_between_the_paths_unchanged():
    # Given a W-Choices sender's state after routing skewed keys (a sketch, a load vector)
    strategy = get_strategy("wchoices", n_nodes=6, sketch_chunk=50, capacity=12)
    rng = np.random.default_rng(4)
    keys = np.r_[rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64), np.zeros(300, np.int64)]
    states: dict = {}
    strategy.route(rng.permutation(keys), np.zeros(len(keys), int), states, 6)
    state = states[0]
    assert len(state.sketch_keys) == 12 and state.seen == 800
    # When it is written as the JVM reads it and read back
    sender, back = jvm_routing.decode_state(
        jvm_routing.encode_state(7, state), strategy.new_sender_state
    )
    # Then nothing changed
    assert sender == 7 and back.seen == state.seen
    for field in ("sent", "sketch_keys", "sketch_counts"):
        assert np.array_equal(getattr(back, field), getattr(state, field)), field
    # ... and an empty state (a plain PKG sender before any tuple) too
    empty = get_strategy("pkg").new_sender_state(3)
    _, back = jvm_routing.decode_state(jvm_routing.encode_state(0, empty), lambda n: empty)
    assert back.seen == 0 and back.sent.tolist() == [0, 0, 0] and len(back.sketch_keys) == 0


def test_a_sketch_too_large_for_the_jvm_router_routes_in_python():
    # A threshold so small that the sketch would hold more counters than a Java int
    wide = get_strategy("wchoices", n_nodes=4, heavy_share=1e-12)
    path, why = jvm_routing.path_for(None, wide, 4)  # decided before any session is asked
    assert path == "python" and "capacity or sketch_chunk above" in why
    assert jvm_routing.path_tag(None, wide, 4).startswith("python: capacity")


def test_without_the_jar_table_routing_says_it_runs_in_spark_sql(jar_in, monkeypatch):
    # Given no jar (no JDK compiler at make setup) and a session that was never asked
    class Session:
        class sparkContext:  # noqa: N801 - the attribute's name in PySpark
            applicationId = "app-without-jar"

    monkeypatch.setattr(jvm_routing, "_checked", {})
    # Then the table-routed runs' tag names the SQL path and why
    tag = jvm_routing.table_path_tag(Session())
    assert tag.startswith("sql: no ") and "make setup compiles it" in tag


def test_a_per_tuple_router_outside_the_pkg_family_routes_in_python():
    """Only the PKG family has a JVM router: another per-tuple router is sent to the
    Python path, with the reason, before its (missing) JVM settings are asked for."""
    from types import SimpleNamespace

    from balancebench.strategies import STRATEGIES

    mine = SimpleNamespace(name="mine", jvm_router=False)  # no decision_settings at all
    assert jvm_routing.path_for(None, mine, 4) == (
        "python",
        "mine has no JVM router (only the PKG family's)",
    )
    family = {n for n, cls in STRATEGIES.items() if cls.jvm_router}
    assert family == {"pkg", "dchoices", "wchoices"}
    assert family == {n for n, cls in STRATEGIES.items() if cls.per_tuple}
