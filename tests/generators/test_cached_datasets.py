"""A cached dataset proves itself before it is reused (``common.verify_dataset``), a user's
file is the bytes that were read, and a stopped or killed writer leaves nothing behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from balancebench.generators import generate, load_manifest, read_table
from balancebench.generators.common import MANIFEST, file_sha256
from balancebench.generators.user_file import UserFile

SMALL = {"n_tuples": 20_000, "n_keys": 200, "zipf_s": 1.0}
ROOT = Path(__file__).resolve().parents[2]


def _stream(out: Path, seed: int) -> tuple[Path, object]:
    return generate("zipf_stream", out, {**SMALL, "seed": seed})


def _keys(folder: Path) -> list[int]:
    return read_table(folder, load_manifest(folder), "events").column("key").to_pylist()


def test_another_seeds_file_in_its_place_is_found_and_written_again(tmp_path, capsys):
    # Given seed 47's dataset, and seed 44's with the same schema and rows
    mine, manifest = _stream(tmp_path, 47)
    other, _ = _stream(tmp_path, 44)
    expected = _keys(mine)
    # When seed 44's events file replaces seed 47's
    shutil.copyfile(other / "events.parquet", mine / "events.parquet")
    assert _keys(mine) != expected
    again, reused = _stream(tmp_path, 47)
    # Then the next use says so, names the file, and writes the dataset again
    said = capsys.readouterr().err
    assert "events.parquet" in said and "writing it again" in said
    assert again == mine and reused.digest == manifest.digest
    assert _keys(mine) == expected


def test_a_truncated_file_is_found_and_written_again(tmp_path, capsys):
    mine, manifest = _stream(tmp_path, 47)
    path = mine / "events.parquet"
    size = path.stat().st_size
    with path.open("r+b") as f:
        f.truncate(size // 2)
    _, reused = _stream(tmp_path, 47)
    assert f"events.parquet has {size // 2} bytes where its manifest says {size}" in (
        capsys.readouterr().err
    )
    assert path.stat().st_size == size and reused.digest == manifest.digest


def test_a_manifest_without_file_digests_is_written_again(tmp_path, capsys):
    # A dataset written before the manifests kept their files' digests
    mine, _ = _stream(tmp_path, 47)
    data = json.loads((mine / MANIFEST).read_text())
    del data["file_facts"]
    (mine / MANIFEST).write_text(json.dumps(data))
    _, again = _stream(tmp_path, 47)
    assert "keeps no digests of its files" in capsys.readouterr().err
    assert set(again.file_facts) == set(again.files)


def _only_reused(said: str) -> bool:
    """Nothing said but "reused" lines: no warning, no rewrite."""
    return all(": reused, " in line for line in said.splitlines())


def test_an_untouched_dataset_is_reused_and_said_so_in_words(tmp_path, capsys):
    mine, _ = _stream(tmp_path, 47)
    assert capsys.readouterr().err == ""  # written, not reused
    written = (mine / "events.parquet").stat().st_mtime_ns
    _stream(tmp_path, 47)
    said = capsys.readouterr().err
    assert _only_reused(said)
    assert said.splitlines() == [
        f"dataset {mine}: reused, 20,000 rows written earlier with these params (checked: "
        "every byte's sha256)"
    ]
    assert (mine / "events.parquet").stat().st_mtime_ns == written


def test_a_changed_byte_inside_the_data_is_found_on_reuse(tmp_path, capsys):
    # Given a byte changed inside a data page: same size, same footer
    mine, manifest = _stream(tmp_path, 47)
    path = mine / "events.parquet"
    with path.open("r+b") as f:
        f.seek(path.stat().st_size // 3)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    # When the dataset is used again, the change is found, said, and written over
    said = []
    generate("zipf_stream", tmp_path, {**SMALL, "seed": 47}, say=said.append)
    assert said == [
        f"dataset {mine}: events.parquet's bytes are not the ones its manifest keeps "
        "(sha256); writing it again"
    ]
    assert file_sha256(path) == load_manifest(mine).file_facts["events.parquet"]["sha256"]


@pytest.mark.parametrize("outside", ["../outside/events.parquet", "/etc/hostname", "link"])
def test_a_manifest_naming_a_file_outside_its_folder_is_refused(tmp_path, outside):
    # Given a dataset whose manifest names a file outside its folder (a path, or a link
    # inside the folder that points out of it)
    mine, _ = _stream(tmp_path, 47)
    stranger = tmp_path / "outside"
    stranger.mkdir()
    shutil.copyfile(mine / "events.parquet", stranger / "events.parquet")
    (mine / "link").symlink_to(stranger / "events.parquet")
    data = json.loads((mine / MANIFEST).read_text())
    data["files"] = [outside]
    data["tables"]["events"]["files"] = [outside]
    data["file_facts"] = {outside: data["file_facts"]["events.parquet"]}
    (mine / MANIFEST).write_text(json.dumps(data))
    # Then reading it is refused in one line naming the path
    with pytest.raises(ValueError, match="which is not a file inside the dataset folder"):
        load_manifest(mine)
    # ... and the cache writes the dataset again instead of reading through it
    said = []
    again, manifest = generate("zipf_stream", tmp_path, {**SMALL, "seed": 47}, say=said.append)
    assert len(said) == 1 and "not a file inside the dataset folder" in said[0]
    assert "writing it again" in said[0] and manifest.files == ["events.parquet"]


def test_a_file_in_the_dataset_folders_place_is_said_and_nothing_hidden_is_left(
    tmp_path,
):
    mine, _ = _stream(tmp_path, 47)
    shutil.rmtree(mine)
    mine.write_text("not a dataset")
    said = []
    again, _ = generate("zipf_stream", tmp_path, {**SMALL, "seed": 47}, say=said.append)
    assert said == [
        f"dataset {mine}: is not a dataset folder (a file or a link is in its place); "
        "writing it again"
    ]
    assert again.is_dir() and (again / MANIFEST).is_file()
    assert [p.name for p in mine.parent.iterdir()] == [mine.name]  # no hidden leftover


def test_a_user_file_that_changes_while_it_is_read_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "clicks.csv"
    path.write_text("user\n" + "".join(f"u{i % 7}\n" for i in range(500)), encoding="utf-8")
    loaded = UserFile._load

    def load_then_append(self, params):  # another program appends as the file is read
        out = loaded(self, params)
        with path.open("a", encoding="utf-8") as f:
            f.write("u9\n")
        return out

    monkeypatch.setattr(UserFile, "_load", load_then_append)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"user_file_path: .*clicks\.csv.* changed while it"):
        generate("user_file", out, {"user_file_path": str(path), "user_file_key_column": "user"})
    assert [p.name for p in out.rglob("*")] in ([], ["user_file"])  # nothing kept


def test_one_skew_given_as_a_whole_number_or_a_float_is_one_dataset(tmp_path):
    one, _ = generate("zipf_stream", tmp_path, {**SMALL, "zipf_s": 1})
    same, _ = generate("zipf_stream", tmp_path, {**SMALL, "zipf_s": 1.0})
    zero, _ = generate("zipf_stream", tmp_path, {**SMALL, "zipf_s": 0})
    negative_zero, _ = generate("zipf_stream", tmp_path, {**SMALL, "zipf_s": -0.0})
    assert one == same and zero == negative_zero
    assert len(list((tmp_path / "zipf_stream").iterdir())) == 2


def test_a_dead_writers_temporary_folder_is_removed_by_the_next_generate(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / "zipf_stream" / f".abc.tmp-{dead.pid}-0123abcd"
    left.mkdir(parents=True)
    (left / "events.parquet").write_bytes(b"partial")
    mine = tmp_path / "zipf_stream" / f".abc.tmp-{os.getpid()}-0123abcd"  # alive: kept
    mine.mkdir()
    _stream(tmp_path, 47)
    assert not left.exists() and mine.exists()


def test_sigterm_to_generate_removes_its_temporary_folder(tmp_path):
    # Given a generate long enough to be stopped mid-write
    cmd = [
        str(Path(sys.executable).parent / "balancebench"),
        "generate",
        "zipf_stream",
        "--set",
        "n_tuples=300000000",
        "--no-validate",
        "--out",
        str(tmp_path),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("zipf_stream/.*.tmp-*/*.parquet")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    # When it is stopped with SIGTERM
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    # Then it says so, exits 143 and leaves nothing
    assert proc.returncode == 143, err
    assert "stopped by SIGTERM; nothing of it was kept" in err
    assert list(tmp_path.rglob("*")) == [tmp_path / "zipf_stream"]
