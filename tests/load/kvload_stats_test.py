#!/usr/bin/env python3
"""kvload's arithmetic without a server: percentiles, TPOT, goodput against SLOs, the vLLM
summary of a hand-made run, and the arrival process's rate and burstiness. Standard library
only, so it runs under any python3."""
import math
import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "load-tests"))
from loadgen import arrivals, stats  # noqa: E402
from loadgen.backends import Record  # noqa: E402


def rec(ttft, e2el, out, ok=True, itls=None, prompt=100, code=""):
    return Record(kind="short", prompt_len=prompt, ok=ok, ttft=ttft, e2el=e2el, output_len=out,
                  itls=itls or [], error_code=code)


class Stats(unittest.TestCase):
    def test_percentile_interpolates_like_numpy(self):
        self.assertEqual(stats.percentile([1, 2, 3, 4], 50), 2.5)
        self.assertAlmostEqual(stats.percentile(list(range(1, 101)), 99), 99.01)
        self.assertEqual(stats.percentile([7], 90), 7)
        self.assertEqual(stats.percentile([], 50), 0.0)

    def test_tpot_excludes_the_first_token(self):
        self.assertAlmostEqual(stats.tpot(rec(0.5, 1.5, 11)), 0.1)
        self.assertIsNone(stats.tpot(rec(0.5, 0.5, 1)))

    def test_summary_counts_and_goodput(self):
        records = [rec(0.1, 1.1, 11, itls=[0.1] * 10), rec(0.3, 2.3, 11, itls=[0.2] * 10),
                   rec(0, 0.01, 0, ok=False, code="RESOURCE_EXHAUSTED")]
        s = stats.summarize(records, 2.0, stats.parse_goodput(["ttft:200", "tpot:150"]))
        self.assertEqual((s["completed"], s["failed"]), (2, 1))
        self.assertEqual((s["total_input_tokens"], s["total_output_tokens"]), (200, 22))
        self.assertAlmostEqual(s["request_throughput"], 1.0)
        self.assertAlmostEqual(s["request_goodput"], 0.5)  # only the first meets TTFT <= 200 ms
        self.assertAlmostEqual(s["mean_ttft_ms"], 200.0)
        self.assertAlmostEqual(s["median_itl_ms"], 150.0)
        self.assertAlmostEqual(s["p99_e2el_ms"], 1100 + 0.99 * 1200)
        self.assertIsNone(stats.summarize(records, 2.0, {})["request_goodput"])
        k = stats.kvserve_fields(records)
        self.assertEqual((k["rejected"], k["errors_by_code"]), (1, {"RESOURCE_EXHAUSTED": 1}))

    def test_goodput_spec_is_checked(self):
        with self.assertRaises(SystemExit):
            stats.parse_goodput(["latency:5"])


class Arrivals(unittest.TestCase):
    def gaps(self, rate, burstiness, n=20000):
        g = arrivals.gaps(rate, burstiness, seed=1)
        return [next(g) for _ in range(n)]

    def test_poisson_mean_and_spread(self):
        x = self.gaps(4.0, 1.0)
        self.assertAlmostEqual(statistics.fmean(x), 0.25, delta=0.01)
        self.assertAlmostEqual(statistics.pstdev(x) / statistics.fmean(x), 1.0, delta=0.05)  # exponential: cv 1

    def test_burstiness_keeps_the_rate(self):
        x = self.gaps(4.0, 0.25)
        self.assertAlmostEqual(statistics.fmean(x), 0.25, delta=0.02)
        self.assertAlmostEqual(statistics.pstdev(x) / statistics.fmean(x), 2.0, delta=0.2)  # gamma: cv 1/sqrt(k)

    def test_infinite_rate_sends_at_once(self):
        self.assertEqual(self.gaps(math.inf, 1.0, 5), [0.0] * 5)


if __name__ == "__main__":
    unittest.main()
