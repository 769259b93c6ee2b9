"""The service's MLflow server app (``mlflow server --app-name balancebench``): MLflow's own
``basic-auth`` app, plus one page, :data:`MODEL_TRAINING_PAGE`, which the service's banner
links to.

Why the page: MLflow 3.17's UI opens an experiment on its GenAI pages (traces, tokens,
cost: "No data available") unless the browser has chosen "Model training", a choice it
keeps in the browser's storage for its own origin (``mlflow.workflowType_v1``); a
``workflowType`` in the URL only lasts until the user clicks an experiment in the list.
Only a page served by the MLflow server itself can make that choice for the browser, as
the toggle in MLflow's header does. The page makes it, then opens the experiment list.
It is behind the same login as the rest of the server. Nothing else is changed.
"""

from __future__ import annotations

from typing import Any

from balancebench.state.tracking import MODEL_TRAINING_VIEW

MODEL_TRAINING_PAGE = "/balancebench/model-training"
#: The key and value MLflow's UI (3.17) keeps the user's workflow choice under.
WORKFLOW_STORAGE = ("mlflow.workflowType_v1", '"machine_learning"')

_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>balancebench: MLflow</title></head>
<body>
<p>Opening MLflow on its model-training pages...</p>
<script>
try {{ window.localStorage.setItem({key!r}, {value!r}); }} catch (e) {{}}
window.location.replace("/#/experiments?{view}");
</script>
<noscript><a href="/#/experiments?{view}">MLflow's experiments</a></noscript>
</body></html>
"""


def model_training_page() -> str:
    key, value = WORKFLOW_STORAGE
    return _HTML.format(key=key, value=value, view=MODEL_TRAINING_VIEW)


def create_app() -> Any:
    """The app factory ``mlflow server`` loads (entry point ``mlflow.app``,
    ``balancebench``): MLflow's Flask app with the page added, then wrapped by the
    ``basic-auth`` app (login on every route, the page's included)."""
    from flask import Response
    from mlflow.server import app
    from mlflow.server.auth import create_app as basic_auth_app

    app.add_url_rule(
        MODEL_TRAINING_PAGE,
        "balancebench_model_training",
        lambda: Response(model_training_page(), mimetype="text/html"),
    )
    return basic_auth_app(app)
