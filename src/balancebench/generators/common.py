"""What every dataset shares: a manifest, a content digest and an atomic write.

A dataset is a folder with Parquet files and ``manifest.json`` (generator, params, row
count, schema, content digest). It is written under a temporary name and renamed into
place at the end, so a failed or interrupted run never leaves a partial dataset behind.
The digest hashes column names, types and values (not Parquet bytes), so it identifies
the data whatever the writer version.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Manifest:
    generator: str
    params: dict[str, Any]
    row_count: int
    schema: dict[str, str]
    digest: str
    files: list[str]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)


def load_manifest(dataset_dir: str | Path) -> Manifest:
    path = Path(dataset_dir) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"dataset_dir: no {MANIFEST} in {dataset_dir}")
    return Manifest(**json.loads(path.read_text()))


def params_id(generator: str, params: dict[str, Any]) -> str:
    """Stable id of a (generator, params) pair: the dataset's folder name."""
    blob = json.dumps({"generator": generator, "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class ColumnDigest:
    """Incremental sha256 over record batches, column by column, in a fixed order."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def update(self, batch: pa.RecordBatch) -> None:
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            values = column.to_numpy(zero_copy_only=False)
            self._h.update(name.encode())
            self._h.update(str(column.type).encode())
            self._h.update(np.ascontiguousarray(values).tobytes())

    def hexdigest(self) -> str:
        return "sha256:" + self._h.hexdigest()


def write_atomically(final_dir: Path, write: Any) -> None:
    """Call ``write(tmp_dir)``, then rename ``tmp_dir`` to ``final_dir`` (replacing it)."""
    final_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = final_dir.parent / f".{final_dir.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        write(tmp)
        if final_dir.exists():
            old = final_dir.parent / f".{final_dir.name}.old-{uuid.uuid4().hex[:8]}"
            final_dir.rename(old)
            tmp.rename(final_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
