"""When requests are sent: gaps between arrivals for an open loop.

With --burstiness 1 the gaps are exponential (a Poisson process at --request-rate); otherwise
gamma with shape = burstiness and the same mean, so < 1 is burstier and > 1 more regular, as
vLLM's bench serve defines it. An infinite rate sends everything at once."""
import math
import random


def gaps(rate, burstiness, seed):
    """Yields seconds to wait before each next request."""
    if burstiness <= 0:
        raise ValueError("--burstiness must be > 0")
    rng = random.Random(seed)
    while True:
        if math.isinf(rate):
            yield 0.0
        else:
            yield rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
