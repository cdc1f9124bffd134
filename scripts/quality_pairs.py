#!/usr/bin/env python3
"""Compares two runs of `kvserve eval` over the same draws, sample by sample.

    scripts/quality_pairs.py --base 'BASE*.json' --new 'NEW*.json' [--row POLICY/BUDGET]
                             [--base-row POLICY/BUDGET] [--full-row full]

Each side is one glob (or several, space-separated) of `--json` result files, slices of runs
made with `--sample-range` being pooled by their sample numbers; a `--verbose` log (*.log) of a
run stopped before it wrote its JSON counts too, its samples read from its per-sample lines. A retrieval task's accuracy
differences between two settings are mostly one or two samples in fifty, so an interval around
each side's accuracy cannot tell them apart; the same samples answered by both can: this prints,
per (task, context), which samples the new row lost and gained against the base row, how many
of the full cache's correct answers each keeps (the issue's "% of the full cache", with a
Wilson interval), and the paired difference of the answer NLL gaps (percentile bootstrap).

The full cache's answers come from whichever side has the --full-row (a run of the scored rows
alone pairs with a base run that had both). Runs whose draws differ (seed or prompt style) are
refused: their sample numbers name different prompts. --samples does not change a sample's
prompt (each is drawn from the seed, task, context and its number), so a run of 100 samples
pairs with one of 50 on the 50 they share, but for passkey runs: a passkey's depth is spread
over --samples, so passkey runs of different --samples are refused too. A row pooled from runs
at different compression settings (window, pool, chunk, headroom: a committed run at an older
pool matched by a broad glob) is paired all the same, with a warning on stderr naming the files
of each setting.
"""
import argparse
import glob
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_headline import cell_samples, passkey_spread, recorded_settings, run_isa  # noqa: E402
from quality_stats import bootstrap_mean, wilson  # noqa: E402

LOG_HEADER = re.compile(r"^kvserve eval: .*, (\d+) samples each, (\S+) prompts, seed (\d+)( hashed)?(?:, (\w+) kernels)?")
LOG_ROW = re.compile(r"^  (\S+) (\S+): ([0-9.]+) \(nll gap ([^;)]+)(?:; answer nll ([^;)]+))?")
LOG_SAMPLE = re.compile(r"^\[(\w+)@(\d+) (\d+)/\d+\]")


def draw_of(seed, style, hashed):
    """Which prompts a run drew: its seed and prompt style, and whether the eval hashed the seed
    (a JSON's `seed_hashed`, " hashed" after a log's seed). Before it did, seed s's sample i was
    seed 0's sample i ^ s, so a seed other than 0 then and now are two draws (seed 0 is one)."""
    return (seed, style, bool(hashed) or seed == 0)


def note_spread(spreads, task, context, n_samples):
    """Records the run's --samples for a task whose prompts depend on it (passkey_spread)."""
    spread = passkey_spread(task, n_samples)
    if spread is not None:
        spreads.setdefault((task, context), set()).add(spread)


def load_log(path, samples, isas, spreads):
    """A `kvserve eval --verbose` log (a run stopped before its --json was written): each
    sample's row lines come before its "[task@context N/samples]" line, N counting from 1.
    Returns the draw's identity; adds the CPU kernels' ISA to isas."""
    draw, pending, n_samples = None, [], None
    with open(path) as f:
        for line in f:
            if m := LOG_HEADER.match(line):
                this = draw_of(int(m.group(3)), m.group(2), m.group(4))
                if draw is not None and this != draw:
                    sys.exit(f"quality_pairs: {path} holds runs of two draws")
                draw, pending, n_samples = this, [], int(m.group(1))
                isas.add(m.group(5) or run_isa({}))
            elif m := LOG_ROW.match(line):
                policy, budget = m.group(1), m.group(2)
                # "-" (and "nan" in logs of older binaries): not measured.
                gap, nll = (float("nan") if g in (None, "-") else float(g) for g in (m.group(4), m.group(5)))
                pending.append((policy if budget == "-" else f"{policy}/{budget}", float(m.group(3)) >= 0.5,
                                None if math.isnan(gap) else gap, None if math.isnan(nll) else nll))
            elif m := LOG_SAMPLE.match(line):
                note_spread(spreads, m.group(1), int(m.group(2)), n_samples)
                for row, correct, gap, nll in pending:
                    samples.setdefault((row, m.group(1), int(m.group(2))), {})[int(m.group(3)) - 1] = \
                        (correct, gap, nll)
                pending = []
    if draw is None:
        sys.exit(f"quality_pairs: {path} has no 'kvserve eval:' header line")
    return draw


