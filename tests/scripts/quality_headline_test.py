#!/usr/bin/env python3
"""scripts/quality_headline.py pools every committed eval run at today's settings into one
table per cell, and docs/QUALITY.md's headline holds what it prints now. On the committed runs
it gives back what docs/QUALITY.md states for passkey at 8K, 10% (the full cache's 35 of 50;
CriticalKV@ripple in chunk mode 28 of them with drop, below its `prefill_end`'s interval, and
34 with merge-near, inside it); on made-up runs it pools slices, keeps the full cache's rows of
runs at other settings but no other row of theirs, judges a chunk row against its own policy's
`prefill_end` (giving no verdict where the full cache answers none), lists the samples two
runs answered differently, and gives a run without the full cache its answer NLL gap from the
full cache's answer NLLs in another run on the same CPU kernels (none from another ISA's), and
pools a run with seed 1 from before the eval hashed its seed as the seed 0 prompts it ran."""
import contextlib
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import quality_headline  # noqa: E402

DEFAULTS = "--kv-window 16 --prefill-chunk 512 --chunk-headroom 2048 --pool-kernel 31"


def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        quality_headline.main(list(argv))
    return out.getvalue()


def table_row(text, heading, row):
    """The cells of one row of the table under the heading that starts with `heading`."""
    block = text.split("#### " + heading, 1)[1].split("####", 1)[0]
    for line in block.splitlines():
        if line.startswith(f"| {row} |"):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError(f"no row {row} under {heading}:\n{block}")


def result(first, cells, flags=DEFAULTS, pool=31, seed=0, nlls=None, gaps=True, task="passkey",
           isa=None, hashed=False, samples=10):
    """A made-up run: cells as (policy, budget, values); `nlls` {policy: each sample's answer NLL};
    without `gaps` it records no NLL gaps, as a run without the full cache; `isa` the CPU
    kernels it records (none: a run from before the eval recorded them)."""
    n = len(cells[0][2])
    nlls = nlls or {}
    return {"meta": {**({"cpu_isa": isa} if isa else {}), **({"seed_hashed": True} if hashed else {}), "seed": seed, "samples": samples, "prompt_style": "plain", "sample_range": [first, first + n],
                     "window": 16, "pool_kernel": pool, "prefill_chunk": 512, "chunk_headroom": 2048,
                     "model": "models/m.gguf", "complete": True,
                     "command": f"kvserve --model models/m.gguf --samples {samples} {flags} --json x.json"},
            "cells": [{"policy": p, "budget": b, "task": task, "context": 100, "values": v,
                       "answer_nll_gaps": [0.0 if p == "full" else 0.5] * n if gaps else None,
                       "answer_nlls": nlls.get(p), "peak_kv_bytes": 2_000_000}
                      for p, b, v in cells]}


