"""Helpers shared by the end-to-end tests in this folder (imported from the scripts beside it)."""
import os
import socket
import subprocess
import sys
import time


def conformance_dir(argument):
    """The conformance folder (GGUFD_CONFORMANCE_DIR wins over the argument). When it is missing
    the test fails under CI and is skipped (exit 77, ctest's SKIP_RETURN_CODE) otherwise."""
    conf = os.environ.get("GGUFD_CONFORMANCE_DIR") or argument
    if not os.path.isdir(conf):
        if os.environ.get("CI", "") not in ("", "0", "false"):
            sys.exit(f"conformance data missing at {conf} (CI)")
        print("conformance data not found: skipped")
        sys.exit(77)
    return conf


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ggufd(bin_dir, *args, output=subprocess.PIPE):
    """Starts ggufd on a free port with `args` and waits until it accepts connections; returns
    (process, port). Exits the test with ggufd's output if it stops first."""
    port = free_port()
    proc = subprocess.Popen([os.path.join(bin_dir, "ggufd"), "--port", str(port), *args],
                            stdout=output, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            if proc.poll() is not None:
                said = proc.stdout.read().decode() if proc.stdout else ""
                sys.exit("ggufd exited at start:\n" + said)
            time.sleep(0.05)
    sys.exit("ggufd did not start listening")
