"""``tasks``: heterogeneous WordCount task sets on a heterogeneous cluster (paper 002).

Paper 002 schedules WordCount tasks of different sizes onto nodes of different capacity
(§4: a master and two slaves, Slave1 4 cores / 4 GB and Slave2 2 cores / 2 GB; its ACTS
example: tasks of sizes 10, 8, 6 on nodes of capacity 2, 2, 1, ``time = size /
capacity``). A scheduler model places these tasks on these nodes and runs each task's
WordCount once, so every task is a self-contained chunk of text.

Tables:

- ``text``: ``line_id`` (int64, 0..n-1), ``task_id`` (int32), ``line`` (string): the
  WordCount input. Each task is a contiguous run of lines (``task_id`` non-decreasing).
- ``tasks`` (main table): ``task_id`` (int32), ``size_weight`` (float64, the requested
  relative size), ``n_lines``, ``n_words``, ``n_bytes`` (int64; bytes are the UTF-8 bytes
  of the task's lines plus one newline per line, i.e. its size as a text file).
- ``nodes``: ``node`` (int32), ``name``, ``cores`` (int32), ``memory_gb`` (float64),
  ``capacity`` (float64, relative speed = cores), from the ``tasks_cluster`` profile.

Generated text (``tasks_text_path`` null): ``tasks_total_words`` words drawn i.i.d. from a
vocabulary of ``tasks_vocabulary`` pseudo-words with Zipf frequencies (shared ``zipf_s``,
rank ``r`` has probability ``r^-s / H``), ``tasks_words_per_line`` words per line (a
task's last line may be shorter), separated by single spaces. Task ``i`` gets
``total * size_i / sum(sizes)`` words (largest-remainder rounding, so shares are exact to
one word). [Interpreted] Pseudo-words are 1-4 syllables of consonant+vowel (``ba``,
``kemo``, ...), distinct by construction (bijective base-100 numerals), drawn from the
seed; more frequent ranks get the numerically smaller (so shorter) words, a nod to
Zipf's law of abbreviation that keeps the byte size realistic.

Any text file (``tasks_text_path``): its lines, in order, are cut into contiguous tasks at
the word positions ``total * cumsum(sizes) / sum(sizes)``: a line goes to the task whose
share holds its middle word, so each task's word count is within one line of its
share. Words are counted with the project tokenizer
(:func:`balancebench.generators.user_file.count_words`: runs of letters, digits and ``_``);
on generated text that is the number of space-separated words. The file's sha256 is
recorded in ``tasks_text_sha256`` so a changed file makes a new dataset.

[Interpreted] Node profiles: ``paper002`` = the paper's two slaves; ``acts_example`` =
the ACTS example's capacities 2, 2, 1 (the paper gives no hardware: cores = capacity,
memory 1 GB per core); ``uniform4`` = 4 equal 1-core / 1 GB nodes (a homogeneous
control). Capacity is the core count, a relative speed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from balancebench.core.lazy import lazy_module
from balancebench.core.profiles import fit_zipf_exponent, zipf_fit_row
from balancebench.core.schema import quoted
from balancebench.generators.common import Generator, Manifest, TableWriter, read_table
from balancebench.generators.user_file import count_words, read_lines, words
from balancebench.generators.user_file_door import existing_file, file_sha256, pin_sha256
from balancebench.generators.zipf_stream import zipf_sampler

TEXT_SCHEMA = pa.schema([("line_id", pa.int64()), ("task_id", pa.int32()), ("line", pa.string())])
TASKS_SCHEMA = pa.schema(
    [
        ("task_id", pa.int32()),
        ("size_weight", pa.float64()),
        ("n_lines", pa.int64()),
        ("n_words", pa.int64()),
        ("n_bytes", pa.int64()),
    ]
)
NODES_SCHEMA = pa.schema(
    [
        ("node", pa.int32()),
        ("name", pa.string()),
        ("cores", pa.int32()),
        ("memory_gb", pa.float64()),
        ("capacity", pa.float64()),
    ]
)

# Loaded on first use: the registry and its Param specs are read without it (lazy.py).
pd = lazy_module("pandas")

#: Named node profiles: (name, cores, memory_gb); capacity = cores.
CLUSTERS: dict[str, list[tuple[str, int, float]]] = {
    "paper002": [("slave1", 4, 4.0), ("slave2", 2, 2.0)],
    "acts_example": [("node0", 2, 2.0), ("node1", 2, 2.0), ("node2", 1, 1.0)],
    "uniform4": [(f"node{i}", 1, 1.0) for i in range(4)],
}

#: Words generated per record batch (bounds memory at any total).
CHUNK_WORDS = 1 << 22

_CONSONANTS = "bcdfghjklmnprstvwxyz"
_VOWELS = "aeiou"
#: 100 two-letter syllables: the digits of the pseudo-word numerals.
SYLLABLES = np.array([c + v for c in _CONSONANTS for v in _VOWELS], dtype="S2")
#: First numeral of each word length (1..4 syllables) and the end of the space.
_LENGTH_STARTS = np.array([0, 100, 10_100, 1_010_100, 101_010_100], dtype=np.int64)
MAX_VOCABULARY = 1_000_000


def pseudo_words(numerals: np.ndarray) -> list[str]:
    """Distinct numerals in ``[0, 101_010_100)`` -> distinct words of 1-4 syllables."""
    numerals = np.asarray(numerals, dtype=np.int64)
    length = np.searchsorted(_LENGTH_STARTS, numerals, side="right")  # 1..4 syllables
    out = np.empty(len(numerals), dtype=object)
    for n_syl in range(1, 5):
        mask = length == n_syl
        if not mask.any():
            continue
        rest = numerals[mask] - _LENGTH_STARTS[n_syl - 1]
        chars = np.empty((len(rest), n_syl), dtype="S2")
        for pos in range(n_syl - 1, -1, -1):
            chars[:, pos] = SYLLABLES[rest % 100]
            rest //= 100
        joined = chars.view(f"S{2 * n_syl}").ravel()
        out[mask] = np.char.decode(joined, "ascii")
    return out.tolist()


def vocabulary(rng: np.random.Generator, size: int) -> pa.Array:
    """``size`` distinct pseudo-words, most frequent rank first (shorter words first)."""
    space = int(min(_LENGTH_STARTS[-1], max(4 * size, 10_100)))
    numerals = np.sort(rng.choice(space, size=size, replace=False))
    return pa.array(pseudo_words(numerals), type=pa.string())


def word_shares(sizes: list[float], total: int) -> np.ndarray:
    """Words per task: ``total * size / sum(sizes)``, largest remainder (ties: lower task)."""
    weights = np.asarray(sizes, dtype=np.float64)
    exact = total * weights / weights.sum()
    counts = np.floor(exact).astype(np.int64)
    short = total - int(counts.sum())
    if short > 0:
        order = np.lexsort((np.arange(len(exact)), -(exact - counts)))
        counts[order[:short]] += 1
    return counts


def split_lines(line_words: np.ndarray, sizes: list[float]) -> np.ndarray:
    """Task of each line: the task whose word share holds the line's middle word."""
    ends = np.cumsum(line_words, dtype=np.float64)
    middles = ends - line_words / 2.0
    weights = np.asarray(sizes, dtype=np.float64)
    cuts = ends[-1] * np.cumsum(weights)[:-1] / weights.sum() if len(ends) else weights[:0]
    return np.searchsorted(cuts, middles, side="right").astype(np.int32)


