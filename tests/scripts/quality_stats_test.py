#!/usr/bin/env python3
"""scripts/quality_stats.py: the intervals the quality scripts print. Its Wilson interval must be
the one `kvserve eval` writes (else a pooled table would disagree with the runs it pools), so it
is checked against every retrieval cell of the committed docs/quality runs; the bootstrap is
checked for what a regenerated table relies on (same seed, same interval) and for covering the
mean."""
import glob
import json
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from quality_stats import bootstrap_mean, wilson  # noqa: E402


class WilsonTest(unittest.TestCase):
    def test_matches_the_eval_on_every_committed_retrieval_cell(self):
        checked = 0
        for path in sorted(glob.glob(os.path.join(ROOT, "docs", "quality", "*.json"))):
            with open(path) as f:
                cells = json.load(f)["cells"]
            for cell in cells:
                if cell["task"] == "kl" or not cell.get("values"):
                    continue
                right = sum(1 for v in cell["values"] if v >= 0.5)
                lo, hi = wilson(right, cell["n"])
                # 1e-5: the first session's binary used z = 1.96 (n50_4096_passkey_question_at_end,
                # 3e-6 away); a different interval (the normal approximation's) is 1e-2 away.
                self.assertAlmostEqual(lo, cell["ci95"][0], delta=1e-5, msg=f"{path} {cell['policy']}")
                self.assertAlmostEqual(hi, cell["ci95"][1], delta=1e-5, msg=f"{path} {cell['policy']}")
                checked += 1
        self.assertGreater(checked, 500)

    def test_known_values(self):
        lo, hi = wilson(7, 20)  # the SnapKV row: 7 of 20
        self.assertAlmostEqual(lo, 0.1812, places=4)
        self.assertAlmostEqual(hi, 0.5671, places=4)
        self.assertEqual(wilson(0, 0), [0.0, 1.0])
        self.assertEqual(wilson(50, 50)[1], 1.0)
        self.assertGreater(wilson(50, 50)[0], 0.92)

    def test_all_or_none_right_ends_exactly_at_one_or_zero(self):
        # The closed form gives 0.9999999999999999 for 10 of 10, 25 of 25, 27 of 27; a chunk row
        # answering all it was asked was then "above" a prefill_end interval ending at 1.
        for n in range(1, 201):
            self.assertEqual(wilson(n, n)[1], 1.0, msg=n)
            self.assertEqual(wilson(0, n)[0], 0.0, msg=n)


class BootstrapTest(unittest.TestCase):
    def test_seeded_and_covers_the_mean(self):
        values = [0.1 * (i % 7) - 0.2 for i in range(50)]
        mean = sum(values) / len(values)
        lo, hi = bootstrap_mean(values)
        self.assertEqual([lo, hi], bootstrap_mean(values))
        self.assertLess(lo, mean)
        self.assertGreater(hi, mean)
        self.assertNotEqual([lo, hi], bootstrap_mean(values, seed=1))

    def test_one_value_is_its_own_interval(self):
        self.assertEqual(bootstrap_mean([0.25]), [0.25, 0.25])


if __name__ == "__main__":
    unittest.main()
