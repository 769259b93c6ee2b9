"""Where state lives and who may change it: settings (``environment``), the local folders
(``paths``), the MLflow store (``tracking``; checked at the door without MLflow,
``store_door``) and the service's MLflow app (``mlflow_app``),
and the reaper that closes what a dead owner left open. It imports only ``core``."""
