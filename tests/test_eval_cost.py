"""What an evaluation no longer pays for, where no GPU is needed to show it: cache hits alone do not scan the
compile cache."""

from __future__ import annotations

from hgemm.evaluator import compile as compile_mod
from hgemm.evaluator.compile import CompileResult


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
