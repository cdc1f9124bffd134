#!/usr/bin/env python3
"""The headline tables of docs/QUALITY.md, rebuilt from every committed `kvserve eval --json` run.

    scripts/quality_headline.py [FILE.json ...]      (default: docs/quality/*.json)
    scripts/quality_headline.py --update docs/QUALITY.md     (rewrites its headline tables)

Each section of docs/QUALITY.md ran a few rows on one cell, so where a policy stands on a cell
is spread over several sections. This pools every run made at the settings the reach is
measured with (window 16, pool 31, chunk 512, headroom 2048, no other setting flag) into one
table per (task, context, budget, draw): each row's answers with a Wilson interval, how many of
the full cache's right answers it keeps (the same samples), its answer NLL gap to the full
cache (a run without the full cache paired with the full cache's answer NLLs from another run
of the same samples on the same CPU kernels), its peak KV bytes, and for a chunk-mode row
whether its accuracy lies inside the interval of the same policy and plan at `prefill_end`
(issue 16's catch-up test).

A run stopped early counts with the samples it finished. Rows run at other settings are left
out and their files counted (the full cache's rows are kept: it compresses nothing). A sample
that two runs measured for one row (the same row rerun with another binary or on another
machine) keeps the answer of the first file, those at today's settings before the others and
each sorted by name, and what that file did not measure (an answer NLL) from the next that
did; the samples whose answers differ are listed under the table: they are near ties, not a
setting's effect.
"""
import argparse
import glob
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_stats import bootstrap_mean, wilson  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = {"window": 16, "pool_kernel": 31, "prefill_chunk": 512, "chunk_headroom": 2048}
# Flags that choose what is run, or where it goes, not how a row compresses.
NEUTRAL_FLAGS = {"--model", "--policies", "--budgets", "--contexts", "--tasks", "--samples",
                 "--sample-range", "--seed", "--prompt-style", "--json", "--verbose",
                 "--no-full-reference", "--ripple-profile", "--kv-window", "--prefill-chunk",
                 "--chunk-headroom", "--pool-kernel", "--corpus"}


def command_flags(meta):
    """The run's command line as {flag: the word after it}."""
    words = meta.get("command", "").split()
    return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}


def recorded_settings(meta):
    """The compression settings the run recorded (window, pool, chunk, headroom), whatever its
    other flags."""
    # Older files name the pool only in their command.
    pool = meta.get("pool_kernel") or int(command_flags(meta).get("--pool-kernel", 0)) or None
    return {"window": meta.get("window"), "pool_kernel": pool, "prefill_chunk": meta.get("prefill_chunk"),
            "chunk_headroom": meta.get("chunk_headroom")}


def settings_of(meta):
    """The run's settings, {} when it ran with a flag outside NEUTRAL_FLAGS or another corpus."""
    if any(w.startswith("--") and w not in NEUTRAL_FLAGS for w in meta.get("command", "").split()):
        return {}
    if not command_flags(meta).get("--corpus", "tests/data/corpus").rstrip("/").endswith("tests/data/corpus"):
        return {}
    return recorded_settings(meta)


def run_isa(meta):
    """The CPU kernels' ISA the run used. Runs before the eval recorded it (the forty-second
    section) name none: every one whose section names its machine ran on an AVX-512 box."""
    return meta.get("cpu_isa", "avx512")


def cell_samples(cell):
    """Each sample of a result cell as (value, answer NLL gap, answer NLL), None for what its run
    did not record: a run with --no-full-reference has NLLs and no gaps, older runs gaps only."""
    n = len(cell["values"])
    return zip(cell["values"], cell.get("answer_nll_gaps") or [None] * n, cell.get("answer_nlls") or [None] * n)


def passkey_spread(task, n_samples):
    """The run's --samples where a task's prompts depend on it, else None. A passkey's depth is
    spread over them (sample i of n at 0.1 + 0.8 i / (n - 1); engine/offline/retrieval_tasks.cc),
    so passkey runs of different --samples ran different prompts under the same numbers; the other
    tasks' prompts come from the seed, task, context and sample number alone."""
    return n_samples if task == "passkey" else None


def prompt_of(meta, task):
    """The draw whose prompts a run's task ran (its seed, and a passkey's --samples: see
    passkey_spread; as the table's heading names it), and which of them its sample i was. Until
    `kvserve eval` hashed the seed (its JSON says `seed_hashed`), seed s's sample i drew seed 0's
    sample i ^ s's stream (engine/offline/eval_sample.cc): such a run measured seed 0's prompts
    and pools with them; but its passkey prompts were sample i ^ s's key at sample i's depth, a
    draw of no hashed seed's, labelled apart."""
    seed = meta.get("seed", 0)
    spread = passkey_spread(task, meta["samples"])
    depths = f", depths over {spread} samples" if spread is not None else ""
    if not seed or meta.get("seed_hashed"):
        return f"{seed}{depths}", lambda i: i
    if task == "passkey":
        return f"{seed}, before the seed was hashed{depths}", lambda i: i
    return "0", lambda i: i ^ seed


