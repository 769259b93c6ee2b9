"""Helpers for end-to-end tests that run the real Airflow CLI and spark-submit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Tiny but complete: every strategy plans at least twice.
TINY = {
    "n_tuples": 40_000,
    "n_keys": 400,
    "n_batches": 3,
    "n_nodes": 4,
    "input_rate_tuples_per_s": 20_000.0,
    # No untimed warm-up: these runs check behaviour, not timings (saves ~7 s a run).
    "warmup_batches": 0,
}


@pytest.fixture(scope="session")
def airflow_cli(local_state):
    """Run ``airflow ...`` with the embedded environment; the DB is migrated once."""
    from balancebench.orchestration.local_env import airflow_env

    env = {**os.environ, **airflow_env()}

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / "airflow"), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )

    migrated = run("db", "migrate", timeout=300)
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    return run


def only_loopback(pids: list[int]) -> list[str]:
    """Listening sockets (TCP) of these processes that are not on 127.0.0.1 (a JVM's
    IPv6 socket bound to it shows as ``[::ffff:127.0.0.1]``, the same address)."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    loopback = ("127.0.0.1:", "[::ffff:127.0.0.1]:")
    return [
        line
        for line in out.splitlines()
        if any(f"pid={p}," in line for p in pids) and not line.split()[3].startswith(loopback)
    ]


def listening_ports(pids: list[int]) -> set[int]:
    """TCP ports these processes listen on."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    return {
        int(line.split()[3].rsplit(":", 1)[1])
        for line in out.splitlines()
        if any(f"pid={p}," in line for p in pids)
    }


def deterministic_outputs(record: dict) -> dict:
    """What a run (its JSON record) must reproduce exactly, wherever and with whatever
    else it ran: routing, state, answers, migration, the oracle's verdict."""
    summary = record["summary"]
    return {
        "node_received": record["node_received"],
        "node_state": record["node_state"],
        "answers": record["answers"],
        "result_digest": record["result_digest"],
        "routing_table_entries_max": summary["routing_table_entries_max"],
        "migrated_tuples_total": summary["migrated_tuples_total"],
        "oracle_passed": summary["oracle_passed"],
    }
