#!/usr/bin/env python3
"""A stand-in for llama.cpp's llama-server with just what kvload's peer backend uses: POST
/tokenize, /detokenize and streamed /completion (server-sent events, "content" per token,
"stop": true last). Bytes are tokens. It lets CI check kvload's llama-server path without
building llama.cpp. Usage: fake_llama_server.py PORT_FILE (writes the port it listens on)."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the stream ends when the connection closes, as SSE allows

    def log_message(self, *args):
        pass

    def _json(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._json({"status": "ok"})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/tokenize":
            return self._json({"tokens": list(req["content"].encode())})
        if self.path == "/detokenize":
            return self._json({"content": bytes(t % 256 for t in req["tokens"]).decode(errors="replace")})
        if self.path != "/completion":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        n = int(req.get("n_predict", 16))
        for i in range(n):
            time.sleep(0.002)  # a decode step
            event = {"content": "x", "tokens": [120], "stop": i == n - 1}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[1], "w") as f:
        f.write(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
