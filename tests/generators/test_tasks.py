from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from balancebench.experiment.validation import validate_dataset
from balancebench.generators import generate, load_manifest, read_table
from balancebench.generators.tasks import pseudo_words, split_lines, word_shares

SMALL = {
    "tasks_sizes": [10, 8, 6],
    "tasks_total_words": 30_000,
    "tasks_words_per_line": 10,
    "tasks_vocabulary": 500,
    "zipf_s": 1.0,
    "seed": 3,
}


def _text_file(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_same_seed_same_digest_other_seed_other_digest(tmp_path):
    _, m1 = generate("tasks", tmp_path / "a", SMALL)
    _, m2 = generate("tasks", tmp_path / "b", SMALL)
    _, m3 = generate("tasks", tmp_path / "a", {**SMALL, "seed": 4})
    assert m1.digest == m2.digest
    assert m1.digest != m3.digest


def test_tables_and_shapes(tmp_path):
    d, m = generate("tasks", tmp_path, SMALL)
    assert m.main_table == "tasks" and m.row_count == 3
    assert load_manifest(d) == m
    text = read_table(d, m, "text")
    tasks = read_table(d, m, "tasks")
    nodes = read_table(d, m, "nodes")
    assert text.schema.names == ["line_id", "task_id", "line"]
    assert str(text.schema.field("task_id").type) == "int32"
    assert tasks.schema.names == ["task_id", "size_weight", "n_lines", "n_words", "n_bytes"]
    assert nodes.to_pydict() == {
        "node": [0, 1],
        "name": ["slave1", "slave2"],
        "cores": [4, 2],
        "memory_gb": [4.0, 2.0],
        "capacity": [4.0, 2.0],
    }
    assert text.column("line_id").to_pylist() == list(range(text.num_rows))
    task_ids = text.column("task_id").to_numpy()
    assert (np.diff(task_ids) >= 0).all()  # contiguous tasks
    lines = text.column("line").to_pylist()
    n_words = np.bincount(task_ids, weights=[len(x.split(" ")) for x in lines])
    # Shares 10:8:6 of 30k words, exact up to one word.
    assert n_words.tolist() == [12_500, 10_000, 7_500]
    assert tasks.column("n_words").to_pylist() == [12_500, 10_000, 7_500]
    assert tasks.column("n_lines").to_pylist() == [1250, 1000, 750]
    assert tasks.column("size_weight").to_pylist() == [10.0, 8.0, 6.0]
    n_bytes = np.bincount(task_ids, weights=[len(x.encode()) + 1 for x in lines])
    assert tasks.column("n_bytes").to_pylist() == n_bytes.astype(int).tolist()
    assert all(re.fullmatch(r"([a-z]+ )*[a-z]+", x) for x in lines[:100])


def test_word_frequencies_follow_zipf_and_vocabulary_is_distinct(tmp_path):
    d, m = generate("tasks", tmp_path, SMALL)
    lines = read_table(d, m, "text").column("line")
    tokens = pc.list_flatten(pc.split_pattern(lines, " "))
    counts = np.sort(pc.value_counts(tokens).field("counts").to_numpy())[::-1]
    assert len(counts) <= SMALL["tasks_vocabulary"]
    # Zipf s=1 over 500 words: the top word carries 1/H(500) ~ 14.7% of the words.
    assert counts[0] / counts.sum() == pytest.approx(1 / np.sum(1 / np.arange(1, 501)), rel=0.1)
    words = pseudo_words(np.arange(0, 101_010_100, 9973))
    assert len(set(words)) == len(words)
    assert pseudo_words(np.array([0, 99, 100, 10_100])) == ["ba", "zu", "baba", "bababa"]


def test_clusters(tmp_path):
    d, m = generate("tasks", tmp_path, {**SMALL, "tasks_cluster": "acts_example"})
    assert read_table(d, m, "nodes").column("capacity").to_pylist() == [2.0, 2.0, 1.0]
    d, m = generate("tasks", tmp_path, {**SMALL, "tasks_cluster": "uniform4"})
    assert read_table(d, m, "nodes").column("cores").to_pylist() == [1, 1, 1, 1]


def test_split_helpers():
    assert word_shares([10, 8, 6], 24).tolist() == [10, 8, 6]
    assert word_shares([1, 1, 1], 10).tolist() == [4, 3, 3]
    # Lines of 4 words, 3 equal tasks over 12 lines: 4 lines each.
    assert split_lines(np.full(12, 4), [1, 1, 1]).tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_user_text_file_split_into_tasks(tmp_path):
    rng = np.random.default_rng(0)
    lines = [
        " ".join(rng.choice(["Über", "alpha", "beta,", "x_1"], int(rng.integers(0, 9))))
        for _ in range(300)
    ]
    path = _text_file(tmp_path / "doc.txt", lines)
    params = {"tasks_sizes": [10, 8, 6], "tasks_text_path": path, "tasks_cluster": "uniform4"}
    d, m = generate("tasks", tmp_path / "out", params)
    assert re.fullmatch(r"[0-9a-f]{64}", m.params["tasks_text_sha256"])
    text = read_table(d, m, "text")
    assert text.column("line").to_pylist() == lines  # the file, line by line, in order
    n_words = read_table(d, m, "tasks").column("n_words").to_numpy()
    total = sum(len(x.split()) for x in lines)
    assert n_words.sum() == total
    assert np.abs(n_words / total - np.array([10, 8, 6]) / 24).max() <= 8 / total
    assert read_table(d, m, "nodes").num_rows == 4
    report = validate_dataset(d, tmp_path / "r.json")
    assert report.success, report.message()
    # A changed file is a new dataset, not the stale one.
    _text_file(tmp_path / "doc.txt", lines[::-1])
    d2, m2 = generate("tasks", tmp_path / "out", params)
    assert d2 != d and m2.params["tasks_text_sha256"] != m.params["tasks_text_sha256"]


def test_validation_passes(tmp_path):
    d, _ = generate("tasks", tmp_path, SMALL)
    report = validate_dataset(d, tmp_path / "r.json")
    assert report.success, report.message()
    assert set(report.frames) == {
        "text",
        "tasks",
        "nodes",
        "profile_task_sizes",
        "profile_zipf_fit",
    }


def _rewrite(d, m, table, change):
    path = d / m.table_files(table)[0]
    pq.write_table(change(pq.read_table(path)), path)


def test_validation_fails_on_moved_lines(tmp_path):
    d, m = generate("tasks", tmp_path, SMALL)

    def move(t):
        task = t.column("task_id").to_numpy().copy()
        task[task == 1] = 0  # task 1's lines now belong to task 0
        return t.set_column(1, "task_id", pa.array(task, pa.int32()))

    _rewrite(d, m, "text", move)
    report = validate_dataset(d, tmp_path / "r.json")
    assert not report.success
    failed = "\n".join(report.failed)
    assert "text: expect_column_unique_value_count_to_be_between" in failed
    assert "profile_task_sizes: expect_column_values_to_be_in_set" in failed


def test_validation_fails_on_uniform_words(tmp_path):
    d, m = generate("tasks", tmp_path, SMALL)

    def flatten(t):
        rng = np.random.default_rng(0)
        lines = [
            " ".join(f"w{int(x)}" for x in rng.integers(0, 500, len(line.split(" "))))
            for line in t.column("line").to_pylist()
        ]
        return t.set_column(2, "line", pa.array(lines))

    _rewrite(d, m, "text", flatten)
    report = validate_dataset(d, tmp_path / "r.json")
    assert not report.success
    assert any(
        f.startswith("profile_zipf_fit: expect_column_values_to_be_in_set") for f in report.failed
    )


def test_validation_fails_on_bad_tasks_table(tmp_path):
    d, m = generate("tasks", tmp_path, SMALL)
    _rewrite(d, m, "tasks", lambda t: t.set_column(3, "n_words", pa.array([1, 2, 3], pa.int64())))
    report = validate_dataset(d, tmp_path / "r.json")
    assert not report.success
    assert any("profile_task_sizes" in f and "matches_listed" in f for f in report.failed)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"tasks_sizes": []}, "tasks_sizes: \\[\\] should be non-empty"),
        ({"tasks_sizes": [3, 0]}, "tasks_sizes.1: 0 is less than or equal to the minimum of 0"),
        ({"tasks_sizes": [1, -2]}, "tasks_sizes.1: -2 is less than or equal to the minimum"),
        ({"tasks_sizes": 5}, "tasks_sizes: 5 is not of type 'array'"),
        ({"tasks_total_words": 0}, "tasks_total_words: 0 is less than the minimum of 1"),
        ({"tasks_words_per_line": 0}, "tasks_words_per_line: 0 is less than the minimum"),
        ({"tasks_vocabulary": 0}, "tasks_vocabulary: 0 is less than the minimum of 1"),
        ({"tasks_cluster": "big"}, "tasks_cluster: 'big' is not one of"),
        (
            {"tasks_sizes": [1000, 1], "tasks_total_words": 500},
            "tasks_total_words: 500 words leave task 1 \\(size 1\\) without words; expected at "
            "least 1001",
        ),
        ({"tasks_text_sha256": "ab" * 32}, "tasks_text_sha256: set without tasks_text_path"),
    ],
)
def test_bad_params_fail_fast_and_leave_nothing(tmp_path, change, needle):
    with pytest.raises(ValueError, match=needle):
        generate("tasks", tmp_path, {**SMALL, **change})
    assert list(tmp_path.iterdir()) == []


