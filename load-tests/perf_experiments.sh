#!/usr/bin/env bash
# The docs/PERF.md load experiments, scaled to a 2-core CPU host (~15 min): capacity of one
# --kv-memory for 4K-token requests, full cache vs 10% budgets in chunk mode; a rate sweep of
# short requests; head-of-line blocking of short requests behind 8K prompts with and without
# --decode-share. Each server is started here on loopback and stopped after its runs; the
# results and report go to OUT. Needs the venv of setup-venv.sh active and a built kvserve.
# Usage: load-tests/perf_experiments.sh [BUILD=build] [OUT=perf-results] [capacity|sweep|hol ...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}; out=${2:-perf-results}; shift $(( $# > 2 ? 2 : $# ))
which=${*:-capacity sweep hol}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
threads=${THREADS:-2}
mkdir -p "$out"
server_pid=""

start_server() {  # flags...: starts kvserve serve, sets ADDR and MADDR
  rm -f "$out/ports"
  OMP_NUM_THREADS=$threads "$build/kvserve" serve --model "$model" --host 127.0.0.1 --port 0 \
    --metrics-host 127.0.0.1 --metrics-port 0 --port-file "$out/ports" --kv-dtype f16 "$@" \
    >>"$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do [ -s "$out/ports" ] && grep -q metrics "$out/ports" && break; sleep 0.2; done
  ADDR=127.0.0.1:$(sed -n 's/grpc=//p' "$out/ports"); MADDR=127.0.0.1:$(sed -n 's/metrics=//p' "$out/ports")
}
stop_server() { kill "$server_pid"; wait "$server_pid" || true; }
kvload() { python3 load-tests/kvload.py --addr "$ADDR" --metrics-addr "$MADDR" --save-result --result-dir "$out" "$@"; }

for exp in $which; do
  case $exp in
  capacity)  # 200M of f16 KV holds two 4K-token full caches; 10 arrive at once
    for cfg in full snapkv criticalkv mergereduce:random; do
      start_server --kv-memory 200M --prefill-chunk 256 --max-context 8192
      kv=(--kv-policy "$cfg"); [ "$cfg" = full ] || kv+=(--kv-budget 0.1 --compress-at chunk)
      kvload --label "capacity-${cfg/:/-}" --result-filename "capacity-${cfg/:/-}.json" --dataset long \
        --long-len 4096 --len-dist fixed --num-prompts 10 --output-len 16 "${kv[@]}" --metadata experiment=capacity
      stop_server
    done ;;
  sweep)
    start_server --kv-memory 1G --max-context 8192
    for rate in 1 2 4 8; do
      kvload --label sweep-kvserve --result-filename "sweep-$rate.json" --dataset short --input-len 128 \
        --output-len 32 --request-rate "$rate" --num-prompts 40 --goodput ttft:1000 tpot:100 --metadata experiment=sweep
    done
    stop_server ;;
  hol)  # short requests at 1 req/s; 2 of the 40 are 8K-token documents
    for share in 0 0.1; do
      start_server --kv-memory 1G --max-context 8192 --decode-share "$share"
      kvload --label "hol-decode-share-$share" --result-filename "hol-$share.json" --dataset bimodal \
        --long-len 8192 --len-dist fixed --long-fraction 0.05 --input-len 128 --output-len 32 \
        --request-rate 1 --num-prompts 40 --goodput ttft:1000 tpot:100 --metadata experiment=hol
      stop_server
    done ;;
  esac
done
python3 load-tests/report.py "$out"/*.json --out "$out/report"
