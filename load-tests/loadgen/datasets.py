"""The prompts of a run, built from real text (tests/data/corpus, the novels the quality tests
read) in the served model's tokens:

  short    chat-sized questions about a passage (--input-len tokens, a distribution around it)
  long     long documents (--long-len tokens) with a request to summarize
  bimodal  short ones with a --long-fraction of long ones mixed in at random places: head-of-line
           blocking
  needle   a pass key hidden at a random depth of a haystack, at each of --needle-lengths in turn;
           the answer is checked (needle_found in the result)

Lengths are drawn per request (--len-dist fixed|uniform|lognormal around the mean) and clipped
to the server's context. Every prompt is a list of token ids plus its max_new_tokens."""
import dataclasses
import glob
import math
import os
import random

DEFAULT_CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "corpus")
NEEDLE = " The pass key is {key}. Remember it. {key} is the pass key. "
QUESTION = " What is the pass key? The pass key is"
SHORT_ASK = "\nIn one sentence, what happens in this passage?"
LONG_ASK = "\nSummarize the text above."


@dataclasses.dataclass
class Prompt:
    token_ids: list
    max_new_tokens: int
    kind: str  # short | long | needle
    answer: str = None  # the pass key a needle prompt's output should contain


class Corpus:
    """The corpus as one long token sequence (repeated when a prompt needs more), sliced at
    random offsets."""

    def __init__(self, tokenizer, corpus_dir, rng):
        files = sorted(glob.glob(os.path.join(corpus_dir, "*.txt")))
        if not files:
            raise SystemExit(f"kvload: no *.txt corpus in {corpus_dir}")
        self.ids = []
        for f in files:
            self.ids += tokenizer.encode(open(f, encoding="utf-8").read())
        self.rng = rng

    def slice(self, n):
        if n <= 0:
            return []
        reps = math.ceil(n / len(self.ids)) + 1
        start = self.rng.randrange(len(self.ids))
        return (self.ids * reps)[start:start + n]


def draw_len(mean, dist, range_ratio, rng):
    if dist == "fixed":
        return mean
    if dist == "uniform":
        return rng.randint(max(1, int(mean * (1 - range_ratio))), int(mean * (1 + range_ratio)))
    if dist == "lognormal":  # median `mean`, the spread of real chat lengths
        return max(1, int(rng.lognormvariate(math.log(mean), 0.5)))
    raise ValueError(f"unknown --len-dist {dist}")


class Builder:
    def __init__(self, tokenizer, a):
        self.tok, self.a = tokenizer, a
        self.rng = random.Random(a.seed)
        self.corpus = Corpus(tokenizer, a.corpus or DEFAULT_CORPUS, self.rng)
        self.short_ask = tokenizer.encode(SHORT_ASK)
        self.long_ask = tokenizer.encode(LONG_ASK)

    def _fit(self, n, out):
        """Prompt tokens so that prompt + output fit the server's context."""
        return max(1, min(n, self.tok.max_context - out - 8))

    def short(self):
        out = draw_len(self.a.output_len, self.a.len_dist, self.a.range_ratio, self.rng)
        n = self._fit(draw_len(self.a.input_len, self.a.len_dist, self.a.range_ratio, self.rng), out)
        body = self.corpus.slice(max(1, n - len(self.short_ask))) + self.short_ask
        chat = self.tok.chat(self.tok.decode(body)) if self.a.chat else None
        return Prompt(chat or body, out, "short")

    def long(self):
        out = self.a.output_len
        n = self._fit(draw_len(self.a.long_len, self.a.len_dist, self.a.range_ratio, self.rng), out)
        return Prompt(self.corpus.slice(max(1, n - len(self.long_ask))) + self.long_ask, out, "long")

    def needle(self, length):
        key = str(self.rng.randint(10000, 99999))
        needle = self.tok.encode(NEEDLE.format(key=key))
        question = self.tok.encode(QUESTION)
        out = self.a.needle_output_len
        n = self._fit(length, out) - len(needle) - len(question)
        hay = self.corpus.slice(max(2, n))
        depth = self.rng.randint(0, len(hay))
        return Prompt(hay[:depth] + needle + hay[depth:] + question, out, "needle", answer=key)

    def build(self, n):
        a, out = self.a, []
        for i in range(n):
            if a.dataset == "short":
                out.append(self.short())
            elif a.dataset == "long":
                out.append(self.long())
            elif a.dataset == "bimodal":  # exactly round(n * fraction) long ones (at least one), shuffled later
                n_long = max(1, round(n * a.long_fraction)) if a.long_fraction > 0 else 0
                out.append(self.long() if i < n_long else self.short())
            elif a.dataset == "needle":
                out.append(self.needle(a.needle_lengths[i % len(a.needle_lengths)]))
            else:
                raise SystemExit(f"kvload: unknown --dataset {a.dataset}")
        return out
