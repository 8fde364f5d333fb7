"""Periodic fine-tunes: `hgemm optimize|sweep --finetune-every N` and the cycle they start.

- A new archive best is a (shape, GPU) whose best ranked kernel (offline) is not the one it was when the
  last fine-tune exported its data (every best counts before the first fine-tune). `Trigger.check(archive)`
  starts a cycle once there are N of them, in a separate process (`hgemm finetune cycle`), unless one is
  running; it never waits for it. The cycle's output goes to `$HGEMM_HOME/finetune/cycle-<time>.log`.
- `cycle(...)` holds `$HGEMM_HOME/finetune/cycle.lock` for its whole run (a second cycle exits at once),
  records a `finetunes` row (status running) with the bests it starts from, exports sft or dpo data, fine-tunes
  the base model into `$HGEMM_HOME/finetune/<id>/adapter`, measures the new adapter and the current one (the
  last adopted adapter, else the base model alone) on the validation shapes (`compare.held_out`), and adopts
  the new one only if it is better: `$HGEMM_HOME/finetune/current` then points to it (`--local-adapter`
  takes that path). The row ends adopted, kept or failed, with the data hash and both adapters' metrics.
- Nothing is lost on a crash: the row is committed before the work starts and a failure is recorded on it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hgemm.core.errors import BadInput
from hgemm.core.paths import state_dir
from hgemm.core.record import utc_now
from hgemm.core.shape import Shape

try:
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

DEFAULT_EVALUATOR = "hgemm.agent.commands:open_evaluator"
CYCLE_OPTIONS: list[
    str
] = []  # further `hgemm finetune cycle` options a trigger passes (its defaults otherwise)


def home() -> Path:
    return state_dir("finetune")


def current_link() -> Path:
    return home() / "current"


def bests(archive: Any, gpu: str | None = None) -> dict[str, str]:
    """The best ranked kernel (offline) of every shape and GPU, keyed `MxNxK@GPU`."""
    return {
        f"{r['M']}x{r['N']}x{r['K']}@{r['gpu']}": r["kernel"] for r in archive.leaderboard(gpu=gpu, top=1)
    }


def finetunes(archive: Any) -> list[dict[str, Any]]:
    """Every fine-tune row, oldest first, JSON columns decoded."""
    out = []
    for r in archive.execute("SELECT * FROM finetunes ORDER BY id"):
        d = dict(r)
        for k in ("bests", "metrics"):
            d[k] = json.loads(d[k]) if d[k] else None
        out.append(d)
    return out


def new_bests(archive: Any) -> int:
    """Shapes and GPUs whose best kernel changed since the last fine-tune's export (all, before the first)."""
    last = archive.execute("SELECT bests FROM finetunes ORDER BY id DESC LIMIT 1")
    before = json.loads(last[0]["bests"] or "{}") if last else {}
    return sum(1 for key, kernel in bests(archive).items() if before.get(key) != kernel)


def adopted(archive: Any) -> dict[str, Any] | None:
    """The last adopted fine-tune whose adapter is still there, else None."""
    for row in reversed(finetunes(archive)):
        if row["status"] == "adopted" and row["adapter"] and Path(row["adapter"]).is_dir():
            return row
    return None


@contextlib.contextmanager
def cycle_lock(block: bool = False) -> Iterator[bool]:
    """Yields True while this process holds the cycle lock, False when another process holds it."""
    path = home() / "cycle.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is None:
            yield True
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def running() -> bool:
    with cycle_lock() as mine:
        return not mine


class Trigger:
    """`--finetune-every N`: after each search, start a fine-tune cycle once N new bests are in the archive."""

    def __init__(self, every: int, base_model: str | Path, *, method: str = "sft", archive_path: Path | None = None,
                 evaluator: str | None = None, extra: list[str] | None = None):  # fmt: skip
        if every < 1:
            raise BadInput("--finetune-every must be 1 or more")
        if not base_model:
            raise BadInput(
                "--finetune-every needs a local base model: --local-model DIR or llm.local_model in hgemm.toml"
            )
        if not Path(base_model).is_dir():
            raise BadInput(f"local model directory {base_model} does not exist")
        self.every, self.base_model, self.method = every, str(base_model), method
        self.archive_path, self.extra = archive_path, list(extra or [])
        self.evaluator = evaluator or DEFAULT_EVALUATOR
        self.started: list[subprocess.Popen] = []

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "hgemm.agent.cli", "finetune", "cycle", "--base-model", self.base_model,
                "--method", self.method, "--evaluator", self.evaluator, "--min-new-bests", str(self.every),
                "--quiet"]  # fmt: skip
        if self.archive_path is not None:
            argv += ["--archive", str(self.archive_path)]
        return argv + CYCLE_OPTIONS + self.extra

    def check(self, archive: Any) -> subprocess.Popen | None:
        """Start a cycle if N new bests are waiting and none is running; return its process (else None)."""
        if any(p.poll() is None for p in self.started) or new_bests(archive) < self.every or running():
            return None
        stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        log = open(home() / f"cycle-{stamp}.log", "w")  # noqa: SIM115 (the child owns it)
        with log:
            proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=os.environ.copy())  # fmt: skip
        self.started.append(proc)
        return proc


