#!/usr/bin/env python3
"""The transformers peer of tests/kernels/cuda/run_checks.sh: a random Llama-3-8B-shaped model in
bf16 with sdpa attention, timed the way gpu_bench times kvserve (TTFT of one prompt of 8K and
32K tokens, then greedy decode tokens/s). With --kvserve FILE (gpu_bench --e2e-json) it also
prints kvserve / transformers ratios. Exits 0 with a line when torch/transformers/CUDA are absent."""
import argparse
import json
import os
import sys
import time

# Offline before transformers is imported (in main): the model is built from a config, and the
# GPU machine has no network to wait on.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Warm-up prompt: as long as the first measured one (8K), so allocator growth and kernel
# selection for an 8K prefill are not inside a measured TTFT (as gpu_bench's warm-up).
WARMUP_TOKENS = 8192


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvserve", help="gpu_bench --e2e-json output")
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except Exception as e:  # noqa: BLE001 - any import problem means "no peer"
        print(f"transformers peer skipped: cannot import torch/transformers ({e})")
        return 0
    if not torch.cuda.is_available():
        print("transformers peer skipped: torch sees no CUDA device")
        return 0
    # The shape of random:llama3-8b (engine/model/random_model.cc).
    cfg = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                      num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                      rope_theta=500000.0, rms_norm_eps=1e-5,
                      rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                      attn_implementation="sdpa")
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    results = {}
    for prompt in (8192, 32768):
        ids = torch.tensor([[(i * 7919 + 13) % cfg.vocab_size for i in range(prompt)]], device="cuda")
        with torch.inference_mode():
            model(ids[:, :WARMUP_TOKENS], use_cache=True, logits_to_keep=1)  # warm-up, shaped as the 8K run
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(ids, use_cache=True, logits_to_keep=1)
            nxt = out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            past = out.past_key_values
            for _ in range(args.new_tokens):
                out = model(nxt, past_key_values=past, use_cache=True)
                past = out.past_key_values
                nxt = out.logits[:, -1:].argmax(-1)
            torch.cuda.synchronize()
            t2 = time.perf_counter()
        k = prompt // 1024
        results[f"ttft_{k}k_s"] = t1 - t0
        results[f"decode_{k}k_tok_s"] = args.new_tokens / (t2 - t1)
        print(f"transformers+sdpa {k}K: TTFT {t1 - t0:.3f} s, decode {args.new_tokens / (t2 - t1):.1f} tok/s")
        del out, past
        torch.cuda.empty_cache()
    if args.kvserve:
        try:
            ours = json.load(open(args.kvserve))
        except Exception as e:  # noqa: BLE001
            print(f"no kvserve numbers to compare ({e})")
            return 0
        for k in (8, 32):
            t_ours, t_peer = ours.get(f"ttft_{k}k_s"), results[f"ttft_{k}k_s"]
            d_ours, d_peer = ours.get(f"decode_{k}k_tok_s"), results[f"decode_{k}k_tok_s"]
            if t_ours and d_ours:
                print(f"{k}K: TTFT kvserve/transformers = {t_ours / t_peer:.2f}x (target <= 1.5x at 32K); "
                      f"decode tok/s kvserve/transformers = {d_ours / d_peer:.2f}x (target > 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
