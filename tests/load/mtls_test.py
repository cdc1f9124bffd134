#!/usr/bin/env python3
"""Mutual TLS end to end: `kvserve serve --tls-cert --tls-key --tls-client-ca --metrics-tls
--metrics-api-key-file` on random:tiny, driven by the Python client (load-tests/kvserve_client)
and urllib over HTTPS.

gRPC: a client certificate the CA signed generates; no certificate, or one from another CA,
gets no call through. Metrics: HTTPS with the client certificate and the bearer token scrapes;
without the token it is 401; without a client certificate the handshake fails; plain HTTP
gets nothing. /ready needs the certificate but no token (probes).

Usage: mtls_test.py KVSERVE --venv VENV (the venv of load-tests/setup-venv.sh)
"""
import os
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TOKEN = "scraper-0123456789abcdef"


def make_certificates(d):
    def run(cmd):
        subprocess.run(cmd, cwd=d, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for ca in ("ca", "other_ca"):
        run(f"openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN={ca} -keyout {ca}.key -out {ca}.crt")
    for name, ca in (("server", "ca"), ("client", "ca"), ("rogue", "other_ca")):
        run(f"openssl req -newkey rsa:2048 -nodes -subj /CN={name} -keyout {name}.key -out {name}.csr")
        run(f"openssl x509 -req -in {name}.csr -CA {ca}.crt -CAkey {ca}.key -CAcreateserial -days 2 -sha256 "
            f"-out {name}.crt -extfile ext.cnf")


def read(d, name):
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


def main():
    kvserve, venv = sys.argv[1], sys.argv[sys.argv.index("--venv") + 1]
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(os.path.join(venv, "bin", "python"), [os.path.join(venv, "bin", "python")] + sys.argv)
    from kvserve_client import Client, KvserveError

    d = tempfile.mkdtemp(prefix="kvserve-mtls-")
    make_certificates(d)
    with open(os.path.join(d, "metrics_keys"), "w") as f:
        f.write(f"# scrapers\n{TOKEN}\n")
    ports = os.path.join(d, "ports")
    server = subprocess.Popen(
        [kvserve, "serve", "--model", "random:tiny", "--host", "127.0.0.1", "--port", "0", "--metrics-host",
         "127.0.0.1", "--metrics-port", "0", "--port-file", ports, "--kv-memory", "64M",
         "--tls-cert", os.path.join(d, "server.crt"), "--tls-key", os.path.join(d, "server.key"),
         "--tls-client-ca", os.path.join(d, "ca.crt"), "--metrics-tls",
         "--metrics-api-key-file", os.path.join(d, "metrics_keys")], stderr=open(os.path.join(d, "log"), "w"))
    failures = []
    try:
        deadline = time.time() + 60
        while not os.path.exists(ports) and time.time() < deadline:
            time.sleep(0.1)
        text = open(ports).read()
        addr = "127.0.0.1:" + text.split("grpc=")[1].split()[0]
        mport = int(text.split("metrics=")[1].split()[0])

        def client(cert):
            kw = dict(tls=True, root_certificates=read(d, "ca.crt"))
            if cert:
                kw.update(private_key=read(d, f"{cert}.key"), certificate_chain=read(d, f"{cert}.crt"))
            return Client(addr, timeout=10, **kw)

        good = client("client")
        for _ in range(100):  # until the model is loaded
            try:
                good.model_info()
                break
            except KvserveError:
                time.sleep(0.2)
        if len(good.generate("hello", max_new_tokens=3, ignore_eos=True).token_ids) != 3:
            failures.append("a client with a certificate the CA signed did not get 3 tokens")
        for cert in (None, "rogue"):
            try:
                client(cert).model_info(timeout=5)
                failures.append(f"a gRPC client with {cert or 'no'} certificate got an answer")
            except KvserveError:
                pass

        def scrape(path, cert, token):
            ctx = ssl.create_default_context(cafile=os.path.join(d, "ca.crt"))
            if cert:
                ctx.load_cert_chain(os.path.join(d, f"{cert}.crt"), os.path.join(d, f"{cert}.key"))
            req = urllib.request.Request(f"https://127.0.0.1:{mport}{path}")
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""
            except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
                return None, str(e)

        status, body = scrape("/metrics", "client", TOKEN)
        if status != 200 or "kvserve_kv_pages_total" not in body:
            failures.append(f"a scrape with the certificate and the token: {status}")
        status, _ = scrape("/metrics", "client", None)
        if status != 401:
            failures.append(f"a scrape without the token: {status} (want 401)")
        status, _ = scrape("/ready", "client", None)
        if status != 200:
            failures.append(f"/ready with the certificate and no token: {status} (want 200)")
        for cert in (None, "rogue"):
            status, _ = scrape("/metrics", cert, TOKEN)
            if status is not None:
                failures.append(f"a scrape with {cert or 'no'} client certificate got HTTP {status}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read()
            failures.append("plain HTTP got the metrics")
        except Exception:
            pass
        status, body = scrape("/metrics", "client", TOKEN)
        failed = [l for l in body.splitlines() if l.startswith("kvserve_auth_failures_total")]
        if not failed or float(failed[0].split()[-1]) < 1:
            failures.append(f"the refused scrape was not counted: {failed}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
