#!/usr/bin/env python3
"""scripts/quality_table.py --merge-samples: slices of one committed 50-sample eval result,
pooled, give back what the eval itself computed over all 50 (mean, n, Wilson interval exactly;
the NLL-gap bootstrap within sampling noise, since its random draws are Python's, not the
eval's), and the rendered table shows the pooled n; a slice without gaps leaves the pooled cell
without one."""
import contextlib
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import quality_table  # noqa: E402

RESULT = os.path.join(ROOT, "docs", "quality", "n50_4096_passkey_headroom2048.json")


def slice_result(result, lo, hi):
    cells = []
    for c in result["cells"]:
        s = dict(c, values=c["values"][lo:hi], answer_nll_gaps=c["answer_nll_gaps"][lo:hi], n=hi - lo)
        s["mean"] = sum(s["values"]) / s["n"]
        cells.append(s)
    return dict(result, cells=cells, meta=dict(result["meta"], sample_range=[lo, hi]))


def main():
    whole = json.load(open(RESULT))
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for lo, hi in ((0, 17), (17, 40), (40, 50)):
            paths.append(os.path.join(d, f"slice_{lo}.json"))
            json.dump(slice_result(whole, lo, hi), open(paths[-1], "w"))
        cells = {}
        for p in paths:
            for c in json.load(open(p))["cells"]:
                key = (c["policy"], c["budget"])
                cells[key] = quality_table.pooled(cells[key], c) if key in cells else c
        for want in whole["cells"]:
            got = cells[(want["policy"], want["budget"])]
            assert got["n"] == want["n"] == 50, (got["n"], want["n"])
            assert abs(got["mean"] - want["mean"]) < 1e-12, (got["mean"], want["mean"])
            assert all(abs(a - b) < 1e-9 for a, b in zip(got["ci95"], want["ci95"])), (got["ci95"], want["ci95"])
            assert abs(got["answer_nll_gap"] - want["answer_nll_gap"]) < 1e-9
            assert all(abs(a - b) < 0.03 for a, b in zip(got["answer_nll_gap_ci95"], want["answer_nll_gap_ci95"])), (
                got["answer_nll_gap_ci95"], want["answer_nll_gap_ci95"])
        # A slice without gaps (--no-full-reference) pools its answer NLLs, and the pooled cell
        # shows no gap rather than one over part of the samples.
        some = next(c for c in whole["cells"] if "answer_nll_gaps" in c)
        without = {k: v for k, v in some.items() if not k.startswith("answer_nll_gap")}
        with_nlls = dict(some, answer_nlls=[1.0] * some["n"])
        pooled = quality_table.pooled(with_nlls, dict(without, answer_nlls=[2.0] * some["n"]))
        assert "answer_nll_gap" not in pooled and "answer_nll_gaps" not in pooled, sorted(pooled)
        assert pooled["answer_nlls"] == [1.0] * some["n"] + [2.0] * some["n"] and pooled["n"] == 2 * some["n"]
        assert quality_table.fmt_gap(pooled) == "-"
        # Answers pool in sample order; a slice from before the field drops them rather than
        # leave a list that no longer lines up with the samples.
        said = quality_table.pooled(dict(some, answers=["1"] * some["n"]), dict(some, answers=["2"] * some["n"]))
        assert said["answers"] == ["1"] * some["n"] + ["2"] * some["n"], said["answers"]
        assert "answers" not in quality_table.pooled(dict(some, answers=["1"] * some["n"]), some)
        held = dict(some, needle_held=[0.5] * some["n"])
        assert "needle_held" not in quality_table.pooled(held, {k: v for k, v in some.items() if k != "needle_held"})
        cued = quality_table.pooled(dict(some, cue_held=[0.25] * some["n"]), dict(some, cue_held=[1.0] * some["n"]))
        assert cued["cue_held"] == [0.25] * some["n"] + [1.0] * some["n"], cued.get("cue_held")
        assert "cue_held" not in quality_table.pooled(dict(some, cue_held=[0.25] * some["n"]), some)
        decoyed = quality_table.pooled(dict(some, decoy_held=[0.5] * some["n"]), dict(some, decoy_held=[0.0] * some["n"]))
        assert decoyed["decoy_held"] == [0.5] * some["n"] + [0.0] * some["n"], decoyed.get("decoy_held")
        assert "decoy_held" not in quality_table.pooled(some, dict(some, decoy_held=[0.5] * some["n"]))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            quality_table.main(paths, merge_samples=True)
        assert "(n=50)" in out.getvalue(), out.getvalue()
        try:  # a slice given twice would count its samples twice
            quality_table.main(paths + paths[-1:], merge_samples=True)
        except SystemExit as e:
            assert "repeats samples [40, 41" in str(e), e
        else:
            raise AssertionError("overlapping slices were pooled")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            quality_table.main(paths)  # without the flag: the first slice's cells only
        assert "(n=17)" in out.getvalue() and "(n=50)" not in out.getvalue(), out.getvalue()
    print("ok")


if __name__ == "__main__":
    main()
