#!/usr/bin/env python3
"""The Python client (load-tests/kvserve_client) against a `kvserve serve --api-key-file`: without a
key every call raises Unauthenticated; with api_key= or $KVSERVE_API_KEY, blocking and asyncio calls
and streams go through.

Usage: client_auth_test.py KVSERVE --venv VENV (the venv of load-tests/setup-venv.sh)
"""
import asyncio
import os
import subprocess
import sys
import tempfile
import time

KEY = "charlie-0123456789abcdef"


def main():
    kvserve, venv = sys.argv[1], sys.argv[sys.argv.index("--venv") + 1]
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(os.path.join(venv, "bin", "python"), [os.path.join(venv, "bin", "python")] + sys.argv)
    from kvserve_client import AsyncClient, Client, Unauthenticated

    work = tempfile.mkdtemp(prefix="kvserve-auth-")
    keys, ports = os.path.join(work, "keys"), os.path.join(work, "ports")
    with open(keys, "w") as f:
        f.write(f"# test\n{KEY}\n")
    server = subprocess.Popen([kvserve, "serve", "--model", "random:tiny", "--host", "127.0.0.1", "--port", "0",
                               "--metrics-port", "-1", "--port-file", ports, "--kv-memory", "64M",
                               "--api-key-file", keys], stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not os.path.exists(ports) and time.time() < deadline:
            time.sleep(0.1)
        addr = "127.0.0.1:" + open(ports).read().split("grpc=")[1].split()[0]
        os.environ.pop("KVSERVE_API_KEY", None)
        for _ in range(100):  # until the model is loaded (UNAVAILABLE before), with the key
            try:
                Client(addr, timeout=5, api_key=KEY).model_info()
                break
            except Exception:
                time.sleep(0.2)
        failures = []
        try:
            Client(addr, timeout=10).tokenize("hi")
            failures.append("a call without a key went through")
        except Unauthenticated as e:
            if e.details != "missing or invalid API key":
                failures.append(f"unexpected detail {e.details!r}")
        with Client(addr, timeout=30, api_key=KEY) as c:
            if not c.tokenize("hi"):
                failures.append("tokenize with the key returned nothing")
            if len(list(c.generate_stream("hello", max_new_tokens=3, ignore_eos=True))) < 2:
                failures.append("a stream with the key ended early")
        os.environ["KVSERVE_API_KEY"] = KEY

        async def async_calls():
            async with AsyncClient(addr, timeout=30) as c:
                return (await c.generate("hello", max_new_tokens=3, ignore_eos=True)).token_ids

        if len(asyncio.run(async_calls())) != 3:
            failures.append("an asyncio generate with $KVSERVE_API_KEY did not return 3 tokens")
        for f in failures:
            print("BAD", f)
        print("ok" if not failures else f"{len(failures)} failure(s)")
        return 1 if failures else 0
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
