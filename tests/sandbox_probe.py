"""Run inside the sandbox's runner profile: try what a candidate's host code must not do, print the results
as one JSON line (for tests/test_sandbox.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading


def attempt(fn) -> str:
    try:
        fn()
        return "allowed"
    except PermissionError:
        return "refused"
    except OSError as e:
        return f"refused ({e.errno})"


def main() -> None:
    results = {}
    results["thread"] = attempt(lambda: (t := threading.Thread(target=lambda: None), t.start(), t.join()))
    results["exec"] = attempt(lambda: subprocess.run(["true"], check=True))
    results["fork"] = attempt(lambda: os._exit(0) if os.fork() == 0 else None)
    results["inet_socket"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
    results["unix_socket"] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    results["write_outside"] = attempt(lambda: open(sys.argv[1], "w").write("x"))
    results["write_home"] = attempt(lambda: open(os.path.join(os.environ["HOME"], "f"), "w").write("x"))
    results["secret"] = os.environ.get("OPENAI_API_KEY", "")
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    main()
