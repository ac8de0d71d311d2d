#!/usr/bin/env python3
"""ggufd-convert on the conformance folder's Whisper model: GGUF -> whisper.cpp .bin gives the file
whisper.cpp ran (the sha256 its README gives), .bin -> GGUF gives the GGUF back byte for byte, and
ggufd serves the converted file with whisper.cpp's greedy text.

Usage: test_convert.py BIN_DIR CONFORMANCE_DIR
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import uuid

from daemon import conformance_dir, request, start

bin_dir = sys.argv[1]
conf = os.path.join(conformance_dir(sys.argv[2]), "whisper")
convert = os.path.join(bin_dir, "ggufd-convert")
WHISPER_CPP_BIN_SHA256 = "e6ce1e8900c0c58edcedacac8450d75d3c6b9918a05250e6b5321a0baaa29baa"

with tempfile.TemporaryDirectory() as tmp:
    original = os.path.join(conf, "tiny-whisper.gguf")
    bin_path = os.path.join(tmp, "tiny-whisper.bin")
    back = os.path.join(tmp, "tiny-whisper.gguf")
    subprocess.run([convert, "whisper-gguf-to-bin", original, bin_path], check=True)
    with open(bin_path, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == WHISPER_CPP_BIN_SHA256, "not whisper.cpp's .bin"
    subprocess.run([convert, "whisper-bin-to-gguf", bin_path, back, "tiny-whisper-random"],
                   check=True)
    with open(original, "rb") as a, open(back, "rb") as b:
        assert a.read() == b.read(), "the GGUF did not come back byte for byte"
    bad = subprocess.run([convert, "whisper-bin-to-gguf", original, os.path.join(tmp, "x.gguf")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert bad.returncode == 1 and b"magic" in bad.stdout, bad.stdout

    proc, port = start(bin_dir, "--model", f"w={back}", "--threads", "1")
    try:
        with open(os.path.join(conf, "tones.json")) as f:
            want = json.load(f)["text"]
        with open(os.path.join(conf, "tones.wav"), "rb") as f:
            wav = f.read()
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
                f"filename=\"tones.wav\"\r\nContent-Type: audio/wav\r\n\r\n").encode() + wav + (
                f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"language\"\r\n\r\n"
                f"en\r\n--{boundary}--\r\n").encode()
        status, text, _ = request(port, "POST", "/v1/audio/transcriptions", raw=body, headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        assert status == 200, text
        assert json.loads(text)["text"] == want, text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
print("ok")
