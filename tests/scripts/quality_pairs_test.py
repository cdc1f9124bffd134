#!/usr/bin/env python3
"""scripts/quality_pairs.py pairs two eval runs sample by sample: on committed runs it gives
back what docs/QUALITY.md states (passkey at 8K, seed 0: the pool of 25 keeps 33 of the full
cache's 35, the same samples as the pool of 31, none lost or gained); on slices it pools by
sample number and names the samples lost and gained; a stopped run's --verbose log pairs as
its JSON would; runs without the full cache's prefill pair on their answer NLLs; runs of
different draws (seed, prompt style, and whether the eval hashed the seed) are refused, runs
of more samples are not, but for passkey runs (a passkey's depth is spread over the run's
samples); a row pooled from runs at different settings (pool) is named in a
warning, the full cache's row is not, and so are sides run on different CPU kernels (AVX2,
AVX-512)."""
import contextlib
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import quality_pairs  # noqa: E402

Q = os.path.join(ROOT, "docs", "quality")


def run(*argv, stderr=None):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(stderr or io.StringIO()):
        blocks = quality_pairs.main(list(argv))
    return blocks, out.getvalue()


def result(seed, first, cells, samples=10, task="passkey"):
    n = len(cells[0][2])
    return {"meta": {"seed": seed, "samples": samples, "prompt_style": "plain", "sample_range": [first, first + n]},
            "cells": [{"policy": p, "budget": b, "task": task, "context": 100, "values": v,
                       "answer_nll_gaps": [0.0] * n if p == "full" else g, "peak_kv_bytes": 1}
                      for p, b, v, g in cells]}


def refused(message, *argv):
    """Whether quality_pairs.py stops on argv with an error that says message."""
    try:
        run(*argv)
    except SystemExit as e:
        return message in str(e)
    return False