def main():
    text = run()
    with open(os.path.join(ROOT, "docs", "QUALITY.md")) as f:
        _, committed, _ = quality_headline.split_headline(f.read())
    assert committed == text, ("docs/QUALITY.md's headline is not what the committed runs give: "
                               "run scripts/quality_headline.py --update docs/QUALITY.md")
    heading = "passkey at 8,000 tokens, 10% budget (SmolLM2-135M-Instruct.Q4_1.gguf, seed 0"
    assert table_row(text, heading, "full")[1:3] == ["50", "35"], text
    drop = table_row(text, heading, "criticalkv@ripple/chunk")
    assert drop[2] == "28" and drop[4].startswith("28 of 35") and drop[7].startswith("**below**"), drop
    near = table_row(text, heading, "criticalkv@ripple/chunk+merge-near")
    assert near[4].startswith("34 of 35") and near[7] == "inside" and near[6] == "120.4 MB", near

    with tempfile.TemporaryDirectory() as d:
        def write(name, r):
            json.dump(r, open(os.path.join(d, name), "w"))
        # The full cache (from a run at another pool) reads 0-7; prefill_end reads 8 of 10.
        write("a_full.json", result(0, [("full", "-", [1] * 8 + [0, 0]),
                                        ("snapkv/prefill_end", "0.10", [1] * 10)], pool=21,
                                    nlls={"full": [1.0] * 5 + [2.0] * 5}))
        # A run without the full cache: its gaps come from its answer NLLs less a_full's, and
        # none for the samples where a_full's NLL is not known (its own NLL missing on 8-9).
        write("f_mid.json", result(0, [("snapkv/chunk+merge-mid", "0.10", [1] * 8 + [0, 0])], gaps=False,
                                   nlls={"snapkv/chunk+merge-mid": [1.25] * 5 + [2.25] * 3 + [None] * 2}))
        # b_end also runs the full cache, recording no answer NLLs (as runs before them): its
        # answers are kept (today's settings come first), a_full's NLLs fill in.
        write("b_end.json", result(0, [("snapkv/prefill_end", "0.10", [1] * 8 + [0, 0]),
                                       ("full", "-", [1] * 8 + [0, 0])]))
        # The chunk row in two slices, 8 of 10: inside; its drop form 2 of 10: below.
        write("c_chunk_0.json", result(0, [("snapkv/chunk+merge-near", "0.10", [1, 1, 1, 1, 0]),
                                           ("snapkv/chunk", "0.10", [1, 0, 0, 0, 0])]))
        write("c_chunk_5.json", result(5, [("snapkv/chunk+merge-near", "0.10", [1, 1, 1, 1, 0]),
                                           ("snapkv/chunk", "0.10", [0, 0, 0, 0, 1])]))
        # The same row rerun on samples 5-6, one answer different: the first file's is kept.
        write("d_rerun.json", result(5, [("snapkv/chunk+merge-near", "0.10", [1, 0])]))
        # A row run with a setting flag the table does not pool.
        write("e_sinks.json", result(0, [("criticalkv/chunk", "0.10", [1] * 10)], flags=DEFAULTS + " --sink-tokens 40"))
        # A task the full cache answers none of (variable tracking on SmolLM2): no verdict.
        write("g_none.json", result(0, [("full", "-", [0] * 10), ("snapkv/prefill_end", "0.10", [0] * 10),
                                        ("snapkv/chunk+merge-mid", "0.10", [0] * 10)], task="vartrack"))
        # Multikey: the full cache's NLLs from a run that records no ISA (AVX-512), and a run
        # without the full cache on AVX2: its NLLs pair with none of them.
        write("h_full.json", result(0, [("full", "-", [1] * 10), ("snapkv/prefill_end", "0.10", [1] * 10)],
                                    task="multikey", nlls={"full": [1.0] * 10}))
        write("i_avx2.json", result(0, [("snapkv/chunk+merge-mid", "0.10", [1] * 10)], gaps=False, task="multikey",
                                    nlls={"snapkv/chunk+merge-mid": [1.5] * 10}, isa="avx2"))
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        other_isa = table_row(run(*files), "multikey at 100 tokens", "snapkv/chunk+merge-mid")
        assert other_isa[5] == "-", other_isa
        # The full cache rerun on AVX2 on samples 0-3: those four get a gap (1.5 - 1.25).
        write("j_full_avx2.json", result(0, [("full", "-", [1] * 4)], task="multikey", nlls={"full": [1.25] * 4},
                                         isa="avx2"))
        files = sorted(os.path.join(d, f) for f in os.listdir(d))
        text = run(*files)
        same_isa = table_row(text, "multikey at 100 tokens", "snapkv/chunk+merge-mid")
        assert same_isa[5] == "0.250 [0.250, 0.250] (over 4)", same_isa
        heading = "passkey at 100 tokens, 10% budget (m.gguf, seed 0, depths over 10 samples, plain prompts)"
        assert table_row(text, heading, "full")[1:4] == ["10", "8", "0.80 [0.49, 0.94]"], text
        # prefill_end at pool 21 is not pooled: the row is b_end's alone.
        assert table_row(text, heading, "snapkv/prefill_end")[1:3] == ["10", "8"], text
        near = table_row(text, heading, "snapkv/chunk+merge-near")
        assert near[1:3] == ["10", "8"] and near[4].startswith("7 of 8") and near[7] == "inside", near
        assert near[5] == "0.500 [0.500, 0.500]" and near[6] == "2.0 MB", near
        drop = table_row(text, heading, "snapkv/chunk")
        assert drop[2] == "2" and drop[7] == "**below** its [0.49, 0.94]", drop
        mid = table_row(text, heading, "snapkv/chunk+merge-mid")
        assert mid[5] == "0.250 [0.250, 0.250] (over 8)", mid
        assert "criticalkv/chunk" not in text, text
        none = table_row(text, "vartrack at 100 tokens, 10% budget", "snapkv/chunk+merge-mid")
        assert none[4] == "-" and none[7] == "- (the full cache answers none: read the NLL gap)", none
        assert "snapkv/chunk+merge-near, sample 6: right in c_chunk_5.json (kept), wrong in d_rerun.json" in text, text
        assert "2 files at other settings" in text, text
        # Seed 1 before the eval hashed its seed drew seed 0's prompts, sample i as i ^ 1: the
        # legacy run's samples 0 and 1 are seed 0's 1 and 0. A hashed seed 1 is a draw of its own.
        write("k_seed0.json", result(0, [("full", "-", [1, 1, 0, 0])], task="multivalue"))
        write("l_seed1_legacy.json", result(0, [("snapkv/prefill_end", "0.10", [1, 0])], task="multivalue", seed=1))
        write("m_seed1_hashed.json", result(0, [("full", "-", [0, 1]), ("snapkv/prefill_end", "0.10", [0, 0])],
                                            task="multivalue", seed=1, hashed=True))
        # A legacy passkey run's prompts are no seed 0 sample's (its depth is its own sample's).
        write("n_seed1_passkey.json", result(0, [("full", "-", [1, 1]), ("snapkv/prefill_end", "0.10", [1, 0])], seed=1))
        # A passkey's depth is spread over --samples: a run of 20 samples drew other prompts
        # under the same numbers, a table of its own.
        write("o_passkey_20.json", result(0, [("full", "-", [0, 0]), ("snapkv/prefill_end", "0.10", [0, 0])], samples=20))
        text = run(*sorted(os.path.join(d, f) for f in os.listdir(d)))
        assert table_row(text, "passkey at 100 tokens, 10% budget (m.gguf, seed 0, depths over 10", "full")[1:3] == ["10", "8"], text
        twenty = table_row(text, "passkey at 100 tokens, 10% budget (m.gguf, seed 0, depths over 20", "full")
        assert twenty[1:3] == ["2", "0"], twenty
        assert "(m.gguf, seed 1, before the seed was hashed, depths over 10 samples, plain prompts)" in text, text
        legacy = table_row(text, "multivalue at 100 tokens, 10% budget (m.gguf, seed 0,", "snapkv/prefill_end")
        assert legacy[1:3] == ["2", "1"] and legacy[4].startswith("1 of 2"), legacy
        hashed = table_row(text, "multivalue at 100 tokens, 10% budget (m.gguf, seed 1,", "snapkv/prefill_end")
        assert hashed[1:3] == ["2", "0"] and hashed[4].startswith("0 of 1"), hashed
    # A verdict that two decimals would print as "0.02 below [0.02, ...]" gets three.
    assert quality_headline.verdict(1 / 50, *quality_headline.wilson(3, 50)) == "**below** its [0.021, 0.162]"
    assert quality_headline.verdict(2 / 10, *quality_headline.wilson(8, 10)) == "**below** its [0.49, 0.94]"
    assert quality_headline.verdict(1.0, 0.2, 0.5) == "above its [0.20, 0.50]" and quality_headline.verdict(0.5, 0.2, 0.5) == "inside"
    print("quality_headline: ok")


if __name__ == "__main__":
    main()
