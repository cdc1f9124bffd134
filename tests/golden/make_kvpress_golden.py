#!/usr/bin/env python3
"""Makes tests/golden/kvpress/selection_smollm2.json: the KV-cache entries that NVIDIA's kvpress
keeps (SnapKV, CriticalKV over SnapKV) on models/SmolLM2-135M-Instruct.Q4_1.gguf.

The contract is the token ids stored in the JSON (not the text): both sides prefill exactly those
ids (no chat template, no BOS: the GGUF says tokenizer.ggml.add_bos_token = false). For every
case, kept[layer][kv_head] is the ascending list of prompt positions whose K/V rows kvpress left
in the cache after the prefill.

How the indices are found: the prompt is prefilled once without a press (DynamicCache) to get the
full post-RoPE keys of every layer, then once per (press, ratio) inside `with press(model):`; each
row of the compressed cache is mapped back to the position of the identical row of the full keys
(the match distance must be 0). As a second witness, the presses' own score() outputs are captured
and their top-n_kept set must equal the matched set.

The model is loaded by transformers' GGUF loader (dequantised to float32, eager attention). Note
the loader reverse-permutes the q/k projection rows from llama.cpp's interleaved-RoPE layout to
HF's rotate_half layout; q.k dot products, and so every selection, are the same in both layouts.

Run (a venv outside the repo; versions used for the committed file):
    python3 -m venv /opt/kvpress-venv
    /opt/kvpress-venv/bin/pip install kvpress==0.5.5 torch gguf
        # resolved to torch 2.15.0, transformers 5.2.0 (kvpress pins <5.3), gguf 0.19.0, numpy 2.4.6
    /opt/kvpress-venv/bin/python tests/golden/make_kvpress_golden.py
Options: --dump FILE.npz also writes the full per-layer tensors (post-RoPE queries/keys, values,
o_proj weights, kvpress scores) for tests/golden/check_kvpress_summary.py (numpy only).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

import kvpress
from kvpress import CriticalKVPress, SnapKVPress
from kvpress.utils import compute_n_kept

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(REPO, "models")
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
OUT = os.path.join(HERE, "kvpress", "selection_smollm2.json")

WINDOW_SIZE = 64
KERNEL_SIZE = 5
EPSILON = 1e-4
FIRST_STAGE_RATIO = 0.5
RATIOS = [0.5, 0.8]

# (name, licence file, text that starts the excerpt, target token count). The excerpt runs from
# the start marker to the end of the first line at which the token count reaches the target.
PROMPTS = [
    ("gpl3_preamble", "/usr/share/common-licenses/GPL-3", "  The GNU General Public License is a free", 600),
    ("apache2_terms", "/usr/share/common-licenses/Apache-2.0", "   1. Definitions.", 1500),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_prompt(tok, path, marker, target):
    data = open(path, "rb").read()
    start = data.index(marker.encode())
    end = start
    while True:
        nl = data.index(b"\n", end) + 1
        end = nl
        ids = tok.encode(data[start:end].decode("utf-8"), add_special_tokens=False)
        if len(ids) >= target:
            return start, end, ids


def make_presses(ratio):
    snap = SnapKVPress(compression_ratio=ratio, window_size=WINDOW_SIZE, kernel_size=KERNEL_SIZE)
    crit = CriticalKVPress(press=SnapKVPress(compression_ratio=ratio, window_size=WINDOW_SIZE,
                                             kernel_size=KERNEL_SIZE),
                           epsilon=EPSILON, first_stage_ratio=FIRST_STAGE_RATIO)
    return [("snapkv", snap), ("criticalkv", crit)]


def full_prefill(model, ids):
    """Prefill without a press; returns the cache, logits and per-layer post-RoPE queries."""
    queries = {}
    hooks = []
    for layer in model.model.layers:
        attn = layer.self_attn

        def pre_hook(module, args, kwargs):
            h = kwargs["hidden_states"]
            cos, sin = kwargs["position_embeddings"]
            q = module.q_proj(h).view(*h.shape[:-1], -1, module.head_dim).transpose(1, 2)
            k = module.k_proj(h).view(*h.shape[:-1], -1, module.head_dim).transpose(1, 2)
            q, _ = apply_rotary_pos_emb(q, k, cos, sin)
            queries[module.layer_idx] = q[0].detach().clone()

        hooks.append(attn.register_forward_pre_hook(pre_hook, with_kwargs=True))
    cache = DynamicCache()
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
    finally:
        for h in hooks:
            h.remove()
    return cache, out.logits[0, -1].float(), queries


def press_prefill(model, ids, press):
    """Prefill with the press; returns the compressed cache and the press's score() per layer."""
    scores = {}
    orig_score = press.score

    def score(module, *a, **k):
        s = orig_score(module, *a, **k)
        scores[module.layer_idx] = s[0].detach().clone()
        return s

    press.score = score
    cache = DynamicCache()
    try:
        with torch.no_grad(), press(model):
            model(torch.tensor([ids]), past_key_values=cache, use_cache=True)
    finally:
        del press.score
    return cache, scores


