"""Inside the worker process: inputs with guard bands, the candidate call, and the correctness suite.

Invariants the checks enforce (each failure maps to one FAILURE_KINDS entry):
- C is poisoned with a NaN of a private bit pattern before every call: any element still
  holding that pattern afterwards was never written (`unwritten_output`).
- Guard bands around A, B, Bt, C and the workspace hold random bits that must survive
  (`out_of_bounds`); A, B, Bt must come back bit-identical (`input_modified`).
- The workspace is filled with garbage before every call (contents undefined on entry).
- The result read right after an event recorded on `stream` completes must equal the
  result once the whole device is idle (`incomplete_on_event`).
- Error against a float64 reference must stay within 2x cuBLAS's own error on the same
  inputs plus a small floor (`incorrect`), over fresh draws: randn, uniform, and a
  positive large-magnitude draw that exposes fp16 accumulation.
- A graph replay at the same pointers with new values must give the new answer
  (`stale_result`); a call that cannot be captured is `not_capturable`.
"""

from __future__ import annotations

import ctypes
import math

import torch

from hgemm.core.shape import Shape

POISON = 0x7E5A  # fp16 NaN with a payload kernels do not produce
GUARD = 4096  # elements of guard band on each side of every buffer
WORKSPACE_BYTES = 64 << 20
FRO_FLOOR = 5e-5  # allowed beyond 2x cuBLAS, relative Frobenius error
MAX_FLOOR = 2.0**-11  # allowed beyond 2x cuBLAS, max error relative to max |ref|


class CheckFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Guarded:
    """A flat device buffer with random guard bands on both sides; `.view` is the usable part."""

    def __init__(self, numel: int, dtype: torch.dtype, gen: torch.Generator):
        self.raw = torch.empty(numel + 2 * GUARD, dtype=dtype, device="cuda")
        bits = self.raw.view(torch.int16) if dtype == torch.float16 else self.raw.view(torch.uint8)
        lo, hi = (-(2**15), 2**15 - 1) if dtype == torch.float16 else (0, 256)
        bits.random_(lo, hi, generator=gen)
        self.view = self.raw[GUARD : GUARD + numel]
        self.bits = bits
        self.front = bits[:GUARD].clone()
        self.back = bits[GUARD + numel :].clone()

    def intact(self) -> bool:
        """Bitwise comparison (the random guard bits include NaN patterns)."""
        n = self.bits.numel()
        return bool(torch.equal(self.bits[:GUARD], self.front) and torch.equal(self.bits[n - GUARD :], self.back))


class Candidate:
    """A loaded candidate library: `call(...)` enqueues one hgemm_run on the given stream."""

    def __init__(self, lib_path: str):
        self.lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_LOCAL)
        self.run = self.lib.hgemm_run
        self.run.restype = ctypes.c_int
        vp, ci = ctypes.c_void_p, ctypes.c_int
        self.run.argtypes = [vp, vp, vp, vp, ci, ci, ci, vp, ctypes.c_size_t, vp]
        self.supports_fn = getattr(self.lib, "hgemm_supports", None)
        if self.supports_fn is not None:
            self.supports_fn.restype = ctypes.c_int
            self.supports_fn.argtypes = [ci, ci, ci]

    def supports(self, shape: Shape) -> bool:
        return True if self.supports_fn is None else bool(self.supports_fn(*shape))


class Problem:
    """One shape's buffers, reused for every candidate (fresh values for every check)."""

    def __init__(self, shape: Shape, seed: int = 0):
        M, N, K = shape
        self.shape, self.M, self.N, self.K = shape, M, N, K
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.A = Guarded(M * K, torch.float16, self.gen)
        self.B = Guarded(K * N, torch.float16, self.gen)
        self.Bt = Guarded(N * K, torch.float16, self.gen)
        self.C = Guarded(M * N, torch.float16, self.gen)
        self.W = Guarded(WORKSPACE_BYTES, torch.uint8, self.gen)
        self.a = self.A.view.view(M, K)
        self.b = self.B.view.view(K, N)
        self.bt = self.Bt.view.view(N, K)
        self.c = self.C.view.view(M, N)
        self.stream = torch.cuda.Stream()  # non-blocking: work on the legacy stream is not ordered with it
        self.draws = 0

    # -- inputs -------------------------------------------------------------------------------
    def draw(self, kind: str) -> torch.Tensor:
        """Fill A, B (and Bt = B^T) in place with fresh values; return the float64 reference."""
        self.draws += 1
        return draw_into(self.a, self.b, self.bt, kind, self.gen)

    def prepare_call(self) -> None:
        """Poison C and fill the workspace with garbage, on the problem's stream."""
        with torch.cuda.stream(self.stream):
            self.c.view(torch.int16).fill_(POISON)
            self.W.view.random_(0, 256, generator=None)

    def launch(self, cand: Candidate) -> int:
        return cand.run(
            self.a.data_ptr(), self.b.data_ptr(), self.bt.data_ptr(), self.c.data_ptr(),
            self.M, self.N, self.K, self.W.view.data_ptr(), WORKSPACE_BYTES, self.stream.cuda_stream,
        )

    # -- checks -------------------------------------------------------------------------------
    def snapshot_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.a.clone(), self.b.clone(), self.bt.clone()

    def verify(self, ref: torch.Tensor, inputs: tuple[torch.Tensor, ...], ref_err: tuple[float, float],
               label: str, previous: torch.Tensor | None = None) -> tuple[float, float]:
        """Raise CheckFailed unless C holds a complete, correct answer; return (fro, max) errors."""
        broken = next((name for name, buf in (("A", self.A), ("B", self.B), ("Bt", self.Bt), ("C", self.C),
                                              ("workspace", self.W)) if not buf.intact()), None)
        return verify_result(self.c, ref, ref_err, label, previous, (self.a, self.b, self.bt), inputs, broken)


