"""The JVM router: per-sender routing (``pkg``, ``dchoices``, ``wchoices``) and table
routing (``qmmp``, ``mnrt``, ``readj``'s routing table, ``balanceload``'s bucket map).

- Per-sender: the senders' decisions are sequential (each changes the sender's load
  vector), so Spark SQL cannot express them; the Python path
  (``placement.with_per_tuple_node``) runs them in a Python worker, and shipping each tuple
  there and back through Arrow cost about 170 ns, more than the decision itself.
  ``jvm/PerSenderRouting.java`` repeats the decisions of ``strategies.pkg`` in a
  ``mapPartitions`` inside the JVM.
- Table: a real router's lookup is one hash-map probe. ``jvm/TableRouting.java`` holds the
  table as an open-addressing map from key to entry and is called once per tuple from
  Spark's generated code (:func:`table_node`, :func:`bucket_node`); the Spark SQL path
  (``placement.SlotTable``) read arrays through a chain of expressions, which cost a split
  key's tuple 30-58 ns more than a key moved whole (``benchmarks/split_lookup.py``).

How it is built and chosen:

- ``make setup`` compiles both (:func:`build`, the JDK's ``javac`` against PySpark's own
  jars) into ``.local/jvm/balancebench-routing.jar``, with the sources' SHA-256 inside;
  nothing compiled is committed.
- A session adds the jar (:func:`spark_conf`, or ``ADD JAR`` under ``spark-submit``)
  when it was built from these sources; :func:`routing_path` says which path a run takes
  and why. Without ``javac``, with a jar from other sources, or with a JVM that cannot
  load the classes, per-sender routing runs in Python workers and table routing in Spark
  SQL (the same decisions, tested tuple for tuple), and the run's tags
  ``per_sender_routing`` and ``table_routing`` say so.
- The senders' states cross between the paths as bytes (:func:`encode_state`,
  :func:`decode_state`): a run could switch paths between batches and decide the same.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from balancebench.state.paths import project_root, pyspark_jars

SOURCES = tuple(sorted((Path(__file__).with_name("jvm")).glob("*.java")))
CLASS_NAMES = tuple(f"balancebench.jvm.{source.stem}" for source in SOURCES)
#: The sources' SHA-256 inside the jar: a jar from other sources is never used.
DIGEST_ENTRY = "balancebench/jvm/source.sha256"
#: The MLflow tag saying which path a per-sender strategy's run took.
PATH_TAG = "per_sender_routing"
#: The MLflow tag saying which path a table-routed strategy's run took.
TABLE_PATH_TAG = "table_routing"

_checked: dict[str, tuple[str, str]] = {}


def jar_path() -> Path:
    """Where ``make setup`` puts the jar (beside the checkout's other local files)."""
    return project_root() / ".local" / "jvm" / "balancebench-routing.jar"


def source_digest() -> str:
    """One SHA-256 over every source (its name and bytes)."""
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


def jar_problem() -> str | None:
    """Why the jar cannot be used (None: it is there and built from this source)."""
    jar = jar_path()
    if not jar.exists():
        return f"no {jar} (make setup compiles it where the JDK's javac is found)"
    try:
        with zipfile.ZipFile(jar) as archive:
            built_from = archive.read(DIGEST_ENTRY).decode().strip()
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        return f"{jar} is unreadable ({exc}); make setup rebuilds it"
    if built_from != source_digest():
        return f"{jar} was built from other sources than spark/jvm's; make setup rebuilds it"
    return None


def spark_conf() -> dict[str, str]:
    """``spark.jars`` for a session (driver and executors) when the jar is usable."""
    return {} if jar_problem() else {"spark.jars": str(jar_path())}


def build(javac: str | None = None) -> str:
    """Compile the router into :func:`jar_path` unless it is up to date; what happened.
    Without ``javac`` the stale jar, if any, is removed (the Python path runs)."""
    jar = jar_path()
    if jar_problem() is None:
        return f"JVM router: {jar} is up to date"
    javac = javac or shutil.which("javac")
    jar_tool = shutil.which("jar", path=str(Path(javac).parent)) if javac else None
    if javac is None or jar_tool is None:
        jar.unlink(missing_ok=True)
        return (
            "JVM router: no javac/jar found (install a JDK 17); pkg, dchoices and wchoices "
            "will route in Python workers, the routing tables in Spark SQL"
        )
    with tempfile.TemporaryDirectory(prefix="balancebench-jvm-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        classpath = str(pyspark_jars() / "*")  # a javac wildcard, not a shell's
        subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-cp",
                classpath,
                "-d",
                str(classes),
                *(str(source) for source in SOURCES),
            ],
            check=True,
        )
        digest_file = classes / DIGEST_ENTRY
        digest_file.write_text(source_digest() + "\n")
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_name(jar.name + ".tmp")
        subprocess.run([jar_tool, "cf", str(partial), "-C", str(classes), "."], check=True)
        partial.replace(jar)  # whole or not at all
    return f"JVM router: compiled {jar}"


