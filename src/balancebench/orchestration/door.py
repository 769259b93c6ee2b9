"""What every command checks before any work (the door): the Params, then what the machine
must provide (Java, a Spark master that is one, an MLflow store that can be read and
written, its experiment not deleted), and ``report``'s options. Anything bad ends the
command in one line, exit 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.markup import escape

from balancebench.core.schema import check_values, quoted, terminal_safe
from balancebench.experiment.params import EXPERIMENT_PARAMS
from balancebench.orchestration.local_env import check_java, check_master_answers
from balancebench.orchestration.terminal_report import console
from balancebench.state import tracking
from balancebench.state.environment import setting
from balancebench.state.store_door import check_store, run_facts

#: What a door check returns (the checked Params, in the shape the command needs).
T = TypeVar("T")


def at_the_door(check: Callable[[], T], spark_master: str | None, opens_store: bool = True) -> T:
    """``check()`` (the Params), then what the machine must provide: Java, a master URL
    that is a Spark master, and for a command that opens the MLflow store
    (``opens_store``) a store that can be read and written, its experiment not deleted
    (``store_door.check_store``). Anything bad exits 2 before any work, in one line. Then
    the store's runs left RUNNING by dead commands are closed (``tracking.reap_orphans``)."""
    try:
        params = check()
        check_java()
        check_master_answers(spark_master or setting("BALANCEBENCH_SPARK_MASTER"))
        if opens_store:
            experiment = params.get("experiment") if isinstance(params, dict) else None
            check_store(tracking.tracking_uri(), experiment)
    except ValueError as exc:
        console.print(f"[red]refused before any work:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    if opens_store:
        tracking.reap_orphans()
    return params


#: An MLflow run id: 32 hexadecimal digits.
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def report_door(experiment: str, parent: str | None, sweep: str | None) -> None:
    """``report``'s options, checked before MLflow is imported (its import and schema
    check cost seconds of CPU): the experiment's name by its Param's rule, each run id by
    its form, then, in the embedded store, that the runs exist, the sweep is a sweep and
    the experiment is not deleted. A bad one exits 2 in one line."""
    uri = tracking.tracking_uri()
    try:
        spec = {"experiment": EXPERIMENT_PARAMS["experiment"]}
        check_values(spec, {"experiment": experiment}, what="report options")
        for field, run_id in (("parent", parent), ("sweep", sweep)):
            if run_id is not None and not _RUN_ID.fullmatch(run_id):
                raise ValueError(
                    f"{field}: {quoted(run_id)} is not an MLflow run id; allowed: 32 "
                    "hexadecimal digits, as `balancebench run` prints them"
                )
        check_store(uri, experiment if parent is None and sweep is None else None, writes=False)
        for field, run_id in (("parent", parent), ("sweep", sweep)):
            facts = None if run_id is None else run_facts(uri, run_id)
            if run_id is not None and facts is None:
                raise ValueError(f"{field}: no run {quoted(run_id)} in {uri}")
            if field == "sweep" and facts is not None and facts[0] and facts[1] != "sweep":
                raise ValueError(f"sweep: run {run_id} is not a nightly_sweep parent run")
    except ValueError as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from None
