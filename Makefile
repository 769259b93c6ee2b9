# balancebench: `make run` sets up and runs the main job; `make test` sets up and tests.
SHELL := /bin/bash
PYTHON ?= python3.11
UV_VERSION := 0.13.9
BOOT := .local/bootstrap
UV := $(BOOT)/bin/uv
UV_RUN := $(UV) run --frozen
CONF ?= {}
SPARK_MASTER ?=

# User values reach commands as environment variables, never spliced into shell text.
export CONF SPARK_MASTER

.PHONY: test-faults setup run test test-fast lint bench record-times bench-engine bench-costs crossover bench-sweep paper-figures clean \
	airflow airflow-stop airflow-status browser check-model docs docs-serve

$(UV):
	$(PYTHON) -m venv $(BOOT)
	$(BOOT)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# The locked environment (.venv) from uv.lock, its modules compiled to bytecode, and the
# JVM router of pkg & co. compiled with the JDK's javac (src/balancebench/spark/jvm;
# without javac they route in Python); fast when nothing changed. Bytecode at install:
# where PYTHONDONTWRITEBYTECODE is set (as on this machine), Python would otherwise
# compile every module it imports, every time (a DAG file took 7.5 s of CPU, 1.9 s with).
# Last, the Spark driver JVMs' class archive (src/balancebench/orchestration/class_archive.py):
# about a minute once, then each spark-submit's JVM starts on about half the CPU.
setup: $(UV)
	$(UV) sync --frozen --compile-bytecode
	$(UV_RUN) python -m balancebench.spark.jvm_routing build
	$(UV_RUN) python -m balancebench.orchestration.class_archive build

run: setup
	$(UV_RUN) balancebench run --conf "$$CONF" $(if $(SPARK_MASTER),--spark-master "$$SPARK_MASTER")

# The local Airflow 3 service (UI + scheduler, LocalExecutor) and an MLflow server, all on
# 127.0.0.1 with logins (infra/service.py); SPARK_MASTER applies to its tasks.
airflow: setup
	$(UV_RUN) python infra/service.py start

airflow-stop:
	$(UV_RUN) python infra/service.py stop

airflow-status:
	$(UV_RUN) python infra/service.py status

# The headless browser the report-page test drives (Debian's chromium), once per machine.
browser:
	@command -v chromium >/dev/null || { apt-get install -y --no-install-recommends chromium \
		|| { apt-get update && apt-get install -y --no-install-recommends chromium; }; }

# Three workers, one test file each at a time: most of the suite waits on JVM starts,
# Airflow and spark-submit (measured: 10 CPU-minutes in 27 wall-minutes on one worker).
# The standalone cluster's file runs here whole, its lost-executor fault too: the cluster
# starts once per CI run.
# Files go out in tests/conftest.py's order (the longest first), not xdist's (most tests
# first, which left the long end-to-end files, few tests each, for the end).
test: setup browser
	$(UV_RUN) ruff check .
	$(UV_RUN) pytest -n 3 --dist loadfile --no-loadscope-reorder -m "cluster or not (faults or service)"

# Fault injection (SIGTERM, SIGKILL, full and read-only disks, a killed JVM) and the
# Airflow service's tests (PostgreSQL, REST API, browser, the service's own faults): the
# long-running services start here, once; .ci/run runs it after `make test`. Four files
# on four workers, one each. What bounds it is the machine's two cores, shared by all four
# (`uv run python benchmarks/cpu_by_worker.py -- make test-faults` prints whose CPU): on
# 2026-11-29 it took 24 minutes with the standalone-cluster file as a fifth (now in
# `make test`, which had the room) and the service faults on 120,000 tuples a run.
# Their Spark JVMs JIT-compile with C1 only: the runs are tiny and short, and C2's
# compiling was half of a run's JVM CPU (a 40,000-tuple run's JVM on 2026-11-29: 67 and 69
# core-seconds by default, 36 with C1 only, 35 and 38 with the serial collector added;
# benchmarks/cpu_by_worker.py around balancebench run). These tests check behaviour,
# never a timing; `make run`, the benchmarks and `make test` keep the JVM's default.
TEST_FAULTS_JVM_OPTIONS = -XX:TieredStopAtLevel=1
test-faults: setup browser
	SPARK_SUBMIT_OPTS="$(TEST_FAULTS_JVM_OPTIONS) $$SPARK_SUBMIT_OPTS" $(UV_RUN) pytest -n 4 --dist loadfile --no-loadscope-reorder -m "(faults or service) and not cluster"