def test_bad_text_files_fail_fast_and_leave_nothing(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    (files / "empty.txt").write_bytes(b"")
    (files / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (files / "blank.txt").write_text("\n  \n--\n")
    (files / "one.txt").write_text("just one long line of words here\n")
    _text_file(files / "ok.txt", ["a b c"] * 10)
    out = tmp_path / "out"
    cases = [
        (files / "missing.txt", "tasks_text_path: '.*missing.txt' does not exist"),
        (files, "tasks_text_path: '.*files' is not a file"),
        (files / "empty.txt", "tasks_text_path: '.*empty.txt' is empty"),
        (files / "latin1.txt", "tasks_text_path: '.*latin1.txt' is not UTF-8 text .*offset 3"),
        (files / "blank.txt", "tasks_text_path: 'blank.txt' has no words"),
        (files / "one.txt", "tasks_text_path: 'one.txt' .* leaves task 0 of 3 without words"),
    ]
    for path, needle in cases:
        with pytest.raises(ValueError, match=needle):
            generate("tasks", out, {"tasks_sizes": [1, 1, 1], "tasks_text_path": str(path)})
        assert not out.exists()
    with pytest.raises(ValueError, match="tasks_text_sha256: the file's sha256 is"):
        generate(
            "tasks",
            out,
            {
                "tasks_sizes": [1, 1, 1],
                "tasks_text_path": str(files / "ok.txt"),
                "tasks_text_sha256": "0" * 64,
            },
        )
    assert not out.exists()


def test_join_arrival_does_not_change_a_text_stream(tmp_path, monkeypatch):
    from balancebench.experiment.streams import build_stream

    monkeypatch.setenv("BALANCEBENCH_LOCAL", str(tmp_path / "local"))
    d, _ = generate("tasks", tmp_path / "data", SMALL)
    base = {"seed": 1, "input_rate_tuples_per_s": 1000.0}
    plain = build_stream("wordcount", d, base)
    asked = build_stream("wordcount", d, {**base, "join_arrival": "s_first"})
    assert asked.files == plain.files  # one side: the join Param leaves the stream as is