def routing_path(spark: Any) -> tuple[str, str]:
    """``("jvm", "")`` when this session's driver loads the router, else ``("python",
    why)``; checked once per Spark application. A session started by ``spark-submit``
    (its JVM up before :func:`spark_conf` applies) gets the jar through ``ADD JAR``,
    which also ships it to the executors."""
    app = spark.sparkContext.applicationId
    if app not in _checked:
        problem = jar_problem()
        if problem is None and not _loads(spark):
            jar = str(jar_path())
            if "'" not in jar:  # a path Spark SQL's string literal can hold
                spark.sql(f"ADD JAR '{jar}'")
            if not _loads(spark):
                problem = f"the session's JVM cannot load {', '.join(CLASS_NAMES)} from {jar}"
        _checked[app] = ("jvm", "") if problem is None else ("python", problem)
    return _checked[app]


def _loads(spark: Any) -> bool:
    from py4j.java_gateway import JavaClass

    package = spark.sparkContext._jvm.balancebench.jvm
    return all(
        isinstance(getattr(package, name.rsplit(".", 1)[1]), JavaClass) for name in CLASS_NAMES
    )


#: The JVM router takes its counts as Java ints.
JAVA_INT_MAX = 2**31 - 1


def path_for(spark: Any, strategy: Any, n_nodes: int) -> tuple[str, str]:
    """:func:`routing_path` for ``strategy`` on ``n_nodes`` nodes: also Python where its
    settings exceed what the JVM router takes (a sketch of more than 2^31 counters), and
    for a per-tuple router outside the PKG family (``Strategy.jvm_router``)."""
    if not strategy.jvm_router:
        return "python", f"{strategy.name} has no JVM router (only the PKG family's)"
    rule = strategy.decision_settings(n_nodes)
    if max(rule.capacity, rule.sketch_chunk) > JAVA_INT_MAX:
        return "python", f"capacity or sketch_chunk above {JAVA_INT_MAX}, the JVM router's limit"
    return routing_path(spark)


def path_tag(spark: Any, strategy: Any, n_nodes: int) -> str:
    """The :data:`PATH_TAG` value: ``jvm`` or ``python: <why>``."""
    path, why = path_for(spark, strategy, n_nodes)
    return path if path == "jvm" else f"{path}: {why}"


# ---- table routing ------------------------------------------------------------------------
def table_path_tag(spark: Any) -> str:
    """The :data:`TABLE_PATH_TAG` value: ``jvm`` or ``sql: <why>``."""
    path, why = routing_path(spark)
    return path if path == "jvm" else f"sql: {why}"


def table_node(spark: Any, table: Any, key: Any, tuple_id: Any) -> Any:
    """Column: the storage node of every tuple under ``table`` (a non-empty
    ``routing_table.RoutingTable``), ``key`` and ``tuple_id`` long columns, decided in the
    JVM (``TableRouting.node``: the routing table's ``storage_nodes``)."""
    from pyspark.sql.classic.column import Column

    from balancebench.core.hashing import FRACTION_UNITS, TUPLE_HASH_SALT

    jc = spark.sparkContext._jvm.balancebench.jvm.TableRouting.storageNode(
        key._jc,
        tuple_id._jc,
        int(table.n_nodes),
        TUPLE_HASH_SALT,
        FRACTION_UNITS,
        np.asarray(table.keys, dtype="<i8").tobytes(),
        np.asarray(table.offsets, dtype="<i8").tobytes(),
        np.asarray(table.hi_units, dtype="<i8").tobytes(),
        np.asarray(table.nodes, dtype="<i4").tobytes(),
    )
    return Column(jc)


