"""The state root's atomic writes: writers racing on one file (two GPU workers sharing HGEMM_HOME, each writing
the GPU facts or a baseline table) never fail and never leave a torn or stray file."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from hgemm.core.paths import write_text_atomic

WRITES = 300


def _writer(path: str, who: int, start) -> None:
    start.wait()
    for i in range(WRITES):
        write_text_atomic(Path(path), f"{who}:{i}:" + "x" * (1000 + 37 * who) + "\n")


def test_racing_writers_each_leave_a_whole_file(tmp_path):
    target = tmp_path / "facts.json"
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(target), who, start)) for who in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]  # the fixed temporary name used to make a writer fail
    who, _i, body = target.read_text().split(":")
    assert body == "x" * (1000 + 37 * int(who)) + "\n"  # one writer's whole text, not a mix
    assert [f.name for f in tmp_path.iterdir()] == ["facts.json"]  # no temporary file left behind
    assert target.stat().st_mode & 0o777 == 0o644  # readable as a plain write leaves it
