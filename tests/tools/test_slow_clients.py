#!/usr/bin/env python3
"""Slow clients must not hold the server. Against the real daemon with short timeouts
(--header-timeout 2, --idle-timeout 3) and two I/O threads:

- 16 clients send a request line one byte a second and never finish their headers;
- 8 clients finish one request and then stay connected and silent (idle keep-alive);
- meanwhile a normal client keeps getting answers.

Every slow and idle connection must be closed by the server (read gives EOF or a reset, after
an optional 4xx), and the normal client must be answered while they are still connected. Nothing
here asserts how fast: only that the server closes them, within a bound far above the timeouts.

Usage: test_slow_clients.py BIN_DIR CONFORMANCE_DIR
"""
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import daemon  # noqa: E402
from daemon import request  # noqa: E402

bin_dir = sys.argv[1]
conf = daemon.conformance_dir(sys.argv[2])
model = os.path.join(conf, "models", "stories260K.gguf")
GIVE_UP_S = 60  # far beyond the 2-3 s timeouts, so a loaded machine does not fail the test

proc, port = daemon.start(bin_dir, "--model", f"stories={model}", "--header-timeout", "2",
                          "--idle-timeout", "3", "--io-threads", "2")
closed = {}  # name -> seconds from its start until the server closed it
lock = threading.Lock()


def wait_closed(name, sock, started, dribble=None):
    """Reads until the server closes; `dribble` sends one more byte each second meanwhile."""
    sock.settimeout(1.0)
    i = 0
    while time.monotonic() - started < GIVE_UP_S:
        if dribble is not None and i < len(dribble):
            try:
                sock.sendall(dribble[i:i + 1])
            except OSError:
                break  # reset: closed
            i += 1
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        except OSError:
            break
        if not data:
            break
        # A 408/400 before closing is fine; anything else means the server answered a request
        # that was never complete.
        assert data.startswith(b"HTTP/1.1 4"), (name, data[:80])
    else:
        return
    with lock:
        closed[name] = time.monotonic() - started


def slow_header(name):
    sock = socket.create_connection(("127.0.0.1", port))
    started = time.monotonic()
    line = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    wait_closed(name, sock, started, dribble=line)
    sock.close()


def idle_keep_alive(name):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    sock.settimeout(30)
    reply = b""
    while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
        chunk = sock.recv(4096)
        assert chunk, name + ": closed before answering"
        reply += chunk
    assert reply.startswith(b"HTTP/1.1 200") and b"keep-alive" in reply.lower(), reply[:200]
    wait_closed(name, sock, time.monotonic())
    sock.close()


try:
    threads = [threading.Thread(target=slow_header, args=(f"slow{i}",), name=f"slow{i}") for i in range(16)]
    threads += [threading.Thread(target=idle_keep_alive, args=(f"idle{i}",), name=f"idle{i}") for i in range(8)]
    for t in threads:
        t.start()
    # Normal traffic while the slow ones are connected: answered, and answered before the first
    # slow client is let go (so they were not served one after the other).
    served_while_held = 0
    for _ in range(5):
        status, body, _ = request(port, "POST", "/v1/completions",
                                  {"prompt": "Once upon a time", "max_tokens": 4}, timeout=30)
        assert status == 200, (status, body)
        with lock:
            if len(closed) == 0:
                served_while_held += 1
    assert served_while_held > 0, "no request was served while the slow clients were connected"
    for t in threads:
        t.join()
    missing = [t.name for t in threads if t.name not in closed]
    assert len(closed) == len(threads), f"not closed by the server within {GIVE_UP_S} s: {missing}"
    assert request(port, "GET", "/health")[0] == 200
    times = sorted(closed.values())
    print(f"{len(closed)} slow/idle connections closed by the server after "
          f"{times[0]:.1f}..{times[-1]:.1f} s (median {times[len(times) // 2]:.1f} s); "
          f"{served_while_held}/5 normal requests answered while they were held")
finally:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
assert proc.returncode == 0, proc.returncode
print("ok")