def bucket_node(spark: Any, buckets: Any, key: Any) -> Any:
    """Column: the owner of every tuple's bucket under ``buckets`` (a
    ``routing_table.BucketMap``), decided in the JVM (``BucketMap.storage_nodes``)."""
    from pyspark.sql.classic.column import Column

    from balancebench.core.routing_table import BUCKET_SALT

    owners = np.asarray(buckets.owner, dtype="<i4").tobytes()
    jc = spark.sparkContext._jvm.balancebench.jvm.TableRouting.bucketOwner(
        key._jc, BUCKET_SALT, owners
    )
    return Column(jc)


# ---- the senders' states as bytes ----------------------------------------------------------
def encode_state(sender: int, state: Any) -> bytes:
    """One sender's record (the layout ``PerSenderRouting.java`` documents)."""
    sent = np.asarray(state.sent, dtype="<i8")
    keys = np.asarray(state.sketch_keys, dtype="<i8")
    counts = np.asarray(state.sketch_counts, dtype="<i8")
    head = np.array([sender, len(sent)], dtype="<i4").tobytes()
    return b"".join(
        [
            head,
            np.array([state.seen], dtype="<i8").tobytes(),
            sent.tobytes(),
            np.array([len(keys)], dtype="<i4").tobytes(),
            keys.tobytes(),
            counts.tobytes(),
        ]
    )


def decode_state(blob: bytes, new_state: Any) -> tuple[int, Any]:
    """``(sender, state)`` from one record; ``new_state(n)`` makes an empty state."""
    sender, n = (int(v) for v in np.frombuffer(blob, dtype="<i4", count=2))
    state = new_state(n)
    state.seen = int(np.frombuffer(blob, dtype="<i8", count=1, offset=8)[0])
    state.sent = np.frombuffer(blob, dtype="<i8", count=n, offset=16).astype(np.int64)
    at = 16 + 8 * n
    m = int(np.frombuffer(blob, dtype="<i4", count=1, offset=at)[0])
    at += 4
    state.sketch_keys = np.frombuffer(blob, dtype="<i8", count=m, offset=at).astype(np.int64)
    state.sketch_counts = np.frombuffer(blob, dtype="<i8", count=m, offset=at + 8 * m).astype(
        np.int64
    )
    return sender, state


def route(df: Any, strategy: Any, states: dict[int, Any], n_nodes: int) -> tuple[Any, Any]:
    """``(key, node)`` for every tuple of ``df`` (partition ``s`` = sender ``s``'s tuples in
    arrival order) routed in the JVM from ``states``; and the handle whose
    :func:`collect_states` reads the senders' new states after the batch's job."""
    from pyspark.sql import DataFrame

    from balancebench.strategies.pkg import CHOICE_SALTS

    rule = strategy.decision_settings(n_nodes)
    spark = df.sparkSession
    routed = spark.sparkContext._jvm.balancebench.jvm.PerSenderRouting.route(
        df._jdf,
        n_nodes,
        rule.d,
        rule.all_nodes,
        rule.sketch_chunk > 0,
        float(rule.theta),
        int(rule.capacity),
        int(rule.sketch_chunk),
        np.array(CHOICE_SALTS, dtype="<i8").tobytes(),
        b"".join(encode_state(s, st) for s, st in sorted(states.items())),
    )
    return DataFrame(routed.frame(), spark), routed


def collect_states(handle: Any, new_state: Any) -> dict[int, Any]:
    """The senders' new states the batch's tasks reported (a rerun task's repeats)."""
    return dict(decode_state(bytes(blob), new_state) for blob in handle.reports())


def main(argv: list[str] | None = None) -> int:
    """``python -m balancebench.spark.jvm_routing build`` (``make setup``)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m balancebench.spark.jvm_routing build", file=sys.stderr)
        return 2
    print(build())
    return 0


if __name__ == "__main__":
    sys.exit(main())