def load_factory(spec: str) -> Any:
    """`module:callable` → the callable (the evaluator a cycle measures adapters with)."""
    from importlib import import_module

    module, _, name = spec.partition(":")
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError, ValueError) as e:
        raise BadInput(f"--evaluator {spec!r} names no importable callable ({e})") from e


def _start_row(archive: Any, base_model: str, method: str, snapshot: dict[str, str]) -> int:
    row = (None, base_model, method, None, None, json.dumps(snapshot), None, "running", utc_now(), None)
    with archive.writer.transaction() as conn:
        return conn.execute(
            "INSERT INTO finetunes (data_hash, base_model, method, adapter, previous, bests, metrics, status, "
            "started, ended) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        ).lastrowid


def _end_row(archive: Any, fid: int, **fields: Any) -> None:
    fields = {k: json.dumps(v) if k == "metrics" else v for k, v in fields.items()}
    fields["ended"] = utc_now()
    sets = ", ".join(f"{k} = ?" for k in fields)
    with archive.writer.transaction() as conn:
        conn.execute(f"UPDATE finetunes SET {sets} WHERE id = ?", (*fields.values(), fid))


def _point_current(adapter: Path) -> None:
    link = current_link()
    tmp = link.with_name("current.tmp")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(adapter.resolve(), target_is_directory=True)
    os.replace(tmp, link)


def cycle(
    archive: Any,
    base_model: Path,
    evaluator: Any,
    *,
    method: str = "sft",
    steps: int = 200,
    lora_r: int = 16,
    learning_rate: float = 2e-4,
    max_length: int | None = None,
    held_out_shapes: int = 8,
    max_new_tokens: int = 4096,
    device: str | None = None,
    progress: bool = False,
    min_new_bests: int = 0,
) -> dict[str, Any] | None:
    """One fine-tune cycle (see the module docstring); its finetunes row, or None when another is running or
    fewer than `min_new_bests` new bests are waiting (a cycle that ran meanwhile took them)."""
    from hgemm.agent.finetune import compare, train
    from hgemm.agent.finetune import data as ftdata
    from hgemm.agent.llm.local import LocalBackend

    with cycle_lock() as mine:
        if not mine or new_bests(archive) < min_new_bests:
            return None
        fid = _start_row(archive, str(base_model), method, bests(archive))
        work = home() / str(fid)
        try:
            opts = ftdata.Options(fmt=method)
            card = ftdata.export(archive, work / "data" / f"{method}.jsonl", opts, progress=progress)
            adapter = work / "adapter"
            figures = train.run(Path(base_model), work / "data" / f"{method}.jsonl", method, adapter, steps=steps,
                                lora_r=lora_r, learning_rate=learning_rate, max_length=max_length, device=device,
                                progress=progress)  # fmt: skip
            shapes = [Shape(*map(int, s.split("x"))) for s in card["val"]["shapes"][:held_out_shapes]]
            previous = adopted(archive)
            prev_dir = previous["adapter"] if previous else None
            gen = dict(temperature=0.0, max_tokens=max_new_tokens, device=device)
            old = compare.held_out(
                LocalBackend(base_model, adapter_dir=prev_dir, **gen), shapes, evaluator, archive
            )
            new = compare.held_out(
                LocalBackend(base_model, adapter_dir=adapter, **gen), shapes, evaluator, archive
            )
            adopt = compare.better(new, old)
            if adopt:
                _point_current(adapter)
            metrics = {"train": figures, "card": {k: card[k] for k in ("train", "val", "speedup")},
                       "new": new, "current": old}  # fmt: skip
            _end_row(archive, fid, data_hash=card["data_hash"], adapter=str(adapter), previous=prev_dir,
                     metrics=metrics, status="adopted" if adopt else "kept")  # fmt: skip
        except BaseException as e:
            _end_row(archive, fid, metrics={"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                                            "trace": traceback.format_exc()[-4000:]}, status="failed")  # fmt: skip
            raise
        return next(r for r in finetunes(archive) if r["id"] == fid)


def trigger_for(every: int | None, base_model: str | None, method: str = "sft") -> Trigger | None:
    """The commands' `--finetune-every`: None when not given; checked here, before any search starts."""
    return None if every is None else Trigger(every, base_model or "", method=method)


def check_after(trigger: Trigger | None, archive: Any = None) -> subprocess.Popen | None:
    """After a search: let the trigger look at the archive (the default one when none is open)."""
    if trigger is None:
        return None
    if archive is not None:
        return trigger.check(archive)
    from hgemm.archive import Archive

    with Archive() as arc:
        return trigger.check(arc)