def main():
    (block,), text = run("--base", os.path.join(Q, "8000_passkey_pool31_s[0-9]*.json"),
                         "--new", os.path.join(Q, "8000_passkey_pool25_s*.json"))
    assert (block["n"], block["full"], block["base_of_full"], block["new_of_full"]) == (50, 35, 33, 33), block
    assert block["lost"] == [] and block["gained"] == [], block
    assert "33 of the full cache's 35 (94.3%" in text, text

    with tempfile.TemporaryDirectory() as d:
        def write(name, r):
            json.dump(r, open(os.path.join(d, name), "w"))
        # Base: samples 0-3 with the full cache in one file; new: two slices, 0-1 and 2-3.
        write("base.json", result(0, 0, [("full", "-", [1, 1, 1, 0], None),
                                         ("snapkv/chunk", "0.10", [1, 0, 1, 0], [0.1, 0.5, 0.2, 0.3])]))
        write("new_a.json", result(0, 0, [("snapkv/chunk", "0.10", [0, 1], [0.3, 0.1])]))
        write("new_b.json", result(0, 2, [("snapkv/chunk", "0.10", [1, 1], [0.2, 0.3])]))
        (block,), text = run("--base", os.path.join(d, "base.json"), "--new", os.path.join(d, "new_*.json"))
        assert block["lost"] == [0] and block["gained"] == [1, 3], block
        # Of the full cache's three right answers (0-2): base keeps 0 and 2, new 1 and 2.
        assert (block["full"], block["base_of_full"], block["new_of_full"]) == (3, 2, 2), block
        assert abs(block["gap_difference"][0] - (0.2 - 0.4 + 0 + 0) / 4) < 1e-12, block
        # Slices at one setting pool quietly; a slice at another pool is named in a warning.
        warned = io.StringIO()
        run("--base", os.path.join(d, "base.json"), "--new", os.path.join(d, "new_*.json"), stderr=warned)
        assert warned.getvalue() == "", warned.getvalue()
        older = result(0, 2, [("snapkv/chunk", "0.10", [1, 1], [0.2, 0.3])])
        older["meta"]["command"] = "kvserve --pool-kernel 21 --json new_c.json"
        write("new_c.json", older)
        run("--base", os.path.join(d, "base.json"), "--new", os.path.join(d, "new_*.json"), stderr=warned)
        assert "snapkv/chunk/0.10 on passkey@100 pools runs at different settings" in warned.getvalue(), warned.getvalue()
        assert "pool None, chunk None, headroom None: new_a.json, new_b.json;" in warned.getvalue(), warned.getvalue()
        assert "pool 21, chunk None, headroom None: new_c.json)" in warned.getvalue(), warned.getvalue()
        os.remove(os.path.join(d, "new_c.json"))
        # The full cache's rows pool quietly whatever their settings: it compresses nothing.
        full_older = result(0, 4, [("full", "-", [1, 0], None)])
        full_older["meta"]["command"] = "kvserve --pool-kernel 21 --json base_b.json"
        write("base_b.json", full_older)
        quiet = io.StringIO()
        run("--base", os.path.join(d, "base*.json"), "--new", os.path.join(d, "new_*.json"), stderr=quiet)
        assert quiet.getvalue() == "", quiet.getvalue()
        os.remove(os.path.join(d, "base_b.json"))
        # A side run on other CPU kernels is named in a warning (files before the field: AVX-512).
        on_avx2 = result(0, 0, [("snapkv/chunk", "0.10", [0, 1], [0.3, 0.1])])
        on_avx2["meta"]["cpu_isa"] = "avx2"
        write("isa_avx2.json", on_avx2)
        warned = io.StringIO()
        run("--base", os.path.join(d, "base.json"), "--new", os.path.join(d, "isa_avx2.json"), stderr=warned)
        assert "different CPU kernels (avx512 against avx2)" in warned.getvalue(), warned.getvalue()
        os.remove(os.path.join(d, "isa_avx2.json"))
        # A multikey run of 20 samples draws the same first 10 prompts: it pairs on those it
        # shares. A passkey run of 20 does not (its depths are spread over 20): refused, on
        # either side, and within a side.
        write("mk_base.json", result(0, 0, [("full", "-", [1, 1, 1, 0], None),
                                            ("snapkv/chunk", "0.10", [1, 0, 1, 0], [0.1, 0.5, 0.2, 0.3])], task="multikey"))
        write("mk_longer.json", result(0, 2, [("snapkv/chunk", "0.10", [0, 1, 1], [0.2, 0.3, 0.0])], samples=20,
                                       task="multikey"))
        (block,), text = run("--base", os.path.join(d, "mk_base.json"), "--new", os.path.join(d, "mk_longer.json"))
        assert (block["n"], block["lost"], block["gained"]) == (2, [2], [3]), block
        write("longer.json", result(0, 2, [("snapkv/chunk", "0.10", [0, 1, 1], [0.2, 0.3, 0.0])], samples=20))
        assert refused("with --samples 20, the base with 10", "--base", os.path.join(d, "base.json"),
                       "--new", os.path.join(d, "longer.json")), "passkey runs of 10 and 20 samples were paired"
        assert refused("pools runs of --samples 10 and 20", "--base", os.path.join(d, "base.json"),
                       "--new", os.path.join(d, "new_a.json") + " " + os.path.join(d, "longer.json")), \
            "a side pooled passkey runs of 10 and 20 samples"
        write("other_seed.json", result(1, 0, [("snapkv/chunk", "0.10", [1, 1], [0.0, 0.0])]))
        assert refused("different draws", "--base", os.path.join(d, "base.json"),
                       "--new", os.path.join(d, "other_seed.json")), "runs of different seeds were paired"
        # Seed 1 before and after the eval hashed it: two draws; a log's " hashed" says which.
        hashed = result(1, 0, [("snapkv/chunk", "0.10", [0, 1], [0.0, 0.0])])
        hashed["meta"]["seed_hashed"] = True
        write("seed1_hashed.json", hashed)
        assert refused("different draws", "--base", os.path.join(d, "other_seed.json"),
                       "--new", os.path.join(d, "seed1_hashed.json")), "seed 1 before and after its hashing were paired"
        with open(os.path.join(d, "seed1_hashed.log"), "w") as f:
            f.write("kvserve eval: m.gguf, 1 rows x 1 columns, 10 samples each, plain prompts, seed 1 hashed, avx2 kernels\n"
                    "  snapkv/chunk 0.10: 1.0000 (nll gap 0.000; needle held by 90% of layer-heads) ' 123'\n"
                    "[passkey@100 1/10] key at depth 0.10: prefill 1.0 s (100 tok/s), 1 configs 1.0 s\n")
        (block,), text = run("--base", os.path.join(d, "seed1_hashed.log"), "--new", os.path.join(d, "seed1_hashed.json"))
        assert (block["n"], block["base"], block["new"]) == (1, 1, 0), block
        # A log's header names its --samples: a passkey log of 20 against a run of 10 is refused.
        with open(os.path.join(d, "seed1_hashed_20.log"), "w") as f:
            f.write("kvserve eval: m.gguf, 1 rows x 1 columns, 20 samples each, plain prompts, seed 1 hashed, avx2 kernels\n"
                    "  snapkv/chunk 0.10: 1.0000 (nll gap 0.000; needle held by 90% of layer-heads) ' 123'\n"
                    "[passkey@100 1/20] key at depth 0.10: prefill 1.0 s (100 tok/s), 1 configs 1.0 s\n")
        assert refused("the base with 20", "--base", os.path.join(d, "seed1_hashed_20.log"),
                       "--new", os.path.join(d, "seed1_hashed.json")), "a passkey log of 20 samples paired with a run of 10"

        # A --verbose log of samples 0 and 3 (rows before each "[task@context N/samples]" line, N
        # from 1), with the full cache's answers read from another run (--full-from).
        with open(os.path.join(d, "stopped.log"), "w") as f:
            f.write("kvserve eval: m.gguf, 1 rows x 1 columns, 10 samples each, plain prompts, seed 0\n"
                    "  ... 1/2 scored, 31 s; now snapkv/chunk 0.10 on passkey@100 sample 3\n"
                    "  snapkv/chunk 0.10: 0.0000 (nll gap 0.250; needle held by 50% of layer-heads) ' words'\n"
                    "[passkey@100 1/10] key at depth 0.10: prefill 1.0 s (100 tok/s), 1 configs 1.0 s\n"
                    "  snapkv/chunk 0.10: 1.0000 (nll gap -0.125; needle held by 90% of layer-heads) ' 123'\n"
                    "[passkey@100 4/10] key at depth 0.40: prefill 1.0 s (100 tok/s), 1 configs 1.0 s\n")
        (block,), text = run("--base", os.path.join(d, "stopped.log"), "--new", os.path.join(d, "new_*.json"),
                             "--full-from", os.path.join(d, "base.json"))
        # Log: sample 0 wrong, 3 right; new: 0 wrong, 3 right; the full cache reads 0, not 3.
        assert (block["n"], block["base"], block["new"], block["lost"], block["gained"]) == (2, 1, 1, [], []), block
        assert (block["full"], block["base_of_full"], block["new_of_full"]) == (1, 0, 0), block
        assert abs(block["gap_difference"][0] - ((0.3 - 0.25) + (0.3 + 0.125)) / 2) < 1e-12, block
        assert refused("--full-from is another draw", "--base", os.path.join(d, "stopped.log"),
                       "--new", os.path.join(d, "new_*.json"),
                       "--full-from", os.path.join(d, "other_seed.json")), "--full-from of another seed was used"

        # Runs made with --no-full-reference carry answer NLLs and no gaps: their paired
        # difference is the NLLs' (the full cache's NLL cancels), from JSON and from a log alike.
        def no_reference(first, values, nlls):
            r = result(0, first, [("snapkv/chunk+merge-near", "0.10", values, None)])
            r["cells"][0].pop("answer_nll_gaps")
            r["cells"][0]["answer_nlls"] = nlls
            return r
        write("near.json", no_reference(0, [1, 1, 0, 1], [1.0, 2.0, 4.0, 1.5]))
        write("values.json", no_reference(0, [1, 0, 0, 1], [1.5, 3.0, 3.0, 1.5]))
        row = ("--row", "snapkv/chunk+merge-near/0.10")
        (block,), text = run("--base", os.path.join(d, "near.json"), "--new", os.path.join(d, "values.json"),
                             "--full-from", os.path.join(d, "base.json"), *row)
        assert (block["lost"], block["full"], block["base_of_full"], block["new_of_full"]) == ([1], 3, 2, 1), block
        assert abs(block["gap_difference"][0] - (0.5 + 1.0 - 1.0 + 0) / 4) < 1e-12, block
        with open(os.path.join(d, "values.log"), "w") as f:
            f.write("kvserve eval: m.gguf, 1 rows x 1 columns, 10 samples each, plain prompts, seed 0\n"
                    "  snapkv/chunk+merge-near 0.10: 1.0000 (nll gap nan; answer nll 1.750; needle held by 50% "
                    "of layer-heads) ' 123'\n"
                    "[passkey@100 1/10] key at depth 0.10: no full prefill, 1 configs 1.0 s\n")
        (block,), text = run("--base", os.path.join(d, "near.json"), "--new", os.path.join(d, "values.log"), *row)
        assert block["n"] == 1 and abs(block["gap_difference"][0] - 0.75) < 1e-12, block
        with open(os.path.join(d, "values.log"), "w") as f:  # today's binaries print "-" for no gap
            f.write("kvserve eval: m.gguf, 1 rows x 1 columns, 10 samples each, plain prompts, seed 0\n"
                    "  snapkv/chunk+merge-near 0.10: 0.0000 (nll gap -; answer nll 2.500) ' 9'\n"
                    "[passkey@100 1/10] key at depth 0.10: no full prefill, 1 configs 1.0 s\n")
        (block,), text = run("--base", os.path.join(d, "near.json"), "--new", os.path.join(d, "values.log"), *row)
        assert block["n"] == 1 and abs(block["gap_difference"][0] - 1.5) < 1e-12, block
        assert block["lost"] == [0], block
    print("ok")


if __name__ == "__main__":
    main()
