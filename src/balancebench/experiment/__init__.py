"""An experiment: what a run is and how it runs in one Spark application (``runs``), its
Params (``params``), the paired rounds and their verdicts (``rounds``, ``round_runs``),
the comparison, regression and report of their results, dataset validation, the paper
figures' specs, the cost-model check and the papers' model sweeps. It imports the layers
below it (``core``, ``state``, the strategies, generators and models, ``spark``), never
``orchestration``."""
