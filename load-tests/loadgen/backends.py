"""How one request is sent and timed. Each backend streams the output so that the time to the
first token and the gaps between tokens are measured on the client, from sending the request,
the way vLLM's bench serve measures them; the result is one Record."""
import dataclasses
import json
import time


@dataclasses.dataclass
class Record:
    kind: str
    prompt_len: int
    start: float = 0.0  # seconds from the run's start when the request was sent
    ok: bool = False
    error_code: str = ""  # a gRPC status name, or FINISH_REASON_ERROR, HTTP_500, TIMEOUT...
    error: str = ""
    ttft: float = 0.0  # seconds
    itls: list = dataclasses.field(default_factory=list)  # seconds between output chunks
    e2el: float = 0.0
    output_len: int = 0
    text: str = ""
    peak_kv_bytes: int = 0
    kv_tokens_kept: int = 0
    kv_entries_evicted: int = 0
    needle_found: bool = None


class _Timer:
    def __init__(self, rec):
        self.rec, self.t0, self.last = rec, time.perf_counter(), None

    def tokens(self, n):
        now = time.perf_counter()
        if self.last is None:
            self.rec.ttft = now - self.t0
        else:
            self.rec.itls.append(now - self.last)
        self.last = now
        self.rec.output_len += n

    def done(self):
        self.rec.e2el = time.perf_counter() - self.t0


class KvserveBackend:
    name = "kvserve"

    def __init__(self, addr, timeout):
        self.addr, self.timeout = addr, timeout
        self.client = None

    async def open(self):
        from kvserve_client import AsyncClient
        self.client = AsyncClient(self.addr, timeout=self.timeout)

    async def close(self):
        await self.client.close()

    async def send(self, prompt, rec, kv, ignore_eos):
        from kvserve_client import KvserveError, pb
        timer, parts = _Timer(rec), []
        try:
            async for msg in self.client.generate_stream(token_ids=prompt.token_ids, max_new_tokens=prompt.max_new_tokens,
                                                         ignore_eos=ignore_eos, kv=kv):
                if msg.HasField("chunk") and msg.chunk.token_ids:
                    timer.tokens(len(msg.chunk.token_ids))
                    parts.append(msg.chunk.text)
                elif msg.HasField("complete"):
                    c = msg.complete
                    parts.append(c.text)
                    u = c.usage
                    rec.peak_kv_bytes, rec.kv_tokens_kept, rec.kv_entries_evicted = (
                        u.peak_kv_bytes, u.kv_tokens_kept, u.kv_entries_evicted)
                    if c.finish_reason in (pb.FINISH_REASON_ERROR, pb.FINISH_REASON_CANCELLED):
                        rec.error_code = pb.FinishReason.Name(c.finish_reason)
                        rec.error = c.error
                    else:
                        rec.ok = True
        except KvserveError as e:
            rec.error_code, rec.error = e.code.name, e.details
        timer.done()
        rec.text = "".join(parts)


class LlamaServerBackend:
    """llama.cpp's llama-server over its HTTP /completion endpoint, streamed (server-sent events:
    `data: {json}` lines, the text in "content", "stop": true on the last)."""
    name = "llama-server"

    def __init__(self, base_url, timeout):
        self.base_url, self.timeout = base_url, timeout
        self.session = None

    async def open(self):
        import aiohttp
        # A connection per request: llama-server drops idle keep-alive connections, and a pooled
        # one it has closed failed a request now and then ("Can not write request body").
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout),
                                             connector=aiohttp.TCPConnector(force_close=True))

    async def close(self):
        await self.session.close()

    async def send(self, prompt, rec, kv, ignore_eos):
        import asyncio
        import aiohttp
        body = {"prompt": prompt.token_ids, "n_predict": prompt.max_new_tokens, "stream": True,
                "ignore_eos": ignore_eos, "cache_prompt": False}
        timer, parts = _Timer(rec), []
        try:
            async with self.session.post(self.base_url + "/completion", json=body) as resp:
                if resp.status != 200:
                    rec.error_code, rec.error = f"HTTP_{resp.status}", (await resp.text())[:500]
                else:
                    async for raw in resp.content:
                        line = raw.decode(errors="replace").strip()
                        if not line.startswith("data:"):
                            continue
                        event = json.loads(line[5:])
                        if event.get("content"):
                            timer.tokens(len(event.get("tokens") or [0]))
                            parts.append(event["content"])
                        if event.get("stop"):
                            rec.ok = True
                            break
        except asyncio.TimeoutError:
            rec.error_code, rec.error = "DEADLINE_EXCEEDED", f"no answer in {self.timeout} s"
        except aiohttp.ClientError as e:
            rec.error_code, rec.error = "UNAVAILABLE", str(e)
        timer.done()
        rec.text = "".join(parts)


