#!/usr/bin/env python3
"""Numpy-only re-implementation of kvpress 0.5.5's SnapKV and CriticalKV(SnapKV) selection, checked
against tests/golden/kvpress/selection_smollm2.json (mean Jaccard per case) and against the scores
kvpress computed (max relative difference).

It needs the full tensors that make_kvpress_golden.py dumps (they are not committed: ~300 MB):
    /opt/kvpress-venv/bin/python tests/golden/make_kvpress_golden.py --dump /tmp/kvdump.npz
    python3 tests/golden/check_kvpress_summary.py /tmp/kvdump.npz      # numpy only
The algorithm below is the specification kvserve's C++ SnapKV/CriticalKV follows.
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "kvpress", "selection_smollm2.json")


def snapkv_scores(q, k, n_kv, window, kernel, dt=np.float64):
    """q [H, T, D] post-RoPE queries, k [KV, T, D] post-RoPE keys -> scores [KV, T]."""
    H, T, D = q.shape
    group = H // n_kv
    q = q.astype(dt)
    k = k.astype(dt)
    qw = q[:, T - window:, :]                                   # last `window` queries
    kk = np.repeat(k, group, axis=0)                            # query head h uses kv head h // group
    logits = qw @ kk.transpose(0, 2, 1) / np.sqrt(D)            # [H, w, T]
    qpos = np.arange(T - window, T)[:, None]
    logits = np.where(np.arange(T)[None, :] <= qpos, logits, -np.inf)   # causal
    logits -= logits.max(-1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(-1, keepdims=True)                               # softmax over all T keys
    s = p[:, :, :T - window].mean(1)                            # drop window keys, no renormalise
    pad = kernel // 2                                           # avg_pool1d, zero pad, /kernel always
    sp = np.pad(s, ((0, 0), (pad, pad)))
    s = np.stack([sp[:, i:i + T - window] for i in range(kernel)]).sum(0) / kernel
    s = s.reshape(n_kv, group, T - window).mean(1)              # GQA: mean over the group
    return np.concatenate([s, np.full((n_kv, window), s.max() + 1)], axis=1)


def vwl1norm(v, wo, n_heads, dt=np.float64):
    """v [KV, T, D], wo = o_proj.weight [hidden, H*D] -> mean over group of |V_t @ Wo_h^T|_1."""
    n_kv, T, D = v.shape
    group = n_heads // n_kv
    out = np.zeros((n_heads, T), dt)
    for h in range(n_heads):
        woh = wo[:, h * D:(h + 1) * D].astype(dt)             # [hidden, D]
        out[h] = np.abs(v[h // group].astype(dt) @ woh.T).sum(-1)
    return out.reshape(n_kv, group, T).mean(1)


def topk_set(s, n):
    # stable on ties: lower index first (torch's CPU topk order on exact ties is unspecified)
    return set(np.argsort(-s, kind="stable")[:n].tolist())


def main():
    dump = np.load(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kvdump.npz")
    doc = json.load(open(GOLDEN))
    w, ker, eps, fsr = doc["window_size"], doc["kernel_size"], doc["epsilon"], doc["first_stage_ratio"]
    n_heads, n_kv, n_layers = doc["n_heads"], doc["n_kv_heads"], doc["n_layers"]
    overall = []
    for case in doc["cases"]:
        name, press, r = case["prompt_name"], case["press"], case["compression_ratio"]
        T = case["n_tokens"]
        n_kept = max(1, int(T * (1 - r)))
        assert n_kept == case["n_kept"]
        jac, rel = [], 0.0
        for l in range(n_layers):
            q, k, v = dump[f"{name}_q_{l}"], dump[f"{name}_k_{l}"], dump[f"{name}_v_{l}"]
            s = snapkv_scores(q, k, n_kv, w, ker)
            if press == "criticalkv":
                budget = int((1 - r) * T * fsr)
                budget = max(1, budget) if r < 1.0 else 0
                top1 = [sorted(topk_set(s[h], budget)) for h in range(n_kv)]
                s = (s + eps) * vwl1norm(v, dump[f"wo_{l}"], n_heads)
                ref = dump[f"{name}_{press}_{r}_score_{l}"].astype(np.float64)
                fin = ref < np.finfo(np.float32).max
                rel = max(rel, float(np.max(np.abs(s[fin] - ref[fin]) / np.abs(ref[fin]))))
                for h in range(n_kv):
                    s[h, top1[h]] = np.finfo(np.float32).max
            else:
                ref = dump[f"{name}_{press}_{r}_score_{l}"].astype(np.float64)
                rel = max(rel, float(np.max(np.abs(s - ref) / np.abs(ref))))
            for h in range(n_kv):
                mine = topk_set(s[h], n_kept)
                theirs = set(case["kept"][l][h])
                jac.append(len(mine & theirs) / len(mine | theirs))
        jac = np.array(jac)
        overall.extend(jac)
        print(f"{name:14s} {press:10s} r={r}: n_kept {n_kept:4d}  mean Jaccard {jac.mean():.6f}  "
              f"min {jac.min():.4f}  exact heads {int((jac == 1).sum())}/{len(jac)}  "
              f"max rel score diff {rel:.2e}")
    print(f"overall mean Jaccard {np.mean(overall):.6f}")


if __name__ == "__main__":
    main()
