"""The open loop: requests are sent at their arrival times whether or not earlier ones have
finished (at most --max-concurrency in flight; the rest wait for a slot), a progress line is
printed every --progress-interval seconds, and every request ends in a Record, failed or not."""
import asyncio
import sys
import time

from .arrivals import gaps
from .backends import Record


def _mb(x):
    return f"{x / 1e6:.1f}MB" if x is not None else "-"


class Run:
    def __init__(self, backend, prompts, a, kv_for, scraper):
        self.backend, self.prompts, self.a, self.kv_for, self.scraper = backend, prompts, a, kv_for, scraper
        self.records, self.in_flight, self.max_in_flight = [], 0, 0
        self.t0 = 0.0

    async def _one(self, prompt, sem):
        rec = Record(kind=prompt.kind, prompt_len=len(prompt.token_ids))
        async with sem:
            rec.start = time.monotonic() - self.t0
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await self.backend.send(prompt, rec, self.kv_for(prompt), self.a.ignore_eos)
            except Exception as e:  # a bug or a transport failure must cost one request, not the run
                rec.ok, rec.error_code, rec.error = False, type(e).__name__, str(e)[:500]
            finally:
                self.in_flight -= 1
        if prompt.answer is not None:
            rec.needle_found = prompt.answer in rec.text
        self.records.append(rec)

    def progress(self):
        done = len(self.records)
        failed = sum(not r.ok for r in self.records)
        elapsed = time.monotonic() - self.t0
        out_tokens = sum(r.output_len for r in self.records)
        s = self.scraper.last()
        print(f"[kvload {elapsed:7.1f}s] done {done}/{len(self.prompts)} failed {failed} in-flight {self.in_flight} "
              f"| {done / elapsed if elapsed else 0:.2f} req/s {out_tokens / elapsed if elapsed else 0:.1f} out tok/s "
              f"| server kv {_mb(s.get('kv_bytes_used'))} rss {_mb(s.get('rss_bytes'))} "
              f"running {s.get('requests_running', '-'):} waiting {s.get('requests_waiting', '-')}",
              file=sys.stderr, flush=True)

    async def _ticker(self):
        while True:
            await asyncio.sleep(self.a.progress_interval)
            self.progress()

    async def run(self):
        a = self.a
        sem = asyncio.Semaphore(a.max_concurrency or len(self.prompts) or 1)
        self.t0 = time.monotonic()
        self.scraper.start(self.t0)
        ticker = asyncio.create_task(self._ticker())
        tasks, wait = [], gaps(a.request_rate, a.burstiness, a.seed)
        try:
            for prompt in self.prompts:
                if a.duration and time.monotonic() - self.t0 >= a.duration:
                    break  # --duration: stop sending; what was sent still finishes
                tasks.append(asyncio.create_task(self._one(prompt, sem)))
                await asyncio.sleep(next(wait))
            await asyncio.gather(*tasks)
        finally:
            ticker.cancel()
            self.scraper.stop()
        self.duration = time.monotonic() - self.t0
        self.progress()
        return self.records
