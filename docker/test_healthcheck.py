#!/usr/bin/env python3
"""Checks docker/healthcheck.sh against a stand-in for ggufd: exit 0 for 200, 1 for 503, for a
port nobody listens on, and for a server that never answers (within its 5 s read limit)."""
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "healthcheck.sh")
state = {"status": 200, "paths": []}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        state["paths"].append(self.path)
        body = b'{"status":"ok"}' if state["status"] == 200 else b'{"status":"loading"}'
        self.send_response(state["status"])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def run(port):
    env = dict(os.environ, GGUFD_PORT=str(port))
    return subprocess.run(["bash", SCRIPT], env=env, timeout=20).returncode


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    failures = []

    def expect(what, got, want):
        print(f"{what}: exit {got} (want {want})")
        if got != want:
            failures.append(what)

    expect("200 ready", run(port), 0)
    if state["paths"] != ["/health"]:
        failures.append(f"asked for {state['paths']}, not /health")
    state["status"] = 503
    expect("503 loading", run(port), 1)
    server.shutdown()
    server.server_close()

    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed_port = free.getsockname()[1]
    free.close()
    expect("nothing listening", run(closed_port), 1)

    silent = socket.socket()  # accepts connections (backlog) but never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    expect("never answers", run(silent.getsockname()[1]), 1)
    silent.close()

    print("FAILED: " + ", ".join(failures) if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