def match_rows(full, kept):
    """Positions in full [T, D] of the rows of kept [n, D]; asserts exact matches."""
    d = torch.cdist(kept.double(), full.double(), compute_mode="donot_use_mm_for_euclid_dist")  # [n, T]
    dist, pos = d.min(dim=1)
    assert float(dist.max()) == 0.0, f"kept key row not found exactly in the full keys: {float(dist.max())}"
    pos = pos.tolist()
    assert len(set(pos)) == len(pos), "two kept rows matched the same position"
    return pos


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", help="also write full tensors to this .npz (for check_kvpress_summary.py)")
    args = ap.parse_args()

    torch.manual_seed(0)
    transformers.utils.logging.disable_progress_bar()
    path = os.path.join(MODEL_DIR, MODEL_FILE)
    if not os.path.exists(path):
        sys.exit(f"missing {path}: run scripts/fetch-model.sh")
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    cfg = model.config
    n_layers, n_kv = cfg.num_hidden_layers, cfg.num_key_value_heads

    doc = {
        "description": "KV entries kept by kvpress after prefilling token_ids; kept[layer][kv_head] = "
                       "ascending prompt positions (0-based). No BOS, no chat template.",
        "generator": "tests/golden/make_kvpress_golden.py",
        "kvpress_version": kvpress.__version__ if hasattr(kvpress, "__version__") else None,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "attn_implementation": "eager",
        "dtype": "float32",
        "model_file": "models/" + MODEL_FILE,
        "model_sha256_16": sha256(path)[:16],
        "n_layers": n_layers,
        "n_kv_heads": n_kv,
        "n_heads": cfg.num_attention_heads,
        "head_dim": cfg.head_dim if getattr(cfg, "head_dim", None) else cfg.hidden_size // cfg.num_attention_heads,
        "window_size": WINDOW_SIZE,
        "kernel_size": KERNEL_SIZE,
        "epsilon": EPSILON,
        "first_stage_ratio": FIRST_STAGE_RATIO,
        "n_kept_rule": "max(1, int(n_tokens * (1 - compression_ratio))) in float64 (int truncates)",
        "stage1_budget_rule": "criticalkv: max(1, int((1 - compression_ratio) * n_tokens * first_stage_ratio))",
        "tokenizer": "transformers' GGUF tokenizer, encode(text, add_special_tokens=False). token_ids are the "
                     "contract: feed them, do not re-tokenize (llama.cpp splits 3 spaces before a digit as "
                     "one token where transformers makes two, e.g. apache2_terms: 1498 vs 1504 tokens)",
        "prompts": [],
        "cases": [],
    }
    if doc["kvpress_version"] is None:
        from importlib.metadata import version
        doc["kvpress_version"] = version("kvpress")

    dump = {}
    if args.dump:
        for l, layer in enumerate(model.model.layers):
            dump[f"wo_{l}"] = layer.self_attn.o_proj.weight.detach().numpy()

    for pi, (name, lic, marker, target) in enumerate(PROMPTS):
        start, end, ids = build_prompt(tok, lic, marker, target)
        print(f"{name}: {len(ids)} tokens from {lic} bytes [{start}, {end})", flush=True)
        pdoc = {"name": name, "source_file": lic, "source_sha256_16": sha256(lic)[:16],
                "byte_range": [start, end], "n_tokens": len(ids), "token_ids": ids}

        full_cache, logits, queries = full_prefill(model, ids)
        full_keys = [full_cache.layers[l].keys[0] for l in range(n_layers)]  # [n_kv, T, D]
        if pi == 0:
            top = torch.topk(logits, 5)
            pdoc["full_cache_greedy_next_token"] = int(torch.argmax(logits))
            pdoc["last_position_top5"] = [{"id": int(i), "logit": round(float(v), 5)}
                                          for v, i in zip(top.values, top.indices)]
        doc["prompts"].append(pdoc)
        if args.dump:
            for l in range(n_layers):
                dump[f"{name}_q_{l}"] = queries[l].numpy()
                dump[f"{name}_k_{l}"] = full_keys[l].numpy()
                dump[f"{name}_v_{l}"] = full_cache.layers[l].values[0].numpy()

        for ratio in RATIOS:
            for pname, press in make_presses(ratio):
                cache, scores = press_prefill(model, ids, press)
                n_kept = compute_n_kept(len(ids), ratio)
                kept = []
                for l in range(n_layers):
                    ck = cache.layers[l].keys[0]
                    assert ck.shape[1] == n_kept, (ck.shape, n_kept)
                    per_head = []
                    for h in range(n_kv):
                        pos = sorted(match_rows(full_keys[l][h], ck[h]))
                        # Second witness: the top-n_kept set of the press's own scores.
                        by_score = sorted(torch.topk(scores[l][h], n_kept).indices.tolist())
                        assert pos == by_score, f"{pname} {ratio} layer {l} head {h}: match != score top-k"
                        per_head.append(pos)
                    kept.append(per_head)
                    if args.dump:
                        dump[f"{name}_{pname}_{ratio}_score_{l}"] = scores[l].numpy()
                cdoc = {"prompt_name": name, "n_tokens": len(ids), "press": pname,
                        "compression_ratio": ratio, "n_kept": n_kept}
                if pname == "criticalkv":
                    cdoc["stage1_budget"] = max(1, int((1 - ratio) * len(ids) * FIRST_STAGE_RATIO))
                cdoc["kept"] = kept
                doc["cases"].append(cdoc)
                print(f"  {pname} ratio {ratio}: n_kept {n_kept}", flush=True)

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    # One line per case / prompt keeps the file small but diffable.
    with open(OUT, "w") as f:
        head = {k: v for k, v in doc.items() if k not in ("prompts", "cases")}
        f.write("{\n")
        for k, v in head.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v)},\n")
        f.write('  "prompts": [\n')
        f.write(",\n".join("    " + json.dumps(p, separators=(",", ":")) for p in doc["prompts"]))
        f.write('\n  ],\n  "cases": [\n')
        f.write(",\n".join("    " + json.dumps(c, separators=(",", ":")) for c in doc["cases"]))
        f.write("\n  ]\n}\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")
    if args.dump:
        np.savez(args.dump, **dump)
        print(f"wrote {args.dump}")


if __name__ == "__main__":
    main()
