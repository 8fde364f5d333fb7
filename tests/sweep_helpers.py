"""Stand-in evaluators for distributed sweep tests, importable by Dask worker processes (they inherit the
test's sys.path), and a driver script entry point that runs `hgemm sweep` with them.

- `SlowStandin`: the stand-in evaluator, each call taking `HGEMM_TEST_EVAL_DELAY` seconds (so a kill lands
  mid-sweep); like the real evaluator, it starts a daemon child process when it opens.
- `KillingStandin`: kills its own worker process (SIGKILL) once for each shape named in `HGEMM_TEST_KILL_ONCE`,
  in its evaluate call after the first `HGEMM_TEST_KILL_AFTER` (default 0) of that shape (a marker file in
  `HGEMM_TEST_KILL_DIR` remembers it), and on every evaluation of the shapes in `HGEMM_TEST_KILL_ALWAYS`.
- `python tests/sweep_helpers.py sweep ...` is `hgemm sweep ...` with `KillingStandin` as the evaluator, and SIGINT
  raising KeyboardInterrupt as in a terminal's foreground job.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from standin import StandinEvaluator  # noqa: E402


def _shapes(var: str) -> set[str]:
    return {s.strip() for s in os.environ.get(var, "").split(",") if s.strip()}


class SlowStandin(StandinEvaluator):
    def __init__(self):
        super().__init__()
        # The real evaluator starts its judge as a daemon child process (spawn); a daemonic Dask worker could
        # not: the sweep's workers must be non-daemon processes.
        import multiprocessing as mp

        child = mp.get_context("spawn").Process(target=time.sleep, args=(0,), daemon=True)
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0, "the evaluator's child process did not run"

    def evaluate(self, sources, shape, **kw):
        delay = float(os.environ.get("HGEMM_TEST_EVAL_DELAY", "0") or 0)
        if delay:
            time.sleep(delay)
        return super().evaluate(sources, shape, **kw)


class KillingStandin(SlowStandin):
    def __init__(self):
        super().__init__()
        self.seen: dict[str, int] = {}  # evaluate calls per shape in this worker

    def evaluate(self, sources, shape, **kw):
        M, N, K = shape
        key = f"{M}x{N}x{K}"
        if key in _shapes("HGEMM_TEST_KILL_ALWAYS"):
            os.kill(os.getpid(), signal.SIGKILL)
        if key in _shapes("HGEMM_TEST_KILL_ONCE"):
            marker = Path(os.environ["HGEMM_TEST_KILL_DIR"]) / f"killed-{key}"
            self.seen[key] = self.seen.get(key, 0) + 1
            if not marker.exists() and self.seen[key] > int(os.environ.get("HGEMM_TEST_KILL_AFTER", "0")):
                marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        return super().evaluate(sources, shape, **kw)


def main() -> None:
    from hgemm.agent import cli, commands

    # Ctrl-C as a terminal delivers it: a test runner started as a background job hands its children SIGINT
    # ignored, and the Ctrl-C test would then time a sweep that cannot be interrupted.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    commands.open_evaluator = KillingStandin
    sys.argv = ["hgemm", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()
