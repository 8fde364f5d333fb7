"""Write a wgmma kernel's rendered source, and a copy whose producer warp loads A with cp.async (16-byte copies
into the same 128-byte-swizzled layout TMA writes) while one lane loads Bt by TMA as before.

The question it asks, after `probe.cu`: if TMA fills a CTA's shared memory at about 64 bytes per clock and cp.async
adds to that, does the main loop of 64-row tiles get faster when A comes the other way? Both files go through
`hgemm eval` (checked, both modes, the libraries alongside).

Usage: python a_cpasync.py M N K OUTDIR [param=value ...]  (the family's default for M N K, with overrides)
Writes OUTDIR/base-MxNxK.cu and OUTDIR/a_cpasync-MxNxK.cu. Only for the cooperative, unswapped, unpadded forms
(no swap_ab, pad_rows, split_dsmem or stream_k).
"""

from __future__ import annotations

import sys
from pathlib import Path

from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape


def patch(src: str) -> str:
    def sub(old: str, new: str) -> None:
        nonlocal src
        assert src.count(old) == 1, old[:70]
        src = src.replace(old, new)

    # The kernel takes A's pointer and row stride besides its tensor map.
    sub("const __grid_constant__ CUtensorMap tmC, __half* C, float* partial, int M, int N, int K,\n"
        "                       int ldc) {",
        "const __grid_constant__ CUtensorMap tmC, __half* C, float* partial, int M, int N, int K,\n"
        "                       int ldc, const __half* __restrict__ a_ptr, int lda) {")
    sub("e = cudaLaunchKernelEx(&cfg, hgemm_wgmma_kernel, tmA, tmB, tmC, C, partial, mk, nk, K, ldc);",
        "e = cudaLaunchKernelEx(&cfg, hgemm_wgmma_kernel, tmA, tmB, tmC, C, partial, mk, nk, K, ldc, a_op, lda);")
    # A full slot: the TMA lane's arrive (Bt's bytes) and one cp.async arrive per producer lane.
    sub("mbar_init(full_bar + 8 * s, 1);", "mbar_init(full_bar + 8 * s, 1 + 32);")
    # The whole producer warp walks the ring; lane 0 issues Bt's loads.
    sub("if (WARP_PRODUCER ? wg_thread < 32 : wg_thread == 0) {", "if (wg_thread < 32) {")
    sub("const bool issuer = WARP_PRODUCER ? elect_one() : true;", "const bool issuer = wg_thread == 0;")
    sub("            mbar_arrive_expect_tx(fb, A_BYTES + B_BYTES);", "            mbar_arrive_expect_tx(fb, B_BYTES);")
    sub("              tma_load_2d(sA + s * A_BYTES + j * BM * 128, &tmA, fb, k0, m0);\n", "")
    sub("          if (WARP_PRODUCER) __syncwarp();\n          if (++s == STAGES) {",
        """          // A by cp.async: chunk c (16 bytes) of row r of box j lands where TMA's 128-byte swizzle puts it;
          // rows past M and columns past K are zero-filled, as TMA fills them.
#pragma unroll 4
          for (int i = wg_thread; i < BOXES * BM * 8; i += 32) {
            const int j = i / (BM * 8), r = (i / 8) % BM, c = i % 8;
            const int k = kb * BK + j * wgmma_rules::BOX_K + c * 8;
            const bool ok = m0 + r < M && k < K;
            const __half* src = ok ? a_ptr + static_cast<size_t>(m0 + r) * lda + k : a_ptr;
            const uint32_t dst = sA + s * A_BYTES + j * BM * 128 + r * 128 + ((c ^ (r & 7)) << 4);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0)
                         : "memory");
          }
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\\n" ::"r"(fb) : "memory");
          __syncwarp();
          if (++s == STAGES) {""")
    # The consumer: cp.async's writes are the generic proxy's; wgmma reads through the async proxy.
    sub("        mbar_wait(full_bar + 8 * s, static_cast<uint32_t>(it / STAGES) & 1);\n        fence_acc(acc);",
        "        mbar_wait(full_bar + 8 * s, static_cast<uint32_t>(it / STAGES) & 1);\n"
        "        fence_proxy_async_smem();\n        fence_acc(acc);")
    return src.replace("// hgemm family wgmma:", "// hgemm family wgmma (A by cp.async, experiments/2026-11-28-smem-fill):", 1)


def write_pair(name: str, patch_source, fixed: dict[str, int] | None = None, check=None) -> None:
    """From sys.argv (M N K OUTDIR [param=value ...]): the family's default for M N K with the overrides, then
    `fixed`; `check(params)` may refuse them. Writes OUTDIR/base-MxNxK.cu and OUTDIR/<name>-MxNxK.cu, the base
    through `patch_source`."""
    m, n, k, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    family = get_family("wgmma")
    params = dict(family.default_params(Shape(m, n, k)))
    params.update({key: int(value) for key, value in (kv.split("=") for kv in sys.argv[5:])})
    params.update(fixed or {})
    if check is not None:
        check(family, params, Shape(m, n, k))
    base = family.render(params)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"base-{m}x{n}x{k}.cu").write_text(base)
    (out / f"{name}-{m}x{n}x{k}.cu").write_text(patch_source(base))
    print(m, n, k, params)


def only_plain_forms(family, params, shape) -> None:
    assert not any(params.get(p) for p in ("swap_ab", "pad_rows", "split_dsmem", "stream_k")), params


def main() -> None:
    write_pair("a_cpasync", patch, check=only_plain_forms)


if __name__ == "__main__":
    main()
