"""Helpers shared by the end-to-end tests in this folder (imported from the scripts beside it)."""
import os
import socket
import sys


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
