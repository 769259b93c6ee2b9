"""balancebench: load-balancing strategies of stream processing, run side by side.

The package is layered; a module imports only from its own layer and the layers below
it (``tests/test_layers.py`` fails on an import that points up). From the bottom:

1. ``core``: the vocabulary: operators, workloads, loads, the routing table, hashing,
   replay, Params schemas, units, statistics and the metric glossary.
2. ``state``: settings, paths, the MLflow store and its app, the reaper.
3. ``strategies``, ``generators``, ``models``, ``plotting``: the papers' strategies, the
   datasets, the papers' models and the figures' shared drawing.
4. ``spark``: the engine that runs a strategy on Spark.
5. ``experiment``: what a run is and how it runs, its Params, rounds, verdicts,
   comparisons, regressions and reports.
6. ``orchestration``: the CLI, the DAG steps, the sweep, the local environment.
"""

#: The layers, bottom first: each entry's modules and packages (under ``balancebench.``).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("state",),
    ("strategies", "generators", "models", "plotting"),
    ("spark",),
    ("experiment",),
    ("orchestration",),
)
