#!/usr/bin/env bash
# Start/stop an MLflow tracking server on 127.0.0.1 over the project's SQLite store, for
# when several writers log at once (parallel mapped tasks, a cluster's drivers). Point
# runs at it with MLFLOW_TRACKING_URI=http://127.0.0.1:5000.
#
#   infra/mlflow-server.sh start|stop|status
#
# Settings: MLFLOW_PORT (5000), STATE_DIR (.local/mlflow-server); the store is
# .local/mlflow/mlflow.db with artifacts in .local/mlflow/artifacts (as for local runs).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${MLFLOW_PORT:-5000}
STATE=${STATE_DIR:-.local/mlflow-server}
STORE=$PWD/.local/mlflow
mkdir -p "$STATE" "$STORE/artifacts"

start() {
  if [ -f "$STATE/server.pid" ] && kill -0 "$(cat "$STATE/server.pid")" 2>/dev/null; then
    echo "already running (pid $(cat "$STATE/server.pid"))"; return 0
  fi
  setsid .venv/bin/mlflow server --backend-store-uri "sqlite:///$STORE/mlflow.db" \
    --default-artifact-root "file://$STORE/artifacts" --host 127.0.0.1 --port "$PORT" \
    --workers 1 >"$STATE/server.log" 2>&1 < /dev/null &
  echo $! >"$STATE/server.pid"
  for _ in $(seq 1 120); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null; then
      echo "MLflow server on http://127.0.0.1:$PORT"; return 0
    fi
    sleep 0.5
  done
  echo "MLflow server did not answer in 60 s; see $STATE/server.log" >&2
  stop; return 1
}

stop() {
  [ -f "$STATE/server.pid" ] || { echo "not running"; return 0; }
  local pid; pid=$(cat "$STATE/server.pid")
  kill -TERM -- "-$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$STATE/server.pid"; echo "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) [ -f "$STATE/server.pid" ] && kill -0 "$(cat "$STATE/server.pid")" 2>/dev/null \
            && echo "running (pid $(cat "$STATE/server.pid"))" || echo "stopped" ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