def load(paths):
    """{(draw, task, context, budget, policy): {sample: (correct, nll_gap, file, peak, nlls)}}, the
    samples two files disagree on, and the files left out. nlls is {cpu isa: answer NLL}: the
    kernels' rounding moves an 8K prompt's answer NLL by 0.1 nats on average (docs/QUALITY.md,
    forty-second section), the size of many differences between rows, so NLLs pair only
    within one ISA."""
    rows, disagree, skipped, runs = {}, [], [], []
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        name = os.path.basename(path)
        if "samples" not in result["meta"]:  # slices pooled into one file by quality_table.py: read the slices
            skipped.append(name)
        else:
            runs.append((settings_of(result["meta"]), name, result))
    # Runs at today's settings first: where a sample was measured twice, theirs is kept.
    for settings, name, result in sorted(runs, key=lambda r: (r[0] != SETTINGS, r[1])):
        meta = result["meta"]
        if settings != SETTINGS:
            skipped.append(name)
        if not settings:
            continue
        # A sample's prompt depends on the seed, task, context and its number, and a passkey's
        # on --samples too (passkey_spread).
        first, isa = meta.get("sample_range", [0, meta["samples"]])[0], run_isa(meta)
        for c in result["cells"]:
            # The full cache compresses nothing: its answers hold at any compression setting (of
            # runs since chunk mode's headroom, the second day; the first day's prompts differ).
            full_ok = c["policy"] == "full" and meta.get("chunk_headroom") is not None
            if c["task"] == "kl" or (settings != SETTINGS and not full_ok):
                continue
            seed, prompt = prompt_of(meta, c["task"])
            draw = (os.path.basename(meta.get("model", "")), seed, meta.get("prompt_style", "plain"))
            key = (draw, c["task"], c["context"], c["budget"], c["policy"])
            for i, (v, g, nll) in enumerate(cell_samples(c)):
                nlls = {} if nll is None else {isa: nll}
                sample, new = prompt(first + i), (v >= 0.5, g, name, c.get("peak_kv_bytes"), nlls)
                old = rows.setdefault(key, {}).setdefault(sample, new)
                if old[0] != new[0]:
                    disagree.append((key, sample, old[2], old[0], name))
                elif old is not new:
                    # What the kept file did not measure (a gap without the full cache, an
                    # answer NLL before runs recorded it) a rerun that answered alike gives.
                    gap = old[1] if old[1] is not None else g
                    rows[key][sample] = (old[0], gap, old[2], old[3], {**nlls, **old[4]})
    return rows, disagree, skipped


def row_order(policy):
    """The full cache, then `prefill_end` rows, then chunk mode's, each by policy name."""
    return (policy != "full", "/chunk" in policy, policy)


def catch_up(policy, rows, key_of, full):
    """Whether a chunk-mode row's accuracy lies in its policy's `prefill_end` interval. Where
    the full cache answers none of the table's samples (variable tracking nearly so on SmolLM2:
    2 of 50 at 2K) no row has an answer to keep, and "inside" would say nothing: the NLL gap is
    the measure there."""
    if "/chunk" not in policy:
        return ""
    if full and not any(v[0] for v in full.values()):
        return "- (the full cache answers none: read the NLL gap)"
    base = rows.get(key_of(policy.split("/chunk")[0] + "/prefill_end"))
    if not base:
        return "no `prefill_end` run"
    mine = rows[key_of(policy)]
    lo, hi = wilson(sum(v[0] for v in base.values()), len(base))
    return verdict(sum(v[0] for v in mine.values()) / len(mine), lo, hi)


def verdict(accuracy, lo, hi):
    """Where an accuracy lies against an interval, the interval printed to two decimals, or to
    three where two would round the crossed bound to the accuracy itself (1 of 50 against 3 of
    50's [0.0206, 0.162] would read "below its [0.02, 0.16]" at 0.02)."""
    if lo <= accuracy <= hi:
        return "inside"
    digits = 3 if round(accuracy, 2) == round(lo if accuracy < lo else hi, 2) else 2
    bounds = f"[{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"**below** its {bounds}" if accuracy < lo else f"above its {bounds}"


