"""What an evaluation no longer pays for, where no GPU is needed to show it: one memset clears a sample's
witness counters, all guard bands are compared at once, and cache hits alone do not scan the compile cache."""

from __future__ import annotations

import torch
from hgemm.evaluator import compile as compile_mod
from hgemm.evaluator.arena import band_index, first_changed
from hgemm.evaluator.compile import CompileResult
from hgemm.evaluator.runner import Buffers, derive, witnesses


class Recorder:
    def __init__(self):
        self.calls = []

    def memset_async(self, ptr, value, nbytes, stream):
        self.calls.append(("memset", ptr, nbytes))

    def witness(self, c, rows, cols, seed, y, y2, bad, stream):
        self.calls.append(("witness", c, seed, y, y2, bad))


def test_one_memset_clears_a_samples_witness_counters():
    layout = {"wbad": [0, 8 * 40 * 3], "wy": [10_000, 0], "wy2": [20_000, 0],
              **{f"C{i}": [30_000 + 1000 * i, 0] for i in range(3)}}  # fmt: skip
    buf, rec = Buffers(1 << 20, layout), Recorder()
    witnesses(rec, rec, buf, 8, 8, 3, 5, 77, 0)
    assert rec.calls[0] == ("memset", buf["wbad"] + 8 * 15, 24)
    launches = rec.calls[1:]
    assert [c[1] for c in launches] == [buf["C0"], buf["C1"], buf["C2"]]
    assert {c[2] for c in launches} == {derive(77, 3)}
    assert [c[5] for c in launches] == [buf["wbad"] + 8 * i for i in (15, 16, 17)]
    assert [c[3] for c in launches] == [buf["wy"] + 8 * 8 * i for i in (15, 16, 17)]


def test_all_guard_bands_are_compared_at_once_as_one_by_one():
    gen = torch.Generator().manual_seed(5)
    width = 16
    data = torch.randint(0, 256, (4096,), dtype=torch.uint8, generator=gen)
    starts = torch.tensor([7, 100, 1000, 1016, 3000])
    index = band_index(starts, width)
    saved = data[index].clone()
    assert first_changed(data, index, saved, width) is None
    for band, offset in [(3, 0), (0, 15), (4, 7), (2, 15)]:
        broken = data.clone()
        broken[int(starts[band]) + offset] ^= 1
        one_by_one = next(i for i, s in enumerate(starts.tolist())
                          if not torch.equal(broken[s : s + width], saved[i * width : (i + 1) * width]))  # fmt: skip
        assert first_changed(broken, index, saved, width) == band == one_by_one
    broken = data.clone()
    broken[3001] ^= 0xFF  # two bands changed: the earlier is named
    broken[1010] ^= 0xFF
    assert first_changed(broken, index, saved, width) == 2


def test_cache_hits_alone_do_not_scan_the_compile_cache(monkeypatch):
    scans = []
    monkeypatch.setattr(compile_mod, "find_nvcc", lambda: "nvcc")
    monkeypatch.setattr(compile_mod.audit, "find_objdump", lambda: "objdump")
    monkeypatch.setattr(compile_mod.compile_cache, "evict", lambda root: scans.append(root))
    hits = {"a": True, "b": True, "c": False}
    monkeypatch.setattr(compile_mod, "compile_source",
                        lambda s, *a: CompileResult(s, True, "/x.so", "", cached=hits[s]))  # fmt: skip
    assert [r.kernel_hash for r in compile_mod.compile_sources(["a", "b"])] == ["a", "b"]
    assert scans == []
    compile_mod.compile_sources(["a", "c"])
    assert len(scans) == 1
