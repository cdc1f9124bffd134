"""The two confidence intervals every quality script reports, in one place so that the tables
the scripts print agree with each other and with `kvserve eval`, which computes the same
intervals in C++ (engine/offline/eval_stats.cc) for its own output."""
import math
import random

# The normal distribution's 97.5% quantile: a two-sided 95% interval, as the eval prints.
Z95 = 1.959963984540054


def wilson(successes, n, z=Z95):
    """Wilson score interval for an accuracy of successes/n; [0, 1] when nothing was scored."""
    if n == 0:
        return [0.0, 1.0]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At p = 1 (or 0) the upper (lower) end is exactly 1 (0); the closed form lands a rounding
    # error short for some n (10 of 10: 0.9999999999999999), and a row of 10 right answers
    # would read as above an interval ending at 1.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return [lo, hi]


def bootstrap_mean(values, resamples=5000, seed=0):
    """Percentile bootstrap interval of the mean; seeded, so a regenerated table is byte-equal."""
    if len(values) == 1:
        return [values[0], values[0]]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(values) for _ in values) / len(values) for _ in range(resamples))
    return [means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]]
