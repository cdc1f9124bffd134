"""The server's state over the run: /metrics scraped every --scrape-interval seconds into a time
series (KV bytes and pages, RSS, running and waiting requests), in a thread so the event loop
sending requests never waits on it. Missing or unreachable metrics give an empty series."""
import math
import threading
import time
import urllib.request

# result key -> Prometheus series (summed over label sets, e.g. the rejection reasons)
SERIES = {
    "kv_bytes_used": "kvserve_kv_bytes_used",
    "kv_pages_used": "kvserve_kv_pages_used",
    "kv_pages_reserved": "kvserve_kv_pages_reserved",
    "kv_pages_total": "kvserve_kv_pages_total",
    "kv_peak_bytes": "kvserve_kv_peak_bytes",
    "rss_bytes": "kvserve_process_resident_memory_bytes",
    "requests_running": "kvserve_num_requests_running",
    "requests_waiting": "kvserve_num_requests_waiting",
    "rejected_total": "kvserve_request_rejected_total",
    "preemptions_total": "kvserve_num_preemptions_total",
}


def parse(text):
    """Prometheus text format -> {metric name: value summed over its label sets}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        name = key.split("{", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            pass
    return out


def scrape_once(metrics_addr, timeout=5):
    with urllib.request.urlopen(f"http://{metrics_addr}/metrics", timeout=timeout) as r:
        m = parse(r.read().decode())
    # NaN/inf would make the result file invalid JSON; a missing value is plotted as a gap instead.
    return {key: m[name] for key, name in SERIES.items() if name in m and math.isfinite(m[name])}


class Scraper:
    def __init__(self, metrics_addr, interval):
        self.addr, self.interval = metrics_addr, interval
        self.samples, self.errors = [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.t0 = time.monotonic()

    def start(self, t0):
        self.t0 = t0
        if self.addr:
            self._thread.start()
        return self

    def stop(self):
        if self.addr and self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            self._sample()  # the state after the last request

    def last(self):
        return self.samples[-1] if self.samples else {}

    def _sample(self):
        try:
            sample = scrape_once(self.addr)
        except OSError:
            self.errors += 1
            return
        sample["t"] = round(time.monotonic() - self.t0, 3)
        self.samples.append(sample)

    def _loop(self):
        # A sample before the first wait, so even a run shorter than the interval has its start.
        while True:
            self._sample()
            if self._stop.wait(self.interval):
                return

    def pool_bytes(self):
        """The KV pool's size in bytes: pages in all times bytes per page, read off a sample that
        had pages in use (the server exports pages and bytes, not the page's size)."""
        for s in reversed(self.samples):
            if s.get("kv_pages_used") and s.get("kv_bytes_used") and s.get("kv_pages_total"):
                return int(s["kv_pages_total"] * s["kv_bytes_used"] / s["kv_pages_used"])
        return None