class OpenAiBackend:
    """Any OpenAI-compatible server (kvserve's --http-port, vLLM, llama-server's /v1) over
    POST /v1/completions with "stream": true: the prompt as token ids, one SSE chunk per piece of
    text (a chunk may carry several tokens when the server coalesces them, so the output length
    is taken from the usage chunk that "stream_options": {"include_usage": true} asks for).
    kvserve's KV settings go as its kv_* extra body fields, and its usage.kv figures come back."""
    name = "openai"

    def __init__(self, base_url, timeout, model="default", api_key=None):
        self.base_url, self.timeout, self.model = base_url.rstrip("/"), timeout, model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.session = None

    async def open(self):
        import aiohttp
        self.session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout), headers=self.headers)

    async def close(self):
        await self.session.close()

    async def send(self, prompt, rec, kv, ignore_eos):
        import asyncio
        import aiohttp
        body = {"model": self.model, "prompt": prompt.token_ids, "max_tokens": prompt.max_new_tokens,
                "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": ignore_eos,
                # llama-server reuses a cached prompt prefix by default; kvserve has no prefix cache, and
                # repeated runs of one workload would otherwise measure the cache (others ignore the field)
                "cache_prompt": False}
        for k, v in (kv or {}).items():
            body["kv_" + k] = v
        timer, parts, usage, finish = _Timer(rec), [], None, None
        try:
            async with self.session.post(self.base_url + "/v1/completions", json=body) as resp:
                if resp.status != 200:
                    text = await resp.text()
                    try:
                        code = json.loads(text)["error"].get("code") or ""
                    except (ValueError, KeyError, TypeError, AttributeError):
                        code = ""
                    rec.error_code = f"HTTP_{resp.status}" + (f"_{code}" if code else "")
                    rec.error = text[:500]
                else:
                    async for raw in resp.content:
                        line = raw.decode(errors="replace").strip()
                        if not line.startswith("data:"):
                            continue
                        data = line[5:].strip()
                        if data == "[DONE]":
                            break
                        event = json.loads(data)
                        for c in event.get("choices") or []:
                            if c.get("text"):
                                timer.tokens(1)
                                parts.append(c["text"])
                            finish = c.get("finish_reason") or finish
                        if event.get("usage"):
                            usage = event["usage"]
                    if finish in ("error", "cancelled"):
                        rec.error_code = f"FINISH_REASON_{finish.upper()}"
                    else:
                        rec.ok = finish is not None
        except asyncio.TimeoutError:
            rec.error_code, rec.error = "DEADLINE_EXCEEDED", f"no answer in {self.timeout} s"
        except aiohttp.ClientError as e:
            rec.error_code, rec.error = "UNAVAILABLE", str(e)
        timer.done()
        rec.text = "".join(parts)
        if usage:
            rec.output_len = usage.get("completion_tokens", rec.output_len)
            kvu = usage.get("kv") or {}
            rec.peak_kv_bytes = kvu.get("peak_kv_bytes", 0)
            rec.kv_tokens_kept = kvu.get("kv_tokens_kept", 0)
            rec.kv_entries_evicted = kvu.get("kv_entries_evicted", 0)
