"""The bad-input catalogue: every entry point refuses a bad value before any work, with
the field named, a non-zero exit and no traceback, and leaves nothing behind (no new
dataset, no temporary folder, no MLflow run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from balancebench.orchestration.cli import app

RUNNER = CliRunner()

# 1000^3 points x 2 repetitions: refused from the axes' lengths, never enumerated.
_HUGE_MODEL_GRID = json.dumps(
    {
        "model": "overlay",
        "grid": {
            "overlay_target_load": [0.5] * 1000,
            "overlay_eps": [0.1] * 1000,
            "overlay_k": [2] * 1000,
        },
    }
)

# (entry point arguments, the text the message must contain: the field it names)
CASES: list[tuple[list[str], str]] = [
    # balancebench check-model: a master whose nodes share cores, nodes that do not match it
    (["check-model", "--spark-master", "local[2]"], "spark_master"),
    (["check-model", "--spark-master", "local-cluster[2,1,64]"], "spark_master"),
    (["check-model", "--conf", '{"n_nodes": 3}'], "n_nodes"),
    (["check-model", "--conf", '{"zipf_s": -1}'], "zipf_s"),
    # balancebench run --conf (the DAG Params)
    (["run", "--conf", "null"], "CONF"),
    (["run", "--conf", "[1, 2]"], "CONF"),
    (["run", "--conf", '"text"'], "CONF"),
    (["run", "--conf", "{bad json"], "CONF"),
    (["run", "--conf", '{"zipf_s": NaN}'], "CONF"),
    (["run", "--conf", '{"workload": "eq5", "strategies": ["bi6"], "n_nodes": 8}'], "n_nodes"),
    (["run", "--conf", '{"zipf_s": Infinity}'], "CONF"),
    (["run", "--conf", '{"n_nodes": 4.0}'], "n_nodes"),
    (["run", "--conf", '{"n_batches": 2.0}'], "n_batches"),
    (["run", "--conf", '{"n_nodes": 0}'], "n_nodes"),
    (["run", "--conf", '{"n_nodes": true}'], "n_nodes"),
    (["run", "--conf", '{"n_nodes": "8"}'], "n_nodes"),
    (["run", "--conf", '{"zipf_s": -1}'], "zipf_s"),
    (["run", "--conf", '{"zipf_s": 6}'], "zipf_s"),
    (["run", "--conf", '{"tolerance": 0}'], "tolerance"),
    (["run", "--conf", '{"tolerance": "tight"}'], "tolerance"),
    (["run", "--conf", '{"strategies": []}'], "strategies"),
    (["run", "--conf", '{"strategies": ["hash", "nope"]}'], "strategies"),
    (["run", "--conf", '{"strategies": ["hash", "hash"]}'], "strategies"),
    (["run", "--conf", '{"strategies": "hash"}'], "strategies"),
    (["run", "--conf", '{"workload": "sort"}'], "workload"),
    (["run", "--conf", '{"workload": "topk", "strategies": ["dynamic"]}'], "strategies"),
    (["run", "--conf", '{"workload": "eq5", "dataset": "topic_stream"}'], "dataset"),
    (["run", "--conf", '{"dataset": "nope"}'], "dataset"),
    (["run", "--conf", '{"n_tupels": 1000}'], "n_tupels"),
    (["run", "--conf", '{"experiment": "/tmp/x"}'], "experiment"),
    (["run", "--conf", '{"experiment": "../../x"}'], "experiment"),
    (["run", "--conf", '{"experiment": ".hidden"}'], "experiment"),
    (["run", "--conf", '{"experiment": ""}'], "experiment"),
    (["run", "--conf", '{"window_s": -1}'], "window_s"),
    (["run", "--conf", '{"input_rate_tuples_per_s": 0}'], "input_rate_tuples_per_s"),
    (["run", "--conf", '{"seed": -1}'], "seed"),
    (["run", "--conf", '{"network_bandwidth_mb_per_s": 0}'], "network_bandwidth_mb_per_s"),
    (["run", "--conf", '{"node_capacity_state_tuples": 0}'], "node_capacity_state_tuples"),
    # Scale-out runs on joins, and only strategies that can add nodes to a running job.
    (["run", "--conf", '{"node_capacity_state_tuples": 1000}'], "node_capacity_state_tuples"),
    (
        [
            "run",
            "--conf",
            '{"workload": "eq5", "strategies": ["spark_aqe"], "node_capacity_state_tuples": 9}',
        ],
        "node_capacity_state_tuples",
    ),
    (["run", "--conf", '{"mnrt_two_stream_ratio": -1}'], "mnrt_two_stream_ratio"),
    (["run", "--conf", '{"dataset": "user_file"}'], "user_file_path"),
    (
        ["run", "--conf", '{"dataset": "user_file", "user_file_path": "/no/x.csv"}'],
        "user_file_path",
    ),
    (["run", "--spark-master", "spark://h:99999"], "spark_master"),
    (["run", "--spark-master", "yarn; rm -rf /"], "spark_master"),
    (["run", "--spark-master", "local[x]"], "spark_master"),
    # Issue 27: silent acceptances and tracebacks found by the adversarial check.
    (["run", "--conf", '{"n_nodes": 0, "n_nodes": 4}'], "n_nodes"),  # duplicate key
    (["run", "--conf", '{"experiment": "abc\\n"}'], "experiment"),  # `$` let "\n" in
    (["run", "--spark-master", "local[2]\n"], "spark_master"),
    # a master where nothing listens: refused at the door, not 80 s later by spark-submit
    (["run", "--spark-master", "spark://127.0.0.1:1"], "spark_master: nothing answers"),
    (["sweep", "--spark-master", "spark://127.0.0.1:1"], "spark_master: nothing answers"),
    (["run", "--conf", '{"n_batches": 100000}'], "max_estimated_hours"),  # ~400 h of work
    # issue 62: the estimate and its limit in one unit that tells them apart
    (["run", "--conf", '{"max_estimated_hours": 1e-7}'], "s = 1e-07 h"),
    # issue 62: an empty CONF (an unset shell variable) does not start the default run
    (["run", "--conf", ""], "CONF: empty; allowed: a JSON object of Params, '{}'"),
    (["sweep", "--conf", " "], "CONF: empty"),
    # issue 62: conflicting arguments are refused, naming both
    (["figure", "3a", "--conf", '{"figure": "3b"}'], "as the argument '3a' and in CONF as '3b'"),
    # issue 62: every rule that refuses is in the printed "allowed" (length, name in words)
    (["run", "--conf", '{"experiment": "' + "x" * 300 + '"}'], "at most 200 characters"),
    (["run", "--conf", '{"experiment": "café"}'], "unaccented letters A-Z and a-z"),
    (["run", "--conf", "[" * 10_000 + "]" * 10_000], "CONF"),  # RecursionError before
    (["run", "--conf", '{"a": "' + "x" * 1_000_001 + '"}'], "CONF"),
    (["run-model", "--conf", '{"model": "overlay", "model": "elastic"}'], "model"),
    (["report", "--experiment", "../../x"], "experiment"),  # answered exit 0 before
    (["report", "--experiment", "no such experiment"], "experiment"),
    (
        ["generate", "zipf_stream", "--set", "n_tuples=1000", "--set", "n_tuples=2000"],
        "n_tuples",
    ),
    (
        ["run", "--conf", '{"dataset": "user_file", "user_file_path": "/proc/self/status"}'],
        "not a regular file",  # "is empty" before
    ),
    # balancebench run-model --conf (the model sweep Params and grid)
    (["run-model", "--conf", "null"], "CONF"),
    (["run-model", "--conf", '{"model": "nope"}'], "model"),
    (["run-model", "--conf", '{"repetitions": 0}'], "repetitions"),
    (["run-model", "--conf", '{"repetitions": 2.0}'], "repetitions"),
    (["run-model", "--conf", '{"experiment": "a/b"}'], "experiment"),
    (["run-model", "--conf", '{"grid": {"nope_x": [1]}}'], "grid"),
    (["run-model", "--conf", _HUGE_MODEL_GRID], "max_runs"),
    # balancebench generate --set (a dataset's Params)
    (["generate", "zipf_stream", "--set", "zipf_s=NaN", "--no-validate"], "zipf_s"),
    (["generate", "zipf_stream", "--set", "n_tuples=20000.0", "--no-validate"], "n_tuples"),
    (["generate", "zipf_stream", "--set", "n_tuples", "--no-validate"], "--set"),
    (["generate", "zipf_stream", "--set", "zipf_s=-2", "--no-validate"], "zipf_s"),
    (["generate", "nope"], "dataset"),
    (["generate", "user_file", "--no-validate"], "user_file_path"),
    # refused before GX runs (it ran, 5 s of CPU, and failed 2 expectations)
    (["validate", ".", "--zipf-fit-tolerance", "-1"], "zipf_fit_tolerance"),
    (
        ["generate", "user_file", "--set", "user_file_path=/no/such/file.csv", "--no-validate"],
        "user_file_path",
    ),
    # balancebench validate / report
    (["validate", "/no/such/dataset"], "dataset_dir"),
    (["report", "--parent", "0123456789abcdef"], "parent"),
    (["report", "--sweep", "0123456789abcdef"], "sweep"),
    # balancebench figure (paper 000's experiments)
    (["figure", "9z"], "figure"),
    (["figure", "3a", "--conf", '{"min_rounds": 0}'], "min_rounds"),
    (["figure", "3a", "--conf", '{"max_rounds": 2}'], "max_rounds: 2 is below min_rounds 5"),
    (["run", "--conf", '{"baseline": "pkg"}'], "baseline: 'pkg' is not among"),
    # balancebench sweep (the nightly sweep once; its number axes typed as text)
    (["sweep", "--conf", '{"grid_zipf_s": "0.8,,1"}'], "grid_zipf_s: '0.8,,1' is not numbers"),
    (["sweep", "--conf", '{"grid_n_nodes": "4.5"}'], "grid_n_nodes"),
    (["sweep", "--conf", '{"grid_strategies": ["nope"]}'], "grid_strategies"),
    # A key of the JSON grid is named with what that axis allows, not the grid's type.
    (
        [
            "sweep",
            "--conf",
            '{"grid": {"workloads": [], "strategies": ["hash"], "zipf_s": [1.0], "n_nodes": [4]}}',
        ],
        "grid.workloads: [] should be non-empty (allowed: items from ['band', 'eq5',",
    ),
    (
        ["sweep", "--conf", '{"grid": {"workloads": ["topk"], "strategies": ["hash"]}}'],
        "grid: ['zipf_s', 'n_nodes'] missing; allowed:",
    ),
]


# Benchmark scripts: (script and arguments, the field named). Each checks every input
# before it starts Spark or writes a dataset; argparse exits 2 with one usage line.
BENCH_CASES: list[tuple[list[str], str]] = [
    (["skew_sweep.py", "--skews", "nan"], "zipf_s"),
    (["skew_sweep.py", "--strategies", "nope"], "strategies"),
    (["skew_sweep.py", "--workloads", "eq6"], "workload"),
    (["skew_sweep.py", "--nodes", "0"], "--nodes"),
    (["skew_sweep.py", "--tolerance", "-1"], "tolerance"),
    (["skew_sweep.py", "--drift-period", "-1"], "topic_stream_drift_period_s"),
    (["skew_sweep.py", "--repeats", "0"], "--repeats"),
    (["skew_sweep.py", "--window", "nan"], "window_s"),
    (["engine_vs_streaming.py", "--rate", "inf"], "input_rate_tuples_per_s"),
    (["engine_vs_streaming.py", "--skew", "9"], "zipf_s"),
    (["state_checkpoint.py", "--sf", "-1"], "tpch_scale_factor"),
    (["state_checkpoint.py", "--batches", "4.0"], "--batches"),
    (["routing_overhead.py", "--repeats", "0"], "--repeats"),
    (["plan_time.py", "--repeats", "2.0"], "--repeats"),
    (["model_speed.py", "--models", "zz"], "--models"),
    (["paper_figures.py", "--only", "zz"], "--only"),
    (["crossover.py", "--workloads", "zz"], "--workloads"),
    (["crossover.py", "--min-rounds", "1"], "--min-rounds"),
    (["crossover.py", "--skews", "9"], "zipf_s"),
    (["crossover.py", "--loads", "0"], "--loads"),
    (["generate.py", "--only", "zz"], "--only"),
    (["harness_cpu.py", "--skip", "12"], "--skip"),
    (["harness_cpu.py", "--conf", '{"workload": "eq6"}'], "workload"),
    (
        ["harness_cpu.py", "--conf", '{"dataset": "user_file", "user_file_path": "/no/such.csv"}'],
        "user_file_path",
    ),
]


def _left_behind(root: Path) -> tuple[set[str], int]:
    """Every file and folder under the datasets, and the number of MLflow runs."""
    from balancebench.state import tracking

    datasets = root / "datasets"
    files = {str(p.relative_to(root)) for p in datasets.rglob("*")} if datasets.exists() else set()
    mlflow = tracking.store()
    experiments = [e.experiment_id for e in mlflow.search_experiments()]
    runs = len(mlflow.search_runs(experiments)) if experiments else 0
    return files, runs


@pytest.mark.parametrize(("args", "field"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_is_refused_at_the_door(local_state, args, field):
    before = _left_behind(local_state)
    result = RUNNER.invoke(app, args)
    text = result.output
    assert result.exit_code != 0, text
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # no traceback
    assert "Traceback" not in text
    assert field in text, text
    assert _left_behind(local_state) == before  # no dataset, no temporary folder, no run


@pytest.mark.parametrize(("args", "field"), BENCH_CASES, ids=[" ".join(a) for a, _ in BENCH_CASES])
def test_benchmark_scripts_refuse_bad_input_before_any_work(local_state, args, field):
    before = _left_behind(local_state)
    script = Path(__file__).parents[1] / "benchmarks" / args[0]
    done = subprocess.run(
        [sys.executable, str(script), *args[1:]], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert field in done.stderr.splitlines()[-1], done.stderr
    assert _left_behind(local_state) == before


def test_the_catalogue_is_large_enough():
    assert len(CASES) + len(BENCH_CASES) >= 40


def test_error_messages_quote_at_most_a_short_escaped_excerpt(tmp_path, local_state):
    """A file that is not what it should be is named, never dumped into the message."""
    secret = tmp_path / "secret.csv"
    secret.write_text("password: hunter2-" + "x" * 5000 + "\n\x00\x01binary\n")
    args = [
        "generate",
        "user_file",
        "--set",
        f"user_file_path={secret}",
        "--set",
        "user_file_key_column=nope",
        "--no-validate",
    ]
    result = RUNNER.invoke(app, args)
    assert result.exit_code != 0
    assert "x" * 300 not in result.output
    assert "\x00" not in result.output
    assert json.dumps(result.output)  # printable


def test_a_long_value_is_quoted_short_and_escaped(local_state):
    """A 100 kB Param is named with a short excerpt, not echoed whole; control bytes and
    rich markup in it reach the terminal escaped."""
    value = "[bold]\x1b[31m" + "y" * 100_000
    result = RUNNER.invoke(app, ["run", "--conf", json.dumps({"experiment": value})])
    assert result.exit_code == 2, result.output
    assert "experiment" in result.output
    assert len(result.output) < 2000, len(result.output)
    assert "\x1b" not in result.output  # the raw escape byte
    assert "\\x1b" in result.output  # shown escaped
    assert "[bold]" in result.output  # shown as text, not taken as markup


@pytest.mark.parametrize(
    ("manifest", "why"),
    [("{}", "not a dataset manifest"), ("[1, 2]", "not a dataset manifest"), ("\xff{", "not JSON")],
)
def test_validate_refuses_a_manifest_that_is_not_one(tmp_path, manifest, why):
    (tmp_path / "manifest.json").write_bytes(manifest.encode("latin-1"))
    result = RUNNER.invoke(app, ["validate", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # TypeError before
    assert "dataset_dir" in result.output and why in result.output


def test_generate_into_a_file_says_so_in_one_line(tmp_path, local_state):
    """``--out`` naming a file: one line naming the path (NotADirectoryError before)."""
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    result = RUNNER.invoke(
        app, ["generate", "zipf_stream", "--set", "n_tuples=1000", "--out", str(target)]
    )
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert str(target) in result.output.replace("\n", "")
    assert target.read_text() == "not a folder"  # nothing written over it


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        ("nan.parquet", "nan", "NaN"),
        ("null.csv", b"key,v\n1,a\n,b\n", "null"),
        ("latin1.txt", b"caf\xe9 au lait\n", "UTF-8"),
        ("parquet.csv", "parquet", "Parquet"),
        ("dup.csv", b"key,key\n1,2\n", "2 columns named"),
    ],
)
def test_user_files_are_checked_before_the_dag_starts(tmp_path, local_state, name, content, said):
    """Keys and content of a user file are refused by `balancebench run` at the door, in
    seconds (45-63 s inside the DAG before), with the field named and no traceback."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / name
    if content == "nan":
        pq.write_table(pa.table({"key": [1.0, float("nan")]}), path)
    elif content == "parquet":
        pq.write_table(pa.table({"key": [1, 2]}), path)
    else:
        path.write_bytes(content)
    workload = "wordcount" if name.endswith(".txt") else "topk"
    conf = {"dataset": "user_file", "user_file_path": str(path), "workload": workload}
    before = _left_behind(local_state)
    result = RUNNER.invoke(app, ["run", "--conf", json.dumps(conf)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "refused before any work" in result.output and "user_file" in result.output
    assert said.lower() in result.output.lower(), result.output
    assert _left_behind(local_state) == before


def test_file_text_is_never_taken_for_rich_emoji_or_markup(tmp_path, local_state):
    """A file's text in a message stays text: ``:x:`` was rendered as an emoji by rich."""
    path = tmp_path / "users.csv"
    path.write_text("root:x:0:0:[bold]root[/bold]\ndaemon:x:1:1\n")
    conf = {"dataset": "user_file", "user_file_path": str(path)}
    result = RUNNER.invoke(app, ["run", "--conf", json.dumps(conf)])
    assert result.exit_code == 2, result.output
    assert "❌" not in result.output
    assert ":x:" in result.output and "[bold]" in result.output
