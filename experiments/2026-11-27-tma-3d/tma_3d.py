"""Probe: one TMA request per operand for a 128-deep ring stage, through a 3-D tensor map (2026-11-27).

The fixed-cost probes (`../2026-11-26-fixed-cost/`, NOTES item 62) found each load request costing about the same
whatever its bytes, and 128-deep stages (`../2026-11-27-deep-stage/`, item 65) halved the handshakes per k but
not the requests: a stage still issues two 64-deep boxes of each operand, and 512x512 did not move (2.26 us per
1000 of K, the library 1.36). Here each operand's two boxes come in one request: a 3-D map of the row-major
operand, {64 of K, rows, K / 64} with strides {row, 128 bytes}, and a box {64, tile rows, 2}, which lands in shared
memory exactly as the two 2-D boxes did (box j at j * rows * 128 bytes, the same 128-byte swizzle). K must be a
multiple of 64 (past K the last box is zero-filled, as before; a K not a multiple of 64 would read the next row).
The driver may refuse strides that do not grow with the dimension: then the kernel returns an error and the probe
says so.

Each configuration with 128-deep stages as the family renders it ("2d") and with the edit ("3d"), checked against
torch.matmul at K = 960 (an odd count of 64-deep boxes) and K = 4096, then timed offline at K = 512 .. 4096 with the
library beside them (`ring_only.sweep`).

Usage (one GPU): python tma_3d.py OUT_DIR [MxN ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-fixed-cost"))

from fixed_cost import BASE, load  # noqa: E402
from hgemm.evaluator.compile import compile_sources  # noqa: E402
from hgemm.evaluator.kernels import get_family  # noqa: E402
from k_group import check  # noqa: E402
from ring_only import edit, sweep  # noqa: E402
from structures import ONE  # noqa: E402

DEEP = {**ONE, "warp_producer": 1, "stage_k": 128}
CASES = {  # (M, N): name -> configuration (128-deep stages, no cluster: the 3-D load is not multicast here)
    (512, 512): {"64x32": {**DEEP, "bm": 64, "bn": 32, "stages": 8},
                 "64x64": {**DEEP, "bm": 64, "bn": 64, "stages": 6}},
    (64, 4096): {"64x32": {**DEEP, "bm": 64, "bn": 32, "stages": 8}},
    (1024, 1024): {"64x128": {**DEEP, "bm": 64, "bn": 128, "stages": 4}},
    (12288, 256): {"128x64 pp": {**DEEP, "consumers": 2, "pingpong": 1, "bm": 128, "bn": 64, "stages": 4}},
}

LOAD_3D = """// 3-D tile load global -> shared (probe): {c0, c1, c2} innermost first.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

"""
MAP_3D = """// Row-major rows x cols fp16 matrix as {64 of K, rows, cols / 64} (probe): one box = a row block's two 64-deep
// k-boxes, laid out in shared memory as two 2-D boxes one after the other.
bool make_map3(CUtensorMap* map, const void* ptr, int rows, int cols, int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
  if (encode == nullptr || cols % 64 != 0) return false;
  cuuint64_t dims[3] = {64, static_cast<cuuint64_t>(rows), static_cast<cuuint64_t>(cols / 64)};
  cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols) * 2, 128};
  cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 2};
  cuuint32_t estr[3] = {1, 1, 1};
  CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, const_cast<void*>(ptr), dims, strides, box, estr,
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

"""
LOADS_2D = """#pragma unroll
            for (int j = 0; j < BOXES; ++j) {
              const int k0 = kb * BK + j * wgmma_rules::BOX_K;
              tma_load_2d(sA + s * A_BYTES + j * BM * 128, &tmA, fb, k0, m0);
              if constexpr (B_MULTICAST) {
                tma_load_2d_multicast(sB + s * B_BYTES + j * BN * 128 + rank * B_SLICE * 128, &tmB, fb, k0,
                                      n0 + rank * B_SLICE, static_cast<uint16_t>((1u << CLUSTER_M) - 1));
              } else {
                tma_load_2d(sB + s * B_BYTES + j * BN * 128, &tmB, fb, k0, n0);
              }
            }
"""
LOADS_3D = """            static_assert(BOXES == 2 && !B_MULTICAST, "probe: 128-deep stages without multicast");
            tma_load_3d(sA + s * A_BYTES, &tmA, fb, 0, m0, kb * BOXES);
            tma_load_3d(sB + s * B_BYTES, &tmB, fb, 0, n0, kb * BOXES);
"""
MAPS_2D = "if (!make_map(&tmA, a_op, mk, K, BM) || !make_map(&tmB, b_op, nk, K, B_SLICE) ||"
MAPS_3D = "if (!make_map3(&tmA, a_op, mk, K, BM) || !make_map3(&tmB, b_op, nk, K, B_SLICE) ||"
EDITS = [
    ("// Same, delivered to the same shared offset in every CTA of", LOAD_3D + "// Same, delivered to the same shared offset in every CTA of"),
    ("bool hopper_device(int* sms) {", MAP_3D + "bool hopper_device(int* sms) {"),
    (LOADS_2D, LOADS_3D),
    (MAPS_2D, MAPS_3D),
]


def sources(only: set[str] | None = None) -> dict[tuple[int, int, str], str]:
    family = get_family("wgmma")
    out = {}
    for (M, N), configs in CASES.items():
        if only and f"{M}x{N}" not in only:
            continue
        for name, cfg in configs.items():
            params = family.repair({**BASE, **cfg})
            assert params["stage_k"] == 128 and params["stages"] == cfg["stages"], params
            two = family.render(params)
            out[(M, N, f"{name} 2d")] = two
            out[(M, N, f"{name} 3d")] = edit(two, EDITS)
    return out


def main() -> None:
    out = Path(sys.argv[1])
    srcs = sources(set(sys.argv[2:]))
    built = compile_sources(list(srcs.values()))
    for (M, N, name), b in zip(srcs, built, strict=True):
        if not b.ok:
            raise SystemExit(f"{M}x{N} {name} does not build: {b.message}")
    rows: list[dict] = []
    for M, N in dict.fromkeys((m, n) for m, n, _ in srcs):
        runs = {name: load(src) for (m, n, name), src in srcs.items() if (m, n) == (M, N)}
        for name, run in list(runs.items()):
            for K in (960, 4096):
                try:
                    print(f"{M}x{N}x{K} {name}: max |diff| {check(run, M, N, K):.3g}", flush=True)
                except AssertionError as e:  # the run returned an error: a refused tensor map, say; not timed
                    print(f"{M}x{N}x{K} {name}: returned {e}, left out", flush=True)
                    del runs[name]
                    break
        sweep(out, M, N, runs, rows, "tma-3d.json")


if __name__ == "__main__":
    main()
