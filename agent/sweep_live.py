"""The progress of a distributed sweep: done/total, ETA, each GPU's current shape, the running geomean
speedup per mode. A Rich live table on a terminal; one plain line per event otherwise (logs, CI)."""

from __future__ import annotations

import threading
import time
from typing import Any

from hgemm.agent.sweep_report import _fmt, geomean

from hgemm.core.record import MODES
from hgemm.core.shape import Shape


class SweepDisplay:
    def __init__(
        self, total: int, done_rows: list[dict[str, Any]], *, enabled: bool = True, console: Any = None
    ):
        from rich.console import Console

        self.total = total
        self.rows = list(done_rows)  # every finished row, resumed ones included
        self.resumed = len(self.rows)
        self.searched = 0
        self.started = time.monotonic()
        self.current: dict[str, tuple[Shape, str, float] | None] = {}
        self.notes: list[str] = []
        self.enabled = enabled
        self.console = console or Console(stderr=True)
        self.live: Any = None
        self._lock = threading.Lock()

    # -- events (from the slot threads) --
    def start(self, slot: str, shape: Shape, pin: str = "") -> None:
        with self._lock:
            self.current[slot] = (shape, pin, time.monotonic())
        self._plain(f"[{slot}] start {shape}")

    def finish(self, slot: str, row: dict[str, Any]) -> None:
        with self._lock:
            self.rows.append(row)
            self.searched += 1
            self.current[slot] = None
        speed = " ".join(f"{m} {_fmt(row.get(f'{m}_speedup_best'))}x" for m in MODES)
        self._plain(f"[{len(self.rows)}/{self.total}] [{slot}] {row['M']}x{row['N']}x{row['K']} {row['status']} "
                    f"{row.get('family') or '-'} {speed}")  # fmt: skip

    def idle(self, slot: str) -> None:
        with self._lock:
            self.current[slot] = None

    def note(self, text: str) -> None:
        with self._lock:
            self.notes = (self.notes + [text])[-4:]
        self._plain(text)

    # -- figures --
    def eta_seconds(self, slots: int) -> float | None:
        if not self.searched:
            return None
        per_shape = (
            time.monotonic() - self.started
        ) / self.searched  # wall time per shape, all slots together
        return per_shape * (self.total - len(self.rows))

    def geomeans(self) -> dict[str, float | None]:
        return {m: geomean([r.get(f"{m}_speedup_best") for r in self.rows]) for m in MODES}

    def headline(self) -> str:
        eta = self.eta_seconds(max(1, len(self.current)))
        eta_text = "—" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))
        g = self.geomeans()
        return (f"{len(self.rows)}/{self.total} shapes ({self.resumed} resumed), ETA {eta_text}, "
                + ", ".join(f"{m} geomean {_fmt(g[m])}×" for m in MODES))  # fmt: skip

    # -- rendering --
    def _plain(self, text: str) -> None:
        if self.enabled and self.live is None:
            print(text, flush=True)

    def render(self) -> Any:
        from rich.console import Group
        from rich.table import Table

        table = Table("worker", "GPU", "shape", "for", box=None, pad_edge=False)
        now = time.monotonic()
        with self._lock:
            for slot in sorted(self.current):
                cur = self.current[slot]
                if cur is None:
                    table.add_row(slot, "", "idle", "")
                else:
                    shape, pin, since = cur
                    table.add_row(slot, pin, str(shape), f"{now - since:.0f} s")
            notes = list(self.notes)
        return Group(self.headline(), table, *notes)

    def refresh(self) -> None:
        if self.live is not None:
            self.live.update(self.render())

    def __enter__(self) -> SweepDisplay:
        if self.enabled and self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self.render(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        elif self.enabled:
            print(self.headline(), flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None
        if self.enabled:
            print(self.headline(), flush=True)
