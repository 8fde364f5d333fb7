"""One shape's buffers and checks, on the judge's side: draws, references, verdicts on what runners wrote.

- Check draws go to slot 0 through torch's generator; timed samples' inputs come from seeds through the
  evaluator's own fill kernels, so they can be regenerated here, in the judge, after the runner is done.
- A timed output passes when it holds no poison and no NaN/Inf, and each row's witness (its sum against
  a random vector) matches A·(B·x) computed here in float64 within WITNESS_TOLERANCE of the row's own
  rounding scale: a skipped, stale or partial result fails it; an honest fp32-accumulating kernel does not.
"""

from __future__ import annotations

import torch
from hgemm.evaluator.arena import WORKSPACE_BYTES, Arena
from hgemm.evaluator.harness import POISON, CheckFailed, cublas_error, draw_into, verify_result
from hgemm.evaluator.runner import Shim, derive

from hgemm.core.shape import Shape

WITNESS_TOLERANCE = 8 * 2.0**-11  # times sqrt(sum of squared terms): 8x an fp16 rounding of every term


class Problem:
    def __init__(self, rt, shim: Shim, shape: Shape, slots: int, witness_samples: int, l2_bytes: int,
                 seed: int, stream: torch.cuda.Stream):
        M, N, K = shape
        self.shape, self.M, self.N, self.K = shape, M, N, K
        self.slots, self.stream, self.shim, self.rt = slots, stream, shim, rt
        rows = witness_samples * slots
        regions = [("A", 2 * slots * M * K, True), ("B", 2 * K * N, True), ("Bt", 2 * N * K, True),
                   *((f"C{i}", 2 * M * N, True) for i in range(slots)), ("W", WORKSPACE_BYTES, True),
                   ("early", 2 * M * N, False), ("stage", 2 * M * K, False), ("wy", 8 * rows * M, False),
                   ("wy2", 8 * rows * M, False), ("wbad", 8 * rows, False)]  # fmt: skip
        self.arena = Arena(rt, regions, seed)
        self.layout = {name: [off, n] for name, (off, n) in self.arena.layout.items()}
        v = self.arena.view
        self.a_ring = v("A", torch.float16, (slots, M, K))
        self.a = self.a_ring[0]
        self.b = v("B", torch.float16, (K, N))
        self.bt = v("Bt", torch.float16, (N, K))
        self.c = [v(f"C{i}", torch.float16, (M, N)) for i in range(slots)]
        self.w = v("W", torch.uint8, (WORKSPACE_BYTES,))
        self.early = v("early", torch.float16, (M, N))
        self.stage = v("stage", torch.float16, (M, K))
        self.wy = v("wy", torch.float64, (rows, M))
        self.wy2 = v("wy2", torch.float64, (rows, M))
        self.wbad = v("wbad", torch.int64, (rows,))
        self.flush_bytes = max(2 * l2_bytes, 64 << 20)
        self.flush_ptr = rt.malloc(self.flush_bytes)
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self._scratch: tuple[torch.Tensor, torch.Tensor] | None = None

    @staticmethod
    def estimate_us(shape: Shape, stream: torch.cuda.Stream) -> float:
        """torch.matmul's time on this shape, from a graph of three launches: it sizes the offline graphs
        (the same for every contender)."""
        from hgemm.evaluator.timing import capture

        M, N, K = shape
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = torch.empty(M, N, device="cuda", dtype=torch.float16)
        graph = capture(lambda: torch.mm(a, b, out=c), 3, stream)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            graph.replay()
            start.record(stream)
            graph.replay()
            end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / 3

    def check_timeout(self) -> float:
        return 30.0 + self.shape.flops / 2e11  # float64 references of the largest shapes take seconds

    def close(self) -> None:
        torch.cuda.synchronize()
        self.rt.free(self.flush_ptr)
        self.arena.close()

    # -- the correctness suite ------------------------------------------------------------------
    def draw(self, kind: str) -> torch.Tensor:
        return draw_into(self.a, self.b, self.bt, kind, self.gen)

    def _poison(self) -> None:
        self.c[0].view(torch.int16).fill_(POISON)
        self.early.view(torch.int16).fill_(POISON)
        self.w.random_(0, 256, generator=self.gen)

    def prepare_check(self, kind: str):
        """A fresh draw at slot 0, C poisoned, the workspace garbage: (reference, cuBLAS error, inputs)."""
        ref = self.draw(kind)
        ref_err = cublas_error(self.a, self.b, ref)
        inputs = (self.a.clone(), self.b.clone(), self.bt.clone())
        self._poison()
        torch.cuda.synchronize()
        return ref, ref_err, inputs

    def prepare_late_inputs(self):
        """New values for A in `stage` (slot 0 keeps the old ones until the runner's writer copies them)."""
        self.stage.copy_(torch.rand(self.M, self.K, generator=self.gen, device="cuda") * 2 - 1)
        self.stage[0, 0] = self.a[0, 0] + 1  # at least one value differs from what slot 0 holds now
        ref = self.stage.double() @ self.b.double()
        ref_err = cublas_error(self.stage, self.b, ref)
        inputs = (self.stage.clone(), self.b.clone(), self.bt.clone())
        self._poison()
        torch.cuda.synchronize()
        return ref, ref_err, inputs

    def early_matches(self) -> bool:
        return torch.equal(self.early.view(torch.int16), self.c[0].view(torch.int16))

    def verify(self, ref, ref_err, inputs, label: str, previous) -> tuple[float, float]:
        torch.cuda.synchronize()
        return verify_result(self.c[0], ref, ref_err, label, previous, (self.a, self.b, self.bt), inputs,
                             self.arena.broken_guard())

    # -- timed samples --------------------------------------------------------------------------
    def start_timing(self, b_seed: int, slots: int) -> None:
        """Before a runner times: B and Bt get the values of `b_seed` (kept for the whole mode), every
        output slot is poisoned, and witnesses it does not write read as NaN and as missing."""
        s = self.stream.cuda_stream
        self.shim.fill(self.b.data_ptr(), self.K * self.N, derive(b_seed, 2), 1.0, s)
        self.shim.fill_transposed(self.bt.data_ptr(), self.K, self.N, derive(b_seed, 2), 1.0, s)
        for i in range(slots):
            self.shim.poison(self.c[i].data_ptr(), self.M * self.N, s)
        self.stream.synchronize()
        self.wy.fill_(float("nan"))
        self.wy2.fill_(float("nan"))
        self.wbad.fill_(-1)
        torch.cuda.synchronize()

    def _regenerate(self, seed: int, slots: int, b_seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The inputs sample `seed` had (A slots, B), rebuilt here with the same kernels and seeds."""
        if self._scratch is None:
            self._scratch = (torch.empty(self.slots * self.M * self.K, dtype=torch.float16, device="cuda"),
                             torch.empty(self.K * self.N, dtype=torch.float16, device="cuda"))
        a, b = self._scratch
        s = self.stream.cuda_stream
        self.shim.fill(a.data_ptr(), slots * self.M * self.K, derive(seed, 1), 1.0, s)
        self.shim.fill(b.data_ptr(), self.K * self.N, derive(b_seed, 2), 1.0, s)
        self.stream.synchronize()
        return a[: slots * self.M * self.K].view(slots * self.M, self.K), b.view(self.K, self.N)

    def check_witnesses(self, seeds: list[int], slots: int, b_seed: int) -> None:
        """Every timed launch of every sample: complete, finite, and right by its witness. The expected row
        sums, A·(B·x), are computed from the seeds alone: the inputs are regenerated inside the product."""
        s = self.stream.cuda_stream
        x = torch.empty(self.N, dtype=torch.float64, device="cuda")
        bx = torch.empty(self.K, dtype=torch.float64, device="cuda")
        expected = torch.empty(len(seeds), slots * self.M, dtype=torch.float64, device="cuda")
        with torch.cuda.stream(self.stream):
            for i, seed in enumerate(seeds):
                self.shim.vector(x.data_ptr(), self.N, derive(seed, 3), s)
                self.shim.gen_matvec(self.K, self.N, derive(b_seed, 2), 1.0, x.data_ptr(), bx.data_ptr(), s)
                self.shim.gen_matvec(slots * self.M, self.K, derive(seed, 1), 1.0, bx.data_ptr(),
                                     expected[i].data_ptr(), s)
            n = len(seeds) * slots
            y = self.wy[:n].view(len(seeds), slots * self.M)
            y2 = self.wy2[:n].view(len(seeds), slots * self.M)
            err = (y - expected).abs()
            wrong = ~(err <= WITNESS_TOLERANCE * y2.sqrt() + 1e-6)  # NaN is wrong too
            bad = self.wbad[:n].view(len(seeds), slots)
        self.stream.synchronize()
        if bool((bad != 0).any()):
            i, slot = (int(v) for v in (bad != 0).nonzero()[0])
            where = f"timed sample {i}, launch {slot + 1} of {slots}"
            if int(bad[i, slot]) < 0:
                raise CheckFailed("incorrect", f"{where}: no witness of the output was recorded")
            raise CheckFailed("unwritten_output", f"{where}: {int(bad[i, slot])} elements of C never written "
                              "or not finite")
        if bool(wrong.any()):
            i, flat = (int(v) for v in wrong.nonzero()[0])
            slot, row = divmod(flat, self.M)
            rows = int(wrong[i, slot * self.M : (slot + 1) * self.M].sum())
            ratio = float(err[i, flat]) / max(float(y2[i, flat]), 1e-300) ** 0.5
            raise CheckFailed("incorrect", f"timed sample {i}, launch {slot + 1} of {slots}: {rows} rows of C "
                              f"disagree with A·B (row {row}: error {ratio:.3g} of its rounding scale, bound "
                              f"{WITNESS_TOLERANCE:.3g})")

    def check_inputs(self, seed: int, slots: int, b_seed: int) -> None:
        """After timing: the last sample's inputs are as given, and no guard band changed."""
        torch.cuda.synchronize()
        broken = self.arena.broken_guard()
        if broken:
            raise CheckFailed("out_of_bounds", f"timed launches: guard band around {broken} overwritten")
        a, b = self._regenerate(seed, slots, b_seed)
        ring = self.a_ring[:slots].reshape(slots * self.M, self.K)
        for name, now, given in (("A", ring, a), ("B", self.b, b), ("Bt", self.bt, b.t())):
            if not torch.equal(now.view(torch.int16), given.contiguous().view(torch.int16)):
                raise CheckFailed("input_modified", f"timed launches: input {name} was modified")