def run_settings(meta):
    """The settings a run compressed with (quality_headline's reading of its meta), named as the
    warning prints them."""
    s = recorded_settings(meta)
    return (("window", s["window"]), ("pool", s["pool_kernel"]), ("chunk", s["prefill_chunk"]),
            ("headroom", s["chunk_headroom"]))


def load_json(path, samples, isas, spreads, settings=None):
    """A `kvserve eval --json` result file; returns the draw's identity and adds the CPU
    kernels' ISA to isas."""
    with open(path) as f:
        result = json.load(f)
    meta = result["meta"]
    isas.add(run_isa(meta))
    first = meta.get("sample_range", [0, meta["samples"]])[0]
    for c in result["cells"]:
        if c["task"] == "kl":
            continue
        # The full cache's row has no budget ('-'): it is named by its policy alone.
        row = c["policy"] if c["budget"] == "-" else f'{c["policy"]}/{c["budget"]}'
        key = (row, c["task"], c["context"])
        note_spread(spreads, c["task"], c["context"], meta["samples"])
        if settings is not None and c["policy"] != "full":  # the full cache compresses nothing
            settings.setdefault(key, {}).setdefault(run_settings(meta), []).append(os.path.basename(path))
        for i, (v, g, nll) in enumerate(cell_samples(c)):
            samples.setdefault(key, {})[first + i] = (v >= 0.5, g, nll)
    return draw_of(meta.get("seed", 0), meta.get("prompt_style", "plain"), meta.get("seed_hashed"))


def load(patterns):
    """{(policy/budget, task, context): {sample: (correct, nll_gap, answer_nll)}}, the draw's identity,
    the CPU kernels' ISAs the runs used, and each passkey (task, context)'s --samples, from --json
    result files (and --verbose logs, *.log)."""
    files = sorted({f for p in patterns.split() for f in glob.glob(p)})
    if not files:
        sys.exit(f"quality_pairs: no file matches {patterns!r}")
    samples, draw, settings, isas, spreads = {}, None, {}, set(), {}
    for path in files:
        this = (load_log(path, samples, isas, spreads) if path.endswith(".log")
                else load_json(path, samples, isas, spreads, settings))
        if draw is not None and this != draw:
            sys.exit(f"quality_pairs: {path} is another draw (seed, prompt style, seed hashed: {this} against {draw})")
        draw = this
    for (task, context), counts in sorted(spreads.items()):
        if len(counts) > 1:
            sys.exit(f"quality_pairs: {task}@{context} in {patterns!r} pools runs of --samples "
                     f"{' and '.join(map(str, sorted(counts)))}: a passkey's depth is spread over --samples, "
                     "so their sample numbers name different prompts")
    for (row, task, context), runs in sorted(settings.items()):
        if len(runs) > 1:
            each = "; ".join(f"{', '.join(f'{k} {v}' for k, v in s)}: {', '.join(names)}" for s, names in runs.items())
            print(f"quality_pairs: warning: {row} on {task}@{context} pools runs at different settings "
                  f"({each}); a sample in two of them keeps the last file's answer", file=sys.stderr)
    return samples, draw, isas, {k: min(v) for k, v in spreads.items()}


def refuse_other_spreads(side, spreads, base_spreads):
    """Exits when a passkey (task, context) both sides ran was run with different --samples."""
    for key in sorted(spreads.keys() & base_spreads.keys()):
        if spreads[key] != base_spreads[key]:
            sys.exit(f"quality_pairs: {side} ran {key[0]}@{key[1]} with --samples {spreads[key]}, the base with "
                     f"{base_spreads[key]}: a passkey's depth is spread over --samples, so their sample numbers "
                     "name different prompts")


def paired_difference(base, new):
    """new's answer NLL gap minus base's for one sample: the same as the difference of their
    answer NLLs (the full cache's NLL cancels), which is what a side without gaps has."""
    if new[2] is not None and base[2] is not None:
        return new[2] - base[2]
    if new[1] is not None and base[1] is not None:
        return new[1] - base[1]
    return None


