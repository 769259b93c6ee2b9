"""``balancebench`` command line (typer + rich).

balancebench run [--conf JSON] [--spark-master URL]   # what `make run` calls
balancebench report [--experiment NAME] [--parent RUN_ID] [--sweep RUN_ID]
balancebench datasets ; balancebench generate DATASET --set NAME=VALUE ...
balancebench validate DATASET_DIR ; balancebench strategies
balancebench airflow ARGS...                           # airflow with the embedded env
balancebench models ; balancebench run-model [--conf JSON]   # papers 001-004 model sweeps
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from balancebench.core.schema import check_values, parse_json_object, quoted, terminal_safe
from balancebench.experiment.cost_model_check import DEFAULT_MASTER as CHECK_MODEL_MASTER
from balancebench.experiment.paper000_figures import FIGURES
from balancebench.experiment.params import (
    EXPERIMENT_PARAMS,
    ExperimentSpec,
    check_inputs,
    defaults,
)
from balancebench.orchestration.dag_runner import dags_test, failed, own_parent, run_airflow
from balancebench.orchestration.door import at_the_door, report_door
from balancebench.orchestration.local_env import (
    check_spark_master,
)
from balancebench.orchestration.terminal_report import console, run_report, sweep_report
from balancebench.state import tracking
from balancebench.state.environment import SettingError, check_environment
from balancebench.state.paths import (
    datasets_dir,
    results_dir,
    storage_error,
    validation_dir,
)
from balancebench.state.store_door import store_fault_line

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="balancebench: load-balancing strategies of stream processing, compared side by "
    "side in paired rounds (run, report, sweep, figure, run-model, generate, validate)",
)
DAG_ID = "balance_experiment"
SWEEP_DAG_ID = "nightly_sweep"
_DEFAULTS = defaults()


def _command(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``app.command`` that first checks the settings read from the environment (a bad
    ``BALANCEBENCH_*`` value: one line naming it, exit 2, before any work), and whose
    storage faults (full disk, read-only ``.local``, a file where
    a folder should be) end in one line naming the path, exit 1, no traceback. A command
    that opens the MLflow store first closes what dead commands left behind
    (``tracking.reap_orphans``): after its inputs pass :func:`at_the_door`, so that a
    refused input costs no MLflow import and no store."""

    def register(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        def guarded(*a: Any, **k: Any) -> Any:
            try:
                check_environment()
            except SettingError as exc:
                console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
                raise typer.Exit(2) from None
            try:
                return fn(*a, **k)
            except OSError as exc:
                line = storage_error(exc)
                if line is None:
                    raise
                console.print(terminal_safe(line), style="red", markup=False, highlight=False)
                raise typer.Exit(1) from None
            except Exception as exc:  # the store's own faults: one line, no traceback
                line = store_fault_line(exc, tracking.tracking_uri())
                if line is None:
                    raise
                console.print(terminal_safe(line), style="red", markup=False, highlight=False)
                raise typer.Exit(1) from None

        return app.command(*args, **kwargs)(guarded)

    return register


@_command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def airflow(ctx: typer.Context) -> None:
    """Run ``airflow`` with the embedded environment (``.local/airflow``, SQLite)."""
    raise typer.Exit(run_airflow(list(ctx.args)))


@_command()
def run(
    conf: str = typer.Option("{}", help="DAG Params as JSON, e.g. '{\"zipf_s\": 1.2}'"),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the DAG once with ``airflow dags test`` and print the comparison."""

    def check() -> dict:
        # Refused here before Airflow starts; the DAG's generate step is the door of the
        # run itself (a trigger from the UI passes only there).
        params = ExperimentSpec.checked(parse_json_object(conf, "CONF")).to_json()
        check_inputs(params)
        return params

    params = at_the_door(check, spark_master)
    code, log, invocation = dags_test(DAG_ID, params, spark_master)
    # The parent run this command opened: never another run's table.
    parent = own_parent(params["experiment"], invocation, "parent", log)
    shown = run_report(params["experiment"], parent) if parent else False
    if code != 0 or not shown:
        what = f"parent run {parent}" if parent else "no parent run was opened"
        failed("DAG run failed", what, log)


#: ``local-cluster[executors,cores,MiB]``: Spark starts the executors for the application
#: and stops them with it (the check's default master).
_LOCAL_CLUSTER = re.compile(
    r"local-cluster\[(?P<n>[1-9][0-9]?),(?P<cores>[1-9]),(?P<mb>[0-9]{3,5})\]"
)


def _check_model_master(master: str) -> int:
    """The cores the check's master gives its nodes (``local-cluster``'s executors x
    cores; a ``spark://`` cluster's are asked of Spark later: 0), or ValueError."""
    found = _LOCAL_CLUSTER.fullmatch(master or "")
    if found:
        return int(found["n"]) * int(found["cores"])
    if master.startswith("spark://"):
        check_spark_master(master)
        return 0
    raise ValueError(
        f"spark_master: {quoted(master)} is not allowed here; allowed: local-cluster[E,C,MiB] "
        "(E executors of C cores, each its own JVM) or spark://host:port: the nodes need "
        "cores of their own, which local[N] shares"
    )


@_command()
def check_model(
    conf: str = typer.Option(
        "{}", help="Params as JSON over the check's (2 nodes, 2 senders, hash/qmmp/mnrt)"
    ),
    spark_master: str = typer.Option(
        CHECK_MODEL_MASTER,
        help="local-cluster[E,C,MiB] or spark://host:7077; n_nodes = n_senders = its cores",
    ),
    rounds: int = typer.Option(3, min=2, max=20, help="rotated rounds of the strategies"),
) -> None:
    """The cost model against nodes on executors of their own: per batch, the model's
    charge (routing per sender, the slowest node's CPU) against the same stages' CPU on the
    executors that ran them; against their wall time too where every executor has a core
    of its own and the driver one more."""
    from balancebench.experiment.cost_model_check import (
        CHECK_DEFAULTS,
        cores_for,
        report,
        run_check,
    )
    from balancebench.spark.session import get_session

    def check() -> ExperimentSpec:
        cores = _check_model_master(spark_master)
        values = {**CHECK_DEFAULTS, **parse_json_object(conf, "CONF")}
        if cores and (values["n_nodes"] != cores or values["n_senders"] != cores):
            raise ValueError(
                f"n_nodes, n_senders: {values['n_nodes']}, {values['n_senders']} on a master "
                f"of {cores} cores; allowed: both {cores} (one core per node and sender)"
            )
        params = ExperimentSpec.checked(values)
        check_inputs(params.to_json())
        return params

    params = at_the_door(check, None, opens_store=False)
    mb = _LOCAL_CLUSTER.fullmatch(spark_master)
    conf_extra = {"spark.executor.memory": f"{int(mb['mb']) * 3 // 4}m"} if mb else {}
    spark = get_session("balancebench-check-model", spark_master, conf_extra)
    try:
        checks = run_check(spark, params, rounds)
        cores = cores_for(spark, spark_master)
    finally:
        spark.stop()
    for line in report(checks, params.strategies[0], cores):
        console.print(line, markup=False, highlight=False)


@_command()
def figure(
    key: str = typer.Argument(..., help=f"paper 000 figure: {', '.join(sorted(FIGURES))}"),
    conf: str = typer.Option(
        "{}", help='other sweep Params as JSON, e.g. \'{"min_rounds": 2, "max_rounds": 2}\''
    ),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run one of paper 000's experiments (``nightly_sweep`` with the Param ``figure``)
    and print its summary, figure and report page."""

    def values() -> dict:
        given = parse_json_object(conf, "CONF")
        if "figure" in given and given["figure"] != key:
            raise ValueError(
                f"figure: given twice, as the argument {quoted(key)} and in CONF as "
                f"{quoted(str(given['figure']))}; give it once (the argument)"
            )
        return {**given, "figure": key}

    _run_sweep(values, spark_master, f"figure {key}")


@_command()
def sweep(
    conf: str = typer.Option(
        "{}", help='sweep Params as JSON, e.g. \'{"grid_zipf_s": "1.0", "max_rounds": 8}\''
    ),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the ``nightly_sweep`` DAG once now (its grid from the Params, as the nightly
    schedule would) and print its summary and report page; the progress lines say which
    application and run is measuring, with the time left."""
    _run_sweep(lambda: parse_json_object(conf, "CONF"), spark_master, "sweep")


def _run_sweep(values: Callable[[], dict], spark_master: str | None, what: str) -> None:
    """The sweep DAG once on the Params ``values()`` gives: read at the door, so a CONF
    that is no JSON object is refused like any bad Param (exit 2, no traceback)."""
    from balancebench.orchestration.sweep_grid import NO_FIGURE, validate_sweep_params

    params = at_the_door(lambda: validate_sweep_params(values()), spark_master)
    code, log, invocation = dags_test(SWEEP_DAG_ID, params, spark_master)
    parent = own_parent(params["experiment"], invocation, "sweep", log)
    shown = sweep_report(parent) if parent else False
    drawn = tracking.store().get_run(parent).data.tags.get("figure_path") if parent else None
    if drawn:
        print(f"paper figure: {drawn} (table: {Path(drawn).with_suffix('.csv')})")
    wanted_figure = params.get("figure", NO_FIGURE) != NO_FIGURE
    if code != 0 or not shown or (wanted_figure and not drawn):
        done = f"sweep run {parent}" if parent else "no sweep run was opened"
        failed(f"{escape(what)} failed", done, log)


@_command()
def report(
    experiment: str = typer.Option("balancebench", help="MLflow experiment"),
    parent: str = typer.Option(None, help="Parent run id (default: the latest)"),
    sweep: str = typer.Option(None, help="A nightly_sweep parent run id: its report page"),
) -> bool:
    """Print the comparison table of a DAG run and where its results are. Exit 1 when the
    run did not finish with a table (its state and reason are printed)."""
    report_door(experiment, parent, sweep)
    tracking.reap_orphans()
    shown = sweep_report(sweep) if sweep is not None else run_report(experiment, parent)
    if not shown:
        raise typer.Exit(1)
    return shown


@_command()
def strategies() -> None:
    """List the strategies, what they implement, and their own Params."""
    from balancebench.core.operators import names
    from balancebench.strategies import STRATEGIES, strategy_param_name

    table = Table(title="strategies (select with CONF '{\"strategies\": [...]}')")
    for col in ("name", "implements", "operators", "Params (default)"):
        table.add_column(col)
    for name, cls in STRATEGIES.items():
        params = ", ".join(
            f"{strategy_param_name(name, p)}={spec['default']}"
            for p, spec in cls.param_schema.items()
        )
        table.add_row(name, cls.reference, ", ".join(names(cls.operators)), params or "-")
    console.print(table)


def _parse_settings(pairs: list[str]) -> dict[str, object]:
    """``["n_tuples=1000", "zipf_s=1.2"]`` -> values (JSON where it parses, else text)."""
    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set: expected NAME=VALUE, got {quoted(pair)}")
        if name in out:
            raise ValueError(f"--set: {quoted(name)} is given twice; give each Param once")
        try:
            out[name] = parse_json_object(f'{{"v": {text}}}', "--set")["v"] if text else text
        except ValueError:
            out[name] = text
    return out


@_command()
def generate(
    dataset: str = typer.Argument("zipf_stream", help="Generator (see `balancebench datasets`)"),
    set_: list[str] = typer.Option([], "--set", help="A dataset Param, NAME=VALUE (repeatable)"),
    out: Path = typer.Option(None, help="Root folder (default .local/datasets)"),
    validate_too: bool = typer.Option(True, "--validate/--no-validate", help="Run the GX suites"),
) -> None:
    """Write a dataset (Parquet + manifest), print its folder, and validate it. A cached
    one is reused only when its files prove to be the ones its manifest lists, every
    byte (sha256)."""
    from balancebench.generators import generate as generate_dataset

    root = out or datasets_dir()
    try:
        folder, manifest = generate_dataset(dataset, root, _parse_settings(set_))
    except OSError as exc:
        if exc.filename is None and storage_error(exc):  # Arrow's writes name no file
            raise OSError(exc.errno, exc.strerror, str(root)) from exc
        if not isinstance(exc, FileNotFoundError):
            raise
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    rows = ", ".join(f"{t} {f['rows']}" for t, f in manifest.tables.items())
    print(f"{folder}  rows: {rows}  {manifest.digest}  ({manifest.generate_s:.1f} s)")
    if validate_too:
        validate(folder, zipf_fit_tolerance=_DEFAULTS["zipf_fit_tolerance"])


@_command()
def datasets() -> None:
    """List the dataset generators and their Params."""
    from balancebench.generators import DATASET_PARAMS, GENERATORS

    table = Table(title="datasets (generate with `balancebench generate NAME --set P=V`)")
    for col in ("name", "kind", "what", "Params (default)"):
        table.add_column(col)
    for name, gen in GENERATORS.items():
        params = ", ".join(f"{p}={DATASET_PARAMS[p]['default']}" for p in gen.params)
        table.add_row(name, gen.kind, f"{gen.description} [{gen.reference}]", params)
    console.print(table)


@_command()
def validate(
    dataset_dir: Path = typer.Argument(
        ..., help="a dataset's folder (under .local/datasets/<generator>/<id>)"
    ),
    zipf_fit_tolerance: float = typer.Option(
        _DEFAULTS["zipf_fit_tolerance"],
        help="how far the exponent fitted from the data may be from the requested zipf_s, "
        "beyond the sampling band (the Param zipf_fit_tolerance, 0 to 5)",
    ),
) -> None:
    """Run the dataset's Great Expectations suites."""
    from balancebench.experiment.validation import validate_dataset

    try:  # the Param's own rule, before any work (a negative tolerance ran GX before)
        check_values(
            {"zipf_fit_tolerance": EXPERIMENT_PARAMS["zipf_fit_tolerance"]},
            {"zipf_fit_tolerance": zipf_fit_tolerance},
            what="option",
        )
    except ValueError as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    try:
        report_ = validate_dataset(
            dataset_dir,
            validation_dir() / f"{dataset_dir.name}.json",
            {"zipf_fit_tolerance": zipf_fit_tolerance},
        )
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    console.print(report_.message(), markup=False)
    raise typer.Exit(0 if report_.success else 1)


@_command()
def models() -> None:
    """List the paper 001-004 models, their strategies and Params."""
    from balancebench.experiment.model_sweep import model_param_name
    from balancebench.models import MODELS, get_model

    table = Table(title="models (run with `balancebench run-model --conf '{\"model\": ...}'`)")
    for col in ("model", "implements", "strategies", "dataset", "Params (default)"):
        table.add_column(col)
    for name in MODELS:
        model = get_model(name)
        params = ", ".join(
            f"{model_param_name(name, p)}={spec['default']}"
            for p, spec in model.param_schema.items()
        )
        table.add_row(name, model.reference, ", ".join(model.strategies), model.dataset, params)
    console.print(table)


@_command("run-model")
def run_model(
    conf: str = typer.Option("{}", help='Params as JSON, e.g. \'{"model": "overlay"}\''),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the ``model_experiment`` DAG once with ``airflow dags test``; print the summary."""
    from balancebench.experiment.model_sweep import validate_model_params

    params = at_the_door(
        lambda: validate_model_params(parse_json_object(conf, "CONF")), spark_master
    )
    code, log, invocation = dags_test("model_experiment", params, spark_master)
    parent = own_parent(params["experiment"], invocation, "parent", log)
    if parent is None:
        failed("DAG run failed", "no parent run was opened", log)
    parent_run = tracking.store().get_run(parent)
    status = parent_run.info.status
    summary = results_dir() / parent / "model_summary.csv"
    if summary.exists():
        import pandas as pd

        frame = pd.read_csv(summary)
        from balancebench.experiment.model_sweep import REPETITION_SUFFIXES

        keep = [c for c in frame.columns if c != "run_id" and not c.endswith(REPETITION_SUFFIXES)]
        varied = [c for c in keep if c in {k.split("_", 1)[1] for k in params["grid"]}]
        frame = frame[keep]
        frame.index = [" ".join(str(v) for v in row) for row in frame[["strategy", *varied]].values]
        # Metrics as rows, (strategy, point) as columns: fits a terminal for any model.
        print(frame.drop(columns=["strategy", *varied]).T.to_string(float_format="{:.4g}".format))
    print(f"results:      {results_dir() / parent}/ (model_summary.csv, {params['model']}.png)")
    print(f"MLflow store: {tracking.tracking_uri()}  (experiment {params['experiment']!r})")
    print("\n".join(tracking.how_to_open(parent_run.info.experiment_id, parent)))
    if code != 0 or status != "FINISHED":
        console.print(f"[red]DAG run failed[/red]; see {log}")
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
