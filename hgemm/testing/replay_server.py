"""A scripted OpenAI-compatible chat server on the loopback interface, for demos and tests.

`ReplayServer(steps)` serves `POST /v1/chat/completions` on a free port from a thread and answers each
request with the next `Step`: reply texts, an HTTP error status, a malformed body, or a delay (to exercise
client timeouts); when the script runs out, `then` is repeated. A step with `respond` computes its texts
from the request's messages (a scripted model, such as `hgemm.testing.scripted_model.ParamTweaker`).

- Nothing here reaches beyond 127.0.0.1.
- Token usage is reported as characters / 4, so cost accounting has numbers to add up.
- Every request body is kept in `requests`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Step:
    texts: list[str] = field(default_factory=list)  # one per sample; cycled when n is larger
    status: int = 200
    raw: bytes | None = None  # sent verbatim as the body (malformed JSON, say)
    delay_s: float = 0.0
    finish_reason: str = "stop"
    respond: Callable[[list[dict[str, Any]], int], list[str]] | None = None  # (messages, n) -> texts


def reply(*texts: str) -> Step:
    return Step(texts=list(texts))


class ReplayServer:
    def __init__(self, steps: list[Step], then: Step | None = None):
        self.steps = list(steps)
        self.then = then or Step(texts=["I have no further ideas."])
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="replay-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any]) -> Step:
        with self._lock:
            self.requests.append(body)
            return self.steps.pop(0) if self.steps else self.then

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                return None

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    body = {}
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                step = server._next(body)
                if step.delay_s:
                    time.sleep(step.delay_s)
                if step.raw is not None:
                    self._send(step.status, step.raw)
                elif step.status != 200:
                    error = {
                        "error": {"message": f"scripted HTTP {step.status}", "type": "scripted", "code": None}
                    }
                    self._send(step.status, json.dumps(error).encode())
                else:
                    self._send(200, json.dumps(_completion(body, step)).encode())

            def _send(self, status: int, payload: bytes) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    if status == 429:
                        self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        return Handler


def _completion(body: dict[str, Any], step: Step) -> dict[str, Any]:
    n = int(body.get("n") or 1)
    source = step.respond(list(body.get("messages") or []), n) if step.respond else step.texts
    texts = [source[i % len(source)] if source else "" for i in range(n)]
    prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
    completion_tokens = sum(len(t) for t in texts) // 4
    return {
        "id": f"chatcmpl-replay-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "replay"),
        "choices": [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": step.finish_reason}
            for i, t in enumerate(texts)
        ],
        "usage": {
            "prompt_tokens": prompt_chars // 4,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_chars // 4 + completion_tokens,
        },
    }
