"""The settings balancebench reads from the environment: the one registry, checked at the door.

Every ``BALANCEBENCH_*`` variable a user may set is one :class:`Setting` here: its
default, what it allows and the parse that turns its text into the value the code uses.
Code reads a setting with :func:`setting` (never ``os.environ`` directly), and every entry
point checks them all before any work (:func:`check_environment`: the CLI's commands,
``make airflow``, the DAG files as they are parsed), so a bad value is refused at once
with one line naming the variable and what it allows, not minutes later by the JVM or
Airflow. The README's "Settings from the environment" table is this registry.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from balancebench.core.schema import quoted


class SettingError(ValueError):
    """A ``BALANCEBENCH_*`` variable holds a value it does not allow."""


@dataclass(frozen=True)
class Setting:
    name: str
    #: The text used when the variable is unset (None: unset means "not given").
    default: str | None
    #: What the variable allows, in words (the error message and the README say it).
    allowed: str
    #: What it sets, in words.
    what: str
    #: Text -> value; raises ``ValueError`` (its message is not shown) for a bad text.
    parse: Callable[[str], Any]


_MEMORY = re.compile(r"^[1-9][0-9]{0,6}[kmgt]$", re.IGNORECASE)
_MASTER = re.compile(
    r"^(local(\[(\*|[1-9][0-9]{0,3})\])?"
    r"|spark://(?P<host>[A-Za-z0-9.-]{1,253})(:(?P<port>[0-9]{1,5}))?)$"
)
_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(/\S*)?$")


def _concurrency(text: str) -> int:
    value = int(text.strip(), 10)
    if not 1 <= value <= 64:
        raise ValueError(text)
    return value


#: The least memory a Spark driver starts with: Spark 4 refuses a JVM whose heap is under
#: 450 MiB ("System memory ... must be at least 471859200"). Measured here with PySpark
#: 4 on Java 17: 450m starts, 400m fails (256m, 1k too, the last before the JVM is up).
MIN_DRIVER_MEMORY_BYTES = 450 * 2**20
_MEMORY_UNITS = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _memory(text: str) -> str:
    value = text.strip()
    if not _MEMORY.fullmatch(value):
        raise ValueError(text)
    if int(value[:-1]) * _MEMORY_UNITS[value[-1].lower()] < MIN_DRIVER_MEMORY_BYTES:
        raise ValueError(text)
    return value


def parse_spark_master(text: str) -> str:
    """``text`` if it is ``local``, ``local[N]``, ``local[*]`` or ``spark://host[:port]``
    (port 1-65535), else ``ValueError``."""
    found = _MASTER.fullmatch(text or "")  # not match: `$` lets a trailing newline in
    port = found.group("port") if found else None
    if not found or (port is not None and not 1 <= int(port) <= 65535):
        raise ValueError(text)
    return text


def _cron(text: str) -> str | None:
    """``none`` (only when triggered) or a five-field cron expression."""
    value = text.strip()
    if value.lower() in ("", "none"):
        return None
    from croniter import croniter  # Airflow's own cron parser

    if len(value.split()) != 5 or not croniter.is_valid(value):
        raise ValueError(text)
    return value


def _folder(text: str) -> Path:
    """A folder, or a path where one can be made: not a file, under a folder that exists
    or can be made."""
    path = Path(text).expanduser()
    if not text.strip() or "\x00" in text:
        raise ValueError(text)
    for part in (path, *path.parents):
        if part.exists():
            if not part.is_dir():
                raise ValueError(text)
            break
    return path


def _url(text: str) -> str:
    if not _URL.fullmatch(text.strip()):
        raise ValueError(text)
    return text.strip().rstrip("/")


SETTINGS: Final[dict[str, Setting]] = {
    s.name: s
    for s in (
        Setting(
            "BALANCEBENCH_NIGHTLY_CRON",
            "0 2 * * *",
            "a five-field cron expression (UTC), or none",
            "when nightly_sweep runs (read by `make airflow`)",
            _cron,
        ),
        Setting(
            "BALANCEBENCH_MODEL_CRON",
            "none",
            "a five-field cron expression (UTC), or none",
            "when model_experiment runs on its defaults (read by `make airflow`)",
            _cron,
        ),
        Setting(
            "BALANCEBENCH_TIMED_CONCURRENCY",
            "1",
            "a whole number from 1 to 64",
            "how many timed Spark runs of one DAG run share the machine",
            _concurrency,
        ),
        Setting(
            "BALANCEBENCH_DRIVER_MEMORY",
            "4g",
            "a JVM memory size of at least 450m, the least a Spark driver starts with: a "
            "whole number with k, m, g or t (e.g. 4g, 512m)",
            "the Spark driver's memory (2g for model_experiment's sweep when unset)",
            _memory,
        ),
        Setting(
            "BALANCEBENCH_SPARK_MASTER",
            "local[*]",
            "local, local[N], local[*] or spark://host:port (port 1-65535)",
            "where the DAGs' Spark applications run",
            parse_spark_master,
        ),
        Setting(
            "BALANCEBENCH_CHECKPOINT_DIR",
            None,
            "a folder, or a path where one can be made (not a file)",
            "where reliable state checkpoints go (default .local/checkpoints; on a "
            "cluster of several machines a shared file system)",
            _folder,
        ),
        Setting(
            "BALANCEBENCH_HOME",
            None,
            "a folder, or a path where one can be made (not a file)",
            "the project root whose .local holds the state (default: the checkout)",
            _folder,
        ),
        Setting(
            "BALANCEBENCH_LOCAL",
            None,
            "a folder, or a path where one can be made (not a file)",
            "the .local folder itself (Airflow home, MLflow store, datasets, logs)",
            _folder,
        ),
        Setting(
            "BALANCEBENCH_MLFLOW_UI",
            "http://127.0.0.1:5000",
            "an http:// or https:// URL",
            "where reports link the MLflow UI of a file store",
            _url,
        ),
    )
}


def setting(name: str, default: str | None = None) -> Any:
    """The value of ``name`` (a key of :data:`SETTINGS`), parsed; ``default`` replaces the
    registry's default where one caller needs its own (the model sweep's driver memory).
    Unset and no default: None. ``SettingError`` naming the variable for a bad value."""
    spec = SETTINGS[name]
    text = os.environ.get(name)
    if text is None:
        text = default if default is not None else spec.default
        if text is None:
            return None
    try:
        return spec.parse(text)
    except (ValueError, TypeError, OverflowError):
        raise SettingError(
            f"{name}: {quoted(text)} is not allowed; allowed: {spec.allowed}"
        ) from None


def check_environment() -> None:
    """Every setting parses, or one ``SettingError`` listing each bad variable: called by
    every entry point before any work."""
    problems = []
    for name in SETTINGS:
        try:
            setting(name)
        except SettingError as exc:
            problems.append(str(exc))
    if problems:
        raise SettingError("; ".join(problems))