# The documentation site (Sphinx + MyST, docs/), built strictly: a warning or a broken link
# or anchor fails it; the reference pages are generated from the code on every build.
docs: setup
	$(UV_RUN) sphinx-build -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html, or run make docs-serve"

# The built site on http://127.0.0.1:$${DOCS_PORT:-8000} (loopback only; Ctrl-C stops it).
DOCS_PORT ?= 8000
export DOCS_PORT
docs-serve: docs
	$(UV_RUN) python -m http.server "$$DOCS_PORT" --bind 127.0.0.1 --directory docs/_build/html

# Unit tests only (no Spark, Airflow or cluster).
test-fast: setup
	$(UV_RUN) pytest -m "not slow"

# Speed figures (not part of the tests; each script takes --help). The ones the docs quote
# are recorded under docs/data by benchmarks/record.py (written only when the script
# succeeds); then `uv run python benchmarks/readme_readings.py --write`. About 15 minutes.
RECORD = $(UV_RUN) python benchmarks/record.py
bench: setup
	$(RECORD) docs/data/plan_time.txt -- python benchmarks/plan_time.py
	$(RECORD) docs/data/model_speed.txt -- python benchmarks/model_speed.py
	$(RECORD) docs/data/split_lookup.txt -- python benchmarks/split_lookup.py
	$(RECORD) docs/data/load_speed.txt -- python benchmarks/load_speed.py
	$(RECORD) docs/data/footprint.txt -- python benchmarks/footprint.py
	$(RECORD) docs/data/check_model.txt -- balancebench check-model --rounds 4
	$(UV_RUN) python benchmarks/generate.py
	$(UV_RUN) python benchmarks/routing_overhead.py

# The times the docs give for the two commands and the fault tests, recorded as they ran
# (each about as long as the command itself; then readme_readings.py --write).
record-times: setup
	$(RECORD) docs/data/make_run.txt -- $(MAKE) --no-print-directory run
	$(RECORD) docs/data/make_test.txt -- $(MAKE) --no-print-directory test
	$(RECORD) docs/data/make_test_faults.txt -- python benchmarks/cpu_by_worker.py -- \
		$(MAKE) --no-print-directory test-faults

# The engine against Spark's stateful operator (issue 12, targets 4a-c): about 11 minutes.
bench-engine: setup
	$(UV_RUN) python benchmarks/engine_vs_streaming.py --sf 0.05

# What the engine charges per unit of work (issue 26's targets: routing, fixed, per-tuple,
# signal, migration), printed side by side with verdicts: about 20 minutes; the routing
# tables (issue 59) in a record of their own, about 8 minutes.
bench-costs: setup
	$(RECORD) docs/data/bench_costs.txt -- python benchmarks/engine_costs.py --sections \
		coverage routing fixed per_tuple signal noise migration
	$(RECORD) docs/data/bench_tables.txt -- python benchmarks/engine_costs.py --sections tables

# The cost model against nodes that really run side by side (issue 44): a cell on
# local-cluster[2,1,2048] (2 executors of 1 core; SPARK_MASTER=spark://... on a cluster,
# n_nodes = n_senders = its cores via CONF), model charge against measured stage wall.
check-model: setup
	$(UV_RUN) balancebench check-model --conf "$$CONF" $(if $(SPARK_MASTER),--spark-master "$$SPARK_MASTER")

# From which load per node balancing pays (issue 26): capacity and p99 against tuples per
# node and batch -> docs/figures/crossover.png; about an hour (--resume after a stop).
crossover: setup
	$(UV_RUN) python benchmarks/crossover.py

# The skew sweep of issue 5 (every strategy, 5 skews, topk and eq5): about an hour here.
bench-sweep: setup
	$(UV_RUN) python benchmarks/skew_sweep.py

# Every paper's figure -> docs/figures/: paper 000's through the nightly sweep (hours),
# papers 001-004 under the models (DAG runs), paper 001 Figs. 6-7 on the engine.
paper-figures: setup
	$(UV_RUN) python benchmarks/paper_figures.py

lint: setup
	$(UV_RUN) ruff check .
	$(UV_RUN) ruff format --check .

clean:
	rm -rf .local/airflow .local/mlflow .local/datasets .local/results .local/validation .local/logs