class HeterogeneousTasks(Generator):
    name = "tasks"
    description = "WordCount tasks of given relative sizes plus heterogeneous node profiles."
    reference = "paper 002 §3 (ACTS: time = size / capacity), §4.1-4.2 (WordCount, cluster)"
    kind = "tasks"
    main_table = "tasks"
    params = (
        "tasks_sizes",
        "tasks_total_words",
        "tasks_words_per_line",
        "tasks_vocabulary",
        "tasks_cluster",
        "tasks_text_path",
        "tasks_text_sha256",
        "zipf_s",
        "seed",
    )
    own_params = {
        "tasks_sizes": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e12},
            "minItems": 1,
            "maxItems": 100_000,
            "default": [10, 8, 6, 10, 8, 6, 4, 4],
            "title": "Tasks: relative sizes",
            "description": "One positive number per task; task i gets size_i / sum of the "
            "words. Default: 8 tasks (paper 002's parallelism 8) repeating its ACTS example "
            "sizes 10, 8, 6 plus two small ones.",
        },
        "tasks_total_words": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2_000_000_000,
            "default": 200_000,
            "title": "Tasks: total words",
            "description": "Words of generated text over all tasks (ignored with tasks_text_path).",
        },
        "tasks_words_per_line": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100_000,
            "default": 12,
            "title": "Tasks: words per line",
            "description": "Words per generated line (ignored with tasks_text_path).",
        },
        "tasks_vocabulary": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_VOCABULARY,
            "default": 5000,
            "title": "Tasks: vocabulary",
            "description": "Distinct words of the generated text; frequencies follow Zipf "
            "with zipf_s (ignored with tasks_text_path).",
        },
        "tasks_cluster": {
            "type": "string",
            "enum": sorted(CLUSTERS),
            "default": "paper002",
            "title": "Tasks: node profile",
            "description": "paper002: 4 cores/4 GB + 2 cores/2 GB (paper 002's slaves); "
            "acts_example: capacities 2, 2, 1; uniform4: 4 nodes of 1 core/1 GB.",
        },
        "tasks_text_path": {
            "type": ["string", "null"],
            "minLength": 1,
            "maxLength": 4096,
            "default": None,
            "title": "Tasks: text file",
            "description": "Null: generate text. Else a UTF-8 text file whose lines are cut "
            "into the tasks (total_words, words_per_line, vocabulary, zipf_s unused).",
        },
        "tasks_text_sha256": {
            "type": ["string", "null"],
            "pattern": "^([0-9a-fA-F]{64})?$",
            "default": None,
            "title": "Tasks: text file sha256",
            "description": "Recorded by the generator with tasks_text_path (content digest, "
            "part of the dataset id). Set it to pin the content: a different file fails.",
        },
    }

    # --- checks before any work ---

    def resolve(self, params: dict[str, Any]) -> dict[str, Any]:
        if params["tasks_text_path"] is None:
            return params
        path = Path(params["tasks_text_path"]).expanduser()
        sha = file_sha256("tasks_text_path", path, utf8=True)
        return pin_sha256(params, "tasks_text_sha256", sha)

    def input_files(self, params: dict[str, Any]) -> dict[str, tuple[Path, str]]:
        if params["tasks_text_path"] is None:
            return {}
        path = Path(params["tasks_text_path"]).expanduser()
        return {"tasks_text_path": (path, params["tasks_text_sha256"])}

    def check(self, params: dict[str, Any]) -> None:
        sizes = params["tasks_sizes"]
        path_text = params["tasks_text_path"]
        if path_text is None:
            if params["tasks_text_sha256"]:
                raise ValueError(
                    "tasks_text_sha256: set without tasks_text_path; expected null when the "
                    "text is generated"
                )
            counts = word_shares(sizes, params["tasks_total_words"])
            if counts.min() < 1:
                task = int(np.argmin(counts))
                needed = math.ceil(sum(sizes) / min(sizes))
                raise ValueError(
                    f"tasks_total_words: {params['tasks_total_words']} words leave task {task} "
                    f"(size {sizes[task]:g}) without words; expected at least {needed} for these "
                    "tasks_sizes"
                )
            return
        path = existing_file("tasks_text_path", path_text, "UTF-8 text file")
        file_sha256("tasks_text_path", path, utf8=True)  # names a file that is not UTF-8
        line_words = np.concatenate([count_words(lines) for lines in read_lines(path)])
        total = int(line_words.sum())
        if total == 0:
            raise ValueError(
                f"tasks_text_path: {quoted(path.name)} has no words (runs of letters, digits "
                "or _); expected a text file with words"
            )
        task_words = np.bincount(
            split_lines(line_words, sizes), weights=line_words, minlength=len(sizes)
        )
        if task_words.min() < 1:
            raise ValueError(
                f"tasks_text_path: {quoted(path.name)} ({total} words in {len(line_words)} lines) "
                f"leaves task {int(np.argmin(task_words))} of {len(sizes)} without words when "
                "cut at whole lines; expected a longer file, or fewer or more even tasks_sizes"
            )

    # --- writing ---

    def write(self, out: TableWriter, params: dict[str, Any]) -> None:
        sizes = params["tasks_sizes"]
        n_tasks = len(sizes)
        n_lines = np.zeros(n_tasks, dtype=np.int64)
        n_words = np.zeros(n_tasks, dtype=np.int64)
        n_bytes = np.zeros(n_tasks, dtype=np.int64)
        if params["tasks_text_path"] is None:
            batches = self._generated(params)
        else:
            batches = self._from_file(Path(params["tasks_text_path"]).expanduser(), sizes)
        next_line = 0
        with out.table("text", TEXT_SCHEMA) as write:
            for task_ids, lines, line_words in batches:
                rows = len(lines)
                write(
                    pa.record_batch(
                        [
                            pa.array(np.arange(next_line, next_line + rows, dtype=np.int64)),
                            pa.array(task_ids, type=pa.int32()),
                            lines,
                        ],
                        schema=TEXT_SCHEMA,
                    )
                )
                next_line += rows
                line_bytes = pc.binary_length(lines).to_numpy(zero_copy_only=False) + 1
                n_lines += np.bincount(task_ids, minlength=n_tasks)
                n_words += np.bincount(task_ids, weights=line_words, minlength=n_tasks).astype(
                    np.int64
                )
                n_bytes += np.bincount(task_ids, weights=line_bytes, minlength=n_tasks).astype(
                    np.int64
                )
        tasks = pa.table(
            [
                pa.array(np.arange(n_tasks, dtype=np.int32)),
                pa.array(np.asarray(sizes, dtype=np.float64)),
                pa.array(n_lines),
                pa.array(n_words),
                pa.array(n_bytes),
            ],
            schema=TASKS_SCHEMA,
        )
        out.write_table("tasks", tasks)
        out.write_table("nodes", nodes_table(params["tasks_cluster"]))

    @staticmethod
    def _generated(params: dict[str, Any]) -> Iterator[tuple[np.ndarray, pa.Array, np.ndarray]]:
        """(task id per line, lines, words per line) batches of generated Zipf text."""
        rng = np.random.default_rng(params["seed"])
        vocab = vocabulary(rng, params["tasks_vocabulary"])
        draw = zipf_sampler(rng, params["tasks_vocabulary"], params["zipf_s"])
        per_line = params["tasks_words_per_line"]
        chunk_words = max(per_line, CHUNK_WORDS // per_line * per_line)
        shares = word_shares(params["tasks_sizes"], params["tasks_total_words"])
        for task, task_words in enumerate(shares):
            for start in range(0, int(task_words), chunk_words):
                n = min(chunk_words, int(task_words) - start)
                line_starts = np.arange(0, n, per_line, dtype=np.int32)
                offsets = pa.array(np.append(line_starts, np.int32(n)), type=pa.int32())
                tokens = vocab.take(pa.array(draw(n)))
                lines = pc.binary_join(pa.ListArray.from_arrays(offsets, tokens), " ")
                line_words = np.diff(np.append(line_starts, n)).astype(np.int64)
                yield np.full(len(line_starts), task, dtype=np.int32), lines, line_words

    @staticmethod
    def _from_file(
        path: Path, sizes: list[float]
    ) -> Iterator[tuple[np.ndarray, pa.Array, np.ndarray]]:
        """(task id per line, lines, words per line) batches of the file, cut into tasks."""
        blocks = list(read_lines(path))
        counts = [count_words(lines) for lines in blocks]
        task_of_line = split_lines(np.concatenate(counts), sizes)
        start = 0
        for lines, line_words in zip(blocks, counts, strict=True):
            yield task_of_line[start : start + len(lines)], lines, line_words
            start += len(lines)

    # --- validation ---

    def validation_frames(
        self, dataset_dir: Path, manifest: Manifest, settings: dict[str, Any]
    ) -> dict[str, Callable[[], pd.DataFrame]]:
        frames = super().validation_frames(dataset_dir, manifest, settings)
        params = manifest.params
        generated = params["tasks_text_path"] is None

        def text_lines() -> pa.Table:
            """Rows of ``text`` with a line and a task id in range (the suite reports the rest)."""
            try:
                text = read_table(dataset_dir, manifest, "text", ["task_id", "line"])
            except (KeyError, pa.ArrowException):  # columns missing: the text suite says so
                return pa.table(
                    {"task_id": pa.array([], pa.int32()), "line": pa.array([], pa.string())}
                )
            task = text.column("task_id")
            ok = pc.and_(
                pc.and_(pc.is_valid(task), pc.is_valid(text.column("line"))),
                pc.and_(pc.greater_equal(task, 0), pc.less(task, len(params["tasks_sizes"]))),
            )
            return text.filter(pc.fill_null(ok, False))

        def task_sizes() -> pd.DataFrame:
            sizes = np.asarray(params["tasks_sizes"], dtype=np.float64)
            text = text_lines()
            line_words = count_words(text.column("line"))
            task_ids = text.column("task_id").to_numpy().astype(np.int64)
            observed = np.bincount(task_ids, weights=line_words, minlength=len(sizes))
            total = max(float(observed.sum()), 1.0)
            one_line = params["tasks_words_per_line"] if generated else line_words.max(initial=0)
            listed = _listed_words(read_table(dataset_dir, manifest, "tasks"), len(sizes))
            requested = sizes / sizes.sum()
            error = np.abs(observed / total - requested)
            allowed = float(one_line) / total
            return pd.DataFrame(
                {
                    "task_id": np.arange(len(sizes)),
                    "size_weight": sizes,
                    "requested_share": requested,
                    "observed_words": observed.astype(np.int64),
                    "observed_share": observed / total,
                    "listed_words": listed,
                    "abs_error": error,
                    "allowed_error": allowed,
                    "within_allowed": (error <= allowed + 1e-12).astype(np.int64),
                    "matches_listed": (listed == observed).astype(np.int64),
                }
            )

        def zipf_fit() -> pd.DataFrame:
            tokens = words(text_lines().column("line"))
            counts = (
                pc.value_counts(tokens).field("counts").to_numpy()
                if len(tokens)
                else np.zeros(0, dtype=np.int64)
            )
            if generated:
                row = zipf_fit_row(
                    counts,
                    params["tasks_vocabulary"],
                    params["zipf_s"],
                    settings["zipf_fit_tolerance"],
                )
                return pd.DataFrame([{**row, "applies": 1}])
            # Any text file: no requested law; report the fit, check nothing.
            nan = float("nan")
            row = {
                "tuples": int(counts.sum()),
                "keys_seen": int(np.count_nonzero(counts)),
                "requested_s": nan,
                "fitted_s": fit_zipf_exponent(counts),
                "abs_error": nan,
                "sampling_band": nan,
                "allowed_error": nan,
                "within_allowed": 1,
                "applies": 0,
            }
            return pd.DataFrame([row])

        frames["profile_task_sizes"] = task_sizes
        frames["profile_zipf_fit"] = zipf_fit
        return frames

    def extra_suite_parameters(self, manifest: Manifest) -> dict[str, Any]:
        n_tasks = len(manifest.params["tasks_sizes"])
        return {
            "n_tasks": n_tasks,
            "max_task_id": n_tasks - 1,
            "max_line_id": manifest.rows("text") - 1,
            "cluster_nodes": len(CLUSTERS[manifest.params["tasks_cluster"]]),
            "max_node": len(CLUSTERS[manifest.params["tasks_cluster"]]) - 1,
            # 1 when the text was generated and the Zipf fit must hold, 0 for a user file.
            "zipf_fit_applies": int(manifest.params["tasks_text_path"] is None),
        }


def nodes_table(cluster: str) -> pa.Table:
    """The ``nodes`` table of a named profile (capacity = cores)."""
    profile = CLUSTERS[cluster]
    return pa.table(
        [
            pa.array(np.arange(len(profile), dtype=np.int32)),
            pa.array([name for name, _, _ in profile], type=pa.string()),
            pa.array([cores for _, cores, _ in profile], type=pa.int32()),
            pa.array([mem for _, _, mem in profile], type=pa.float64()),
            pa.array([float(cores) for _, cores, _ in profile], type=pa.float64()),
        ],
        schema=NODES_SCHEMA,
    )


def _listed_words(tasks: pa.Table, n_tasks: int) -> np.ndarray:
    """``n_words`` of the tasks table by task id (-1 where a task is missing or invalid)."""
    listed = np.full(n_tasks, -1, dtype=np.int64)
    if "task_id" not in tasks.column_names or "n_words" not in tasks.column_names:
        return listed
    ids = tasks.column("task_id").to_numpy(zero_copy_only=False)
    values = tasks.column("n_words").to_numpy(zero_copy_only=False)
    for task, value in zip(ids, values, strict=True):
        if pd.notna(task) and pd.notna(value) and 0 <= task < n_tasks:
            listed[int(task)] = int(value)
    return listed
