#!/usr/bin/env bash
# Start/stop a Spark standalone cluster on this machine: one master and two workers of
# different sizes (a small heterogeneous cluster), using the spark-class launcher of the
# project's pyspark (the pip package has no start-master.sh).
#
#   infra/spark-standalone.sh start    # master spark://127.0.0.1:7077, UI :8090
#   infra/spark-standalone.sh status
#   infra/spark-standalone.sh stop     # stops exactly the processes it started (pid files)
#
# Settings (environment): SPARK_MASTER_HOST (127.0.0.1), SPARK_MASTER_PORT (7077),
# SPARK_MASTER_WEBUI_PORT (8090, off Airflow's 8080), WORKER_A="cores memory webui-port"
# ("1 1g 8091"), WORKER_B ("2 2g 8092"), STATE_DIR (.local/spark-standalone),
# SPARK_MASTER_REST (false: the master's REST submission API on :6066 runs whatever it is
# sent, without a login; set true only on a trusted machine).
# Run jobs with --master spark://127.0.0.1:7077 and an executor memory that fits the
# smallest worker (e.g. --executor-memory 768m).
set -euo pipefail
cd "$(dirname "$0")/.."
HOST=${SPARK_MASTER_HOST:-127.0.0.1}
PORT=${SPARK_MASTER_PORT:-7077}
UI_PORT=${SPARK_MASTER_WEBUI_PORT:-8090}
read -r A_CORES A_MEM A_UI <<<"${WORKER_A:-1 1g 8091}"
read -r B_CORES B_MEM B_UI <<<"${WORKER_B:-2 2g 8092}"
STATE=${STATE_DIR:-.local/spark-standalone}
SPARK_CLASS=${SPARK_CLASS:-.venv/bin/spark-class}
# spark-class finds SPARK_HOME through the python on PATH: make it the project's venv.
export PATH=$PWD/.venv/bin:$PATH
export SPARK_LOCAL_IP=$HOST
export SPARK_CONF_DIR=${SPARK_CONF_DIR:-$PWD/infra/spark-conf}
export SPARK_WORKER_DIR=$PWD/$STATE/work
case ${SPARK_MASTER_REST:-false} in
  true|false) ;;
  *) echo "SPARK_MASTER_REST: '${SPARK_MASTER_REST}' is not one of true, false" >&2; exit 2 ;;
esac
export SPARK_MASTER_OPTS="${SPARK_MASTER_OPTS:-} -Dspark.master.rest.enabled=${SPARK_MASTER_REST:-false}"
mkdir -p "$STATE" "$SPARK_WORKER_DIR"

launch() {  # name, args...: start in its own session so stop can kill the whole group
  local name=$1; shift
  setsid "$SPARK_CLASS" "$@" >"$STATE/$name.log" 2>&1 < /dev/null &
  echo $! >"$STATE/$name.pid"
}

alive_workers() {
  python3 - "$HOST" "$UI_PORT" <<'PY' 2>/dev/null || echo 0
import json, sys, urllib.request
with urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/json/", timeout=2) as r:
    print(json.load(r).get("aliveworkers", 0))
PY
}

start() {
  if [ -f "$STATE/master.pid" ] && kill -0 "$(cat "$STATE/master.pid")" 2>/dev/null; then
    echo "already running (master pid $(cat "$STATE/master.pid"))"; return 0
  fi
  launch master org.apache.spark.deploy.master.Master --host "$HOST" --port "$PORT" --webui-port "$UI_PORT"
  launch worker-a org.apache.spark.deploy.worker.Worker --host "$HOST" --cores "$A_CORES" \
    --memory "$A_MEM" --webui-port "$A_UI" "spark://$HOST:$PORT"
  launch worker-b org.apache.spark.deploy.worker.Worker --host "$HOST" --cores "$B_CORES" \
    --memory "$B_MEM" --webui-port "$B_UI" "spark://$HOST:$PORT"
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "$STATE/master.pid")" 2>/dev/null; then
      echo "master exited; see $STATE/master.log" >&2; stop; return 1
    fi
    if [ "$(alive_workers)" = "2" ]; then
      echo "spark://$HOST:$PORT up with 2 workers (UI http://$HOST:$UI_PORT)"; return 0
    fi
    sleep 0.5
  done
  echo "cluster did not come up in 60 s; logs in $STATE" >&2
  stop; return 1
}

stop() {
  local name pid
  for name in worker-b worker-a master; do
    [ -f "$STATE/$name.pid" ] || continue
    pid=$(cat "$STATE/$name.pid")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$STATE/$name.pid"
  done
  echo "stopped"
}

status() {
  local name
  for name in master worker-a worker-b; do
    if [ -f "$STATE/$name.pid" ] && kill -0 "$(cat "$STATE/$name.pid")" 2>/dev/null; then
      echo "$name: running (pid $(cat "$STATE/$name.pid"))"
    else
      echo "$name: stopped"
    fi
  done
  echo "alive workers: $(alive_workers)"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
