"""A runner that misbehaves on request, for tests of the judge's runner client (no GPU).

    python -m scripted_runner BEHAVIOUR --requests FD --replies FD
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time


def main() -> None:
    behaviour = sys.argv[1]
    requests = os.fdopen(int(sys.argv[sys.argv.index("--requests") + 1]), "r")
    replies = os.fdopen(int(sys.argv[sys.argv.index("--replies") + 1]), "w")

    def say(text: str) -> None:
        replies.write(text + "\n")
        replies.flush()

    booted = time.monotonic()
    if json.loads(requests.readline() or "{}").get("op") != "init":  # a runner boots, then waits for init
        return
    if behaviour == "not_ready":
        say(json.dumps({"ready": False, "error": "no GPU"}))
        return
    say(json.dumps({"ready": True, "booted": booted, "cuda_s": 0.25}))
    for line in requests:
        op = json.loads(line)["op"]
        if op == "quit":
            return
        if behaviour == "reads_fd":  # what the descriptor sent with this request holds
            handles = socket.socket(fileno=int(sys.argv[sys.argv.index("--handles") + 1]))
            _msg, fds, _flags, _addr = socket.recv_fds(handles, 16, 4)
            say(json.dumps({"ok": True, "count": len(fds), "text": os.read(fds[0], 100).decode()}))
        elif behaviour == "env":  # what a runner's environment says about its CUDA context
            say(json.dumps({"ok": True, "connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}))
        elif behaviour == "honest":
            say(json.dumps({"ok": True, "rc": 0, "us": [1.5, 2.5]}))
        elif behaviour == "garbage":
            say("this is not json")
        elif behaviour == "list":
            say("[1, 2, 3]")
        elif behaviour == "huge":
            replies.write("x" * (3 << 20))
            replies.flush()
        elif behaviour == "hang":
            time.sleep(3600)
        elif behaviour == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif behaviour == "bad_numbers":
            say(json.dumps({"ok": True, "rc": True, "us": [1.0, float("nan"), -3]}))
        elif behaviour == "cuda_error":
            say(json.dumps({"ok": False, "cuda_error": "cudaErrorIllegalAddress"}))
            return


if __name__ == "__main__":
    main()