def verify_result(c: torch.Tensor, ref: torch.Tensor, ref_err: tuple[float, float], label: str,
                  previous: torch.Tensor | None, inputs_now: tuple[torch.Tensor, ...],
                  inputs_before: tuple[torch.Tensor, ...], broken_guard: str | None) -> tuple[float, float]:
    """Raise CheckFailed unless `c` is a complete, correct answer for `ref`, the inputs are unchanged and
    no guard band was touched; return the (fro, max) errors. `previous` is the last verified output."""
    unwritten = int((c.view(torch.int16) == POISON).sum())
    if unwritten:
        if previous is not None and unwritten == c.numel():
            raise CheckFailed("stale_result", f"{label}: a repeated call at the same pointers wrote nothing "
                              "(work skipped, cached, or left outside the graph)")
        raise CheckFailed("unwritten_output", f"{label}: {unwritten} of {c.numel()} elements of C never written")
    if broken_guard:
        raise CheckFailed("out_of_bounds", f"{label}: guard band around {broken_guard} overwritten")
    for name, now, before in zip(("A", "B", "Bt"), inputs_now, inputs_before):
        if not torch.equal(now.view(torch.int16), before.view(torch.int16)):
            raise CheckFailed("input_modified", f"{label}: input {name} was modified")
    if not bool(torch.isfinite(c).all()):
        bad = int((~torch.isfinite(c)).sum())
        raise CheckFailed("incorrect", f"{label}: {bad} elements of C are NaN or Inf")
    fro, mx = errors(c, ref)
    fro_bound = 2 * ref_err[0] + FRO_FLOOR
    max_bound = 2 * ref_err[1] + MAX_FLOOR
    if fro > fro_bound or mx > max_bound:
        if previous is not None and torch.equal(c, previous):
            raise CheckFailed("stale_result", f"{label}: C holds the previous call's result after new inputs")
        raise CheckFailed(
            "incorrect",
            f"{label}: relative error {fro:.3g} (bound {fro_bound:.3g}), max error {mx:.3g} "
            f"(bound {max_bound:.3g}); cuBLAS on the same inputs: {ref_err[0]:.3g}, {ref_err[1]:.3g}",
        )
    return fro, mx


def draw_into(a: torch.Tensor, b: torch.Tensor, bt: torch.Tensor | None, kind: str,
              gen: torch.Generator) -> torch.Tensor:
    """Fill a (M×K), b (K×N) and bt (= bᵀ, when given) with a fresh draw of `kind`; return a·b in float64.

    randn and uniform are the usual draws; `large` is positive with row sums near 8000, where fp16
    accumulation loses several bits."""
    (M, K), N = a.shape, b.shape[1]
    if kind == "randn":
        a32 = torch.randn(M, K, generator=gen, device="cuda")
        b32 = torch.randn(K, N, generator=gen, device="cuda")
    elif kind == "uniform":
        a32 = torch.rand(M, K, generator=gen, device="cuda") * 2 - 1
        b32 = torch.rand(K, N, generator=gen, device="cuda") * 2 - 1
    elif kind == "large":
        s = math.sqrt(4 * 8000 / K)
        a32 = torch.rand(M, K, generator=gen, device="cuda") * s
        b32 = torch.rand(K, N, generator=gen, device="cuda") * s
    else:
        raise ValueError(kind)
    a.copy_(a32)
    b.copy_(b32)
    if bt is not None:
        bt.copy_(b.t())
    torch.cuda.synchronize()
    return a.double() @ b.double()


def errors(c: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(‖c−ref‖/‖ref‖, max|c−ref| / max|ref|) in float64."""
    d = c.double() - ref
    denom = float(ref.norm()) or 1.0
    top = float(ref.abs().max()) or 1.0
    return float(d.norm()) / denom, float(d.abs().max()) / top


def cublas_error(a: torch.Tensor, b: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """cuBLAS's own error on these inputs (fp32 accumulation, no reduced-precision reduction)."""
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    out = torch.mm(a, b)
    torch.cuda.synchronize()
    return errors(out, ref)
