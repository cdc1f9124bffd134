#!/usr/bin/env bash
# CI check of deploy/ (called by scripts/test.sh after ctest; ~3-6 min on 2 cores):
#  1. files: yamllint, promtool check config/rules + test rules, generated files up to date,
#     kustomize (base, gpu) | kubernetes-validate --strict, dashboard names vs a live scrape;
#  2. image: the runtime image from the binaries in BUILD_DIR (no second compile) + the
#     Prometheus and nginx images (deploy/build-image.sh --prebuilt BUILD_DIR --stack);
#  3. stack: podman-compose --profile lb on random:tiny: generations through nginx reach both
#     replicas, Prometheus holds kvserve_ series from both, every dashboard query returns data,
#     the image's HEALTHCHECK passes. Torn down on exit.
# Usage: deploy/check.sh [BUILD_DIR=build]. KVSERVE_DEPLOY_CHECK=files stops after step 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-${BUILD_DIR:-$root/build}}" && pwd)
cd "$root/deploy"
step() { echo "== deploy/check: $* (${SECONDS}s)"; }
tmp=$(mktemp -d)
project=kvcheck$$
compose=()
cleanup() {
  if [ ${#compose[@]} -gt 0 ]; then
    [ -n "${failed:-}" ] && timeout 30 "${compose[@]}" logs > "$tmp/compose.log" 2>&1 && tail -40 "$tmp/compose.log"
    timeout 120 "${compose[@]}" down -t 5 >/dev/null 2>&1 || true
    podman network rm -f "${project}_default" >/dev/null 2>&1 || true   # down leaves it
  fi
  rm -rf "$tmp"
}
trap 'failed=1' ERR
trap cleanup EXIT

step "setup (apt packages, PyPI venv)"
venv_bin=$(./setup.sh)
export PATH=$venv_bin:$PATH CONTAINERS_CONF=$root/deploy/containers.conf
py=$venv_bin/python

step "files"
yamllint -c .yamllint .
promtool check config prometheus/prometheus.yml
promtool check rules prometheus/alerts.yml
(cd prometheus && promtool test rules alerts_test.yml)
python3 grafana/make_dashboard.py "$tmp/kvserve.json"
cmp grafana/kvserve.json "$tmp/kvserve.json" || { echo "grafana/kvserve.json is stale: run make_dashboard.py" >&2; exit 1; }
$py k8s/make_prometheusrule.py "$tmp/prometheusrule.yaml"
cmp k8s/base/prometheusrule.yaml "$tmp/prometheusrule.yaml" \
  || { echo "k8s/base/prometheusrule.yaml is stale: run make_prometheusrule.py" >&2; exit 1; }
command -v kubectl >/dev/null || echo "deploy/check: SKIPPED kustomize render: no kubectl (deploy/setup.sh installs it where apt has it)"
command -v kubectl >/dev/null && for overlay in base gpu; do
  kubectl kustomize "k8s/$overlay" > "$tmp/k8s-$overlay.yaml"
  # Core kinds against the Kubernetes schema; CRDs (ServiceMonitor, PrometheusRule) have
  # none there, their rules are checked by promtool above via alerts.yml.
  kubernetes-validate --strict --quiet "$tmp/k8s-$overlay.yaml"
done
[ ! -f "$tmp/k8s-gpu.yaml" ] || grep -q 'nvidia.com/gpu: 1' "$tmp/k8s-gpu.yaml"
for s in *.sh; do bash -n "$s"; done
# Names only against a scrape of the binary run directly (fast, no containers).
"$build/kvserve" serve --model random:tiny --host 127.0.0.1 --port 0 --metrics-host 127.0.0.1 \
  --metrics-port 0 --http-port 0 --port-file "$tmp/ports" > "$tmp/direct.log" 2>&1 &
direct=$!
for _ in $(seq 100); do grep -q metrics= "$tmp/ports" 2>/dev/null && break; sleep 0.2; done
grpc_port=$(sed -n 's/grpc=//p' "$tmp/ports"); metrics_port=$(sed -n 's/metrics=//p' "$tmp/ports")
"$build/kvctl" health --addr "127.0.0.1:$grpc_port" --wait 60 >/dev/null
"$build/kvctl" generate --addr "127.0.0.1:$grpc_port" --prompt "names" --max-new-tokens 2 >/dev/null
curl -sf "http://127.0.0.1:$metrics_port/metrics" > "$tmp/direct.txt"
[ "$(curl -sf "http://127.0.0.1:$metrics_port/ready")" = ready ]   # HTTP probes beside /metrics
http_port=$(sed -n 's/http=//p' "$tmp/ports")
curl -sf "http://127.0.0.1:$http_port/v1/models" | grep -q '"object": *"list"'
"$build/kvctl" top --metrics "127.0.0.1:$metrics_port" --count 1 | grep -q '^KV pages'
kill "$direct"; wait "$direct" || true
python3 grafana/check_dashboard.py grafana/kvserve.json --scrape "$tmp/direct.txt"
[ "${KVSERVE_DEPLOY_CHECK:-all}" = files ] && { step "files only: done"; exit 0; }

step "images"
./build-image.sh --prebuilt "$build" --stack

step "compose stack (profile lb, random:tiny)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export KVSERVE_MODEL=random:tiny KVSERVE_KV_MEMORY=256M
export KVSERVE_GRPC_PORT=$(free_port) KVSERVE_METRICS_PORT=$(free_port) PROMETHEUS_PORT=$(free_port) LB_PORT=$(free_port)
export KVSERVE_HTTP_PORT=$(free_port)
compose=(podman-compose -p "$project" -f compose.yaml --profile lb)
timeout 300 "${compose[@]}" up -d > "$tmp/up.log" 2>&1 || { cat "$tmp/up.log"; exit 1; }
prom=http://127.0.0.1:$PROMETHEUS_PORT
promq() { curl -sf "$prom/api/v1/query" --data-urlencode "query=$1" | python3 -c \
  'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'; }
# Ready when Prometheus sees both replicas with a loaded engine.
for i in $(seq 90); do
  [ "$(promq 'count(kvserve_kv_pages_total)' 2>/dev/null)" = 2 ] && break
  [ "$i" = 90 ] && { echo "replicas never both ready" >&2; exit 1; }
  sleep 2
done
lb=127.0.0.1:$LB_PORT
"$build/kvctl" health --addr "$lb" --wait 60 >/dev/null
for i in $(seq 6); do
  "$build/kvctl" generate --addr "$lb" --prompt "request $i to the load balancer" --max-new-tokens 8 \
    --kv-policy snapkv --kv-budget 4 >/dev/null &
  "$build/kvctl" generate --addr "$lb" --stream --prompt "stream $i" --max-new-tokens 8 >/dev/null &
  wait
done
sleep 12  # two scrapes after the last request
for r in kvserve kvserve-2; do
  n=$(promq "sum(kvserve_request_success_total{replica=\"$r\"})")
  echo "deploy/check: replica $r finished ${n:-0} requests (through nginx)"
  [ -n "$n" ] && [ "${n%.*}" -gt 0 ]
done
echo "deploy/check: Prometheus holds $(promq 'count({__name__=~"kvserve_.+"})') kvserve_ series"
curl -sf "http://127.0.0.1:$KVSERVE_METRICS_PORT/metrics" > "$tmp/stack.txt"
python3 grafana/check_dashboard.py grafana/kvserve.json --scrape "$tmp/stack.txt" --prometheus "$prom"
podman healthcheck run "${project}_kvserve_1"
# The OpenAI-compatible HTTP API from outside the container.
curl -sf "http://127.0.0.1:$KVSERVE_HTTP_PORT/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": "deploy check", "max_tokens": 2}' | grep -q '"text_completion"'
step "ok"
