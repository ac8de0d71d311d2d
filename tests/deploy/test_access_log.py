#!/usr/bin/env python3
"""The access log with --log-format json: every line is one JSON object, each request gets one
record whose fields (request_id, method, route, model, status, token counts, ttft_ms, total_ms)
are JSON fields with JSON types, its request_id is the X-Request-Id the client got, and neither
the prompt nor the API key nor the query string appears anywhere in the log.

Usage: test_access_log.py BIN_DIR WORK_DIR
"""
import json
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deploy_support import Ggufd, request  # noqa: E402

bin_dir, work_root = sys.argv[1], os.path.abspath(sys.argv[2])
os.makedirs(work_root, exist_ok=True)
tmp = tempfile.mkdtemp(prefix="access-log-", dir=work_root)
KEY = "sk-test-7f3a9c1e5b"
PROMPT = "purple elephants dance at midnight"
AUTH = {"Authorization": f"Bearer {KEY}"}

ggufd = Ggufd(bin_dir, os.path.join(tmp, "ggufd.log"), "--log-format", "json", "--api-key", KEY)
try:
    sent = {}  # request id -> what the record must say
    for stream in (False, True):
        status, payload, headers = request(ggufd.port, "POST", "/v1/chat/completions",
                                           {"messages": [{"role": "user", "content": PROMPT}], "max_tokens": 6,
                                            "stream": stream}, headers=AUTH)
        assert status == 200, payload
        usage = None if stream else json.loads(payload)["usage"]
        sent[headers["x-request-id"]] = ("POST", "/v1/chat/completions", 200, usage)
    status, payload, headers = request(ggufd.port, "POST", "/tokenize?secret=query-text",
                                       {"content": PROMPT}, headers=AUTH)
    assert status == 200, payload
    sent[headers["x-request-id"]] = ("POST", "/tokenize", 200, None)
    status, _, headers = request(ggufd.port, "GET", "/v1/models", headers={"Authorization": "Bearer wrong-key"})
    assert status == 401
    sent[headers["x-request-id"]] = ("GET", "/v1/models", 401, None)
    status, _, headers = request(ggufd.port, "GET", "/no/such/route", headers=AUTH)
    assert status == 404
    sent[headers["x-request-id"]] = ("GET", None, 404, None)
finally:  # stopping flushes every record
    assert ggufd.stop() == 0, "ggufd did not exit cleanly:\n" + ggufd.log_text()

text = ggufd.log_text()
records = []
for line in text.splitlines():
    try:
        obj = json.loads(line)
    except ValueError:
        sys.exit(f"a log line is not JSON: {line!r}")
    assert isinstance(obj, dict) and {"time", "level", "message"} <= obj.keys(), line
    records.append(obj)
access = [r for r in records if r["message"] == "access"]
assert PROMPT not in text and "purple" not in text, "the prompt reached the log"
assert KEY not in text and "wrong-key" not in text, "an API key reached the log"
assert "query-text" not in text, "the query string reached the log"

for rid, (method, route, status, usage) in sent.items():
    mine = [r for r in access if r.get("request_id") == rid]
    assert len(mine) == 1, f"{len(mine)} access records for X-Request-Id {rid}: {access}"
    r = mine[0]
    assert r["method"] == method and r["status"] == status, r
    assert route is None or r["route"] == route, r
    assert isinstance(r["total_ms"], (int, float)) and r["total_ms"] >= 0, r
    for key in ("prompt_tokens", "completion_tokens", "ttft_ms"):
        assert key in r, f"{key} missing from {r}"
    if route == "/v1/chat/completions":
        assert isinstance(r["model"], str) and r["model"], r
        assert isinstance(r["prompt_tokens"], int) and r["prompt_tokens"] > 0, r
        assert isinstance(r["completion_tokens"], int) and 0 < r["completion_tokens"] <= 6, r
        assert isinstance(r["ttft_ms"], (int, float)) and 0 <= r["ttft_ms"] <= r["total_ms"], r
        if usage:
            assert r["prompt_tokens"] == usage["prompt_tokens"], (r, usage)
            assert r["completion_tokens"] == usage["completion_tokens"], (r, usage)
    if status == 401:
        assert r["completion_tokens"] is None and r["ttft_ms"] is None, r
shutil.rmtree(tmp, ignore_errors=True)
print(f"ok: {len(access)} access records, {len(records)} log lines, all JSON")
