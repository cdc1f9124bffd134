#!/bin/sh
# Image entrypoint: `kvserve serve` with the arguments given, plus --model $KVSERVE_MODEL
# (default: the model in the image) when they name none, so `podman run IMAGE --kv-memory 2G`
# keeps the default model instead of failing on a missing --model.
for a in "$@"; do
  case "$a" in --model|--model=*) exec kvserve serve "$@" ;; esac
done
exec kvserve serve --model "${KVSERVE_MODEL:-/models/SmolLM2-135M-Instruct.Q4_1.gguf}" "$@"