def nll_gap(sample, full_sample):
    """A sample's answer NLL gap to the full cache: the one its run measured, else (a run without
    the full cache) its answer NLL less the full cache's on that sample in another run on the
    same CPU kernels; the full cache compresses nothing, so its NLL is the same in any such run
    but for float rounding."""
    if sample[1] is not None:
        return sample[1]
    if full_sample is None:
        return None
    isa = next((i for i in sample[4] if i in full_sample[4]), None)
    return None if isa is None else sample[4][isa] - full_sample[4][isa]


def table(rows, disagree, draw, task, context, budget, out):
    model, seed, style = draw
    share = f"{float(budget):.0%}"
    print(f"#### {task} at {context:,} tokens, {share} budget ({model}, seed {seed}, {style} prompts)\n", file=out)
    print("| row | samples | answered | accuracy [95%] | of the full cache's right answers | "
          "answer NLL gap [95%] | peak KV | chunk mode vs its `prefill_end` |", file=out)
    print("|---|---:|---:|---|---|---|---:|---|", file=out)
    compressed = sorted({k[4] for k in rows if k[:4] == (draw, task, context, budget)}, key=row_order)
    key_of = lambda p: (draw, task, context, "-" if p == "full" else budget, p)  # noqa: E731
    # The full cache's row over the samples this table's rows ran.
    ran = set().union(*(rows[key_of(p)] for p in compressed))
    full = {s: v for s, v in rows.get(key_of("full"), {}).items() if s in ran}
    for policy in (["full"] if full else []) + compressed:
        cells = full if policy == "full" else rows[key_of(policy)]
        n, right = len(cells), sum(v[0] for v in cells.values())
        lo, hi = wilson(right, n)
        kept = "-"
        if full and policy != "full":
            theirs = [s for s in cells if s in full and full[s][0]]
            if theirs:
                k = sum(cells[s][0] for s in theirs)
                klo, khi = wilson(k, len(theirs))
                kept = f"{k} of {len(theirs)} ({k / len(theirs):.0%} [{klo:.0%}, {khi:.0%}])"
        gaps = [g for g in (nll_gap(v, full.get(s)) for s, v in cells.items()) if g is not None]
        gap = "-"
        if gaps and policy != "full":
            glo, ghi = bootstrap_mean(gaps, resamples=2000)
            gap = f"{sum(gaps) / len(gaps):.3f} [{glo:.3f}, {ghi:.3f}]" + ("" if len(gaps) == n else f" (over {len(gaps)})")
        peak = max((v[3] or 0) for v in cells.values())
        print(f"| {policy} | {n} | {right} | {right / n:.2f} [{lo:.2f}, {hi:.2f}] | {kept} | {gap} | "
              f"{peak / 1e6:.1f} MB | {catch_up(policy, rows, key_of, full)} |", file=out)
    notes = [d for d in disagree if d[0][:3] == (draw, task, context) and d[0][3] in (budget, "-")]
    for (_, _, _, _, policy), sample, first, right, other in notes:
        print(f"\n{policy}, sample {sample}: {'right' if right else 'wrong'} in {first} (kept), "
              f"{'wrong' if right else 'right'} in {other}", end="", file=out)
    print("\n" if notes else "", file=out)


START, END = "<!-- headline:start", "<!-- headline:end -->"


def split_headline(text):
    """docs/QUALITY.md's text as (up to and with the start marker's line, the tables, from the
    end marker on)."""
    if START not in text or END not in text:
        sys.exit(f"quality_headline: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    marker, rest = rest.split("-->\n", 1)
    tables, tail = rest.split(END, 1)
    return head + START + marker + "-->\n", tables, END + tail


def update(path, tables):
    """Replaces the text between the headline markers of `path` (docs/QUALITY.md) with `tables`."""
    with open(path) as f:
        head, _, tail = split_headline(f.read())
    with open(path, "w") as f:
        f.write(head + tables + tail)


def main(argv=None, out=None):
    out = out or sys.stdout
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("files", nargs="*", help="--json result files (default: docs/quality/*.json)")
    ap.add_argument("--update", metavar="QUALITY.md", help="write the tables between the file's headline markers "
                    "instead of printing them")
    a = ap.parse_args(argv)
    if a.update:
        tables = io.StringIO()
        result = main(a.files, tables)
        update(a.update, tables.getvalue())
        return result
    rows, disagree, skipped = load(a.files or glob.glob(os.path.join(ROOT, "docs", "quality", "*.json")))
    blocks = sorted({k[:4] for k in rows if k[3] != "-"}, key=lambda k: (k[1], k[2], k[3], str(k[0])))
    for draw, task, context, budget in blocks:
        table(rows, disagree, draw, task, context, budget, out)
    print(f"{len(blocks)} tables; {len(skipped)} files at other settings, their compressed rows left out.", file=out)
    return rows, disagree, skipped


if __name__ == "__main__":
    main()