def compare(base, new, base_row, new_row, full_row, out=None, full_runs=None):
    """Prints one block per (task, context) the two rows share; returns them as dicts.
    full_runs, when given, is where the full cache's answers come from instead of the sides."""
    out = out or sys.stdout
    blocks = []
    columns = sorted({(t, n) for (_, t, n) in new if (base_row, t, n) in base and (new_row, t, n) in new})
    for task, context in columns:
        b, n = base[(base_row, task, context)], new[(new_row, task, context)]
        if full_runs is not None:
            full = full_runs.get((full_row, task, context)) or {}
        else:
            full = base.get((full_row, task, context)) or new.get((full_row, task, context)) or {}
        ids = sorted(set(b) & set(n))
        if full:
            ids = [i for i in ids if i in full]
        lost = [i for i in ids if b[i][0] and not n[i][0]]
        gained = [i for i in ids if n[i][0] and not b[i][0]]
        block = {"task": task, "context": context, "n": len(ids), "base": sum(b[i][0] for i in ids),
                 "new": sum(n[i][0] for i in ids), "lost": lost, "gained": gained}
        print(f"{task}@{context}: {len(ids)} samples paired; {base_row} {block['base']}, {new_row} {block['new']}; "
              f"lost {lost or 'none'}, gained {gained or 'none'}", file=out)
        if full:
            right = [i for i in ids if full[i][0]]
            block["full"] = len(right)
            for side, cells in (("base", b), ("new", n)):
                kept = sum(cells[i][0] for i in right)
                block[f"{side}_of_full"] = kept
                lo, hi = wilson(kept, len(right))
                share = kept / len(right) if right else 0.0
                print(f"  {side}: {kept} of the full cache's {len(right)} ({share:.1%} [{lo:.1%}, {hi:.1%}])", file=out)
        diffs = [d for d in (paired_difference(b[i], n[i]) for i in ids) if d is not None]
        if diffs:
            mean = sum(diffs) / len(diffs)
            lo, hi = bootstrap_mean(diffs)
            block["gap_difference"] = [mean, lo, hi]
            print(f"  answer NLL gap, new - base: {mean:+.3f} [{lo:+.3f}, {hi:+.3f}] nats over {len(diffs)}", file=out)
        blocks.append(block)
    if not blocks:
        print(f"no (task, context) has both {base_row} in the base and {new_row} in the new files", file=out)
    return blocks


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--base", required=True, help="glob(s) of the baseline run's --json files")
    ap.add_argument("--new", required=True, help="glob(s) of the compared run's --json files")
    ap.add_argument("--row", default="snapkv/chunk/0.10", help="the new run's row, POLICY/BUDGET as the table prints")
    ap.add_argument("--base-row", help="the base run's row (default: --row)")
    ap.add_argument("--full-row", default="full", help="the full cache's row")
    ap.add_argument("--full-from", help="glob(s) of the files to read the full cache's answers from "
                    "(default: whichever side has them), for sides whose files lack that row")
    a = ap.parse_args(argv)
    base, base_draw, base_isas, base_spreads = load(a.base)
    new, new_draw, new_isas, new_spreads = load(a.new)
    refuse_other_spreads("the new side", new_spreads, base_spreads)
    if base_draw != new_draw:
        sys.exit(f"quality_pairs: the runs are different draws (seed, prompt style, seed hashed): {base_draw} against {new_draw}")
    full_runs = None
    if a.full_from:
        full_runs, full_draw, _, full_spreads = load(a.full_from)
        refuse_other_spreads("--full-from", full_spreads, base_spreads)
        if full_draw != base_draw:
            sys.exit(f"quality_pairs: --full-from is another draw: {full_draw} against {base_draw}")
    if base_isas | new_isas != base_isas & new_isas:
        # Measured on the full cache at 8K (docs/QUALITY.md, forty-second and forty-third sections):
        # the size depends on the task, large where the answer is unsure.
        print(f"quality_pairs: warning: the sides ran on different CPU kernels ({', '.join(sorted(base_isas))} "
              f"against {', '.join(sorted(new_isas))}): their answer NLLs differ by the kernels' rounding too "
              "(a sample's sd at 8K: 0.13 nats on multi-value, 0.007 on passkey)", file=sys.stderr)
    return compare(base, new, a.base_row or a.row, a.row, a.full_row, full_runs=full_runs)


if __name__ == "__main__":
    main()
