#pragma once
// The gemv family's rules and resource formulas, written once: the template includes this header, the search
// reads it through a host build (evaluator/kernels/rules.py). Plain C++17, no CUDA.

#include "mma_rules.cuh"

namespace gemv_rules {

constexpr int MAX_THREADS = 1024;
constexpr int MAX_REGISTERS = 200;  // the estimate's ceiling, with room for what it leaves out
constexpr int CHUNK = 256;          // K values a warp reads per row of Bt and chunk: 32 lanes x 8

struct Params {
  int maxm, rows, warps, ksplit, unroll, kvec;  // kvec: halfs per global load along K (mma_rules::widest_kvec)
};

constexpr int threads(const Params& p) { return 32 * p.warps; }
constexpr int groups_per_cta(const Params& p) { return p.warps / p.ksplit; }  // output groups a CTA works on at once
constexpr int outputs(const Params& p) { return p.maxm * p.rows; }            // outputs of one group
// Rough registers per thread: the loads in flight, UNROLL chunks of each row of Bt and of A (8 halfs: 4 registers
// for one 16-byte load; narrow loads keep their addresses and halves too: 8 for 4-byte loads, 12 for 2-byte
// loads, as nvcc builds them), one chunk of each row of Bt as floats, the sums, about 24 for addressing. Against
// nvcc 13's sm_90a builds of 44 eight-warp points (MAXM 1, 2, 4; KVEC 8, 2, 1): 0.80-1.69x the registers they use
// (median 1.21x), below them (0.80-0.95x) only on points with 8 or more chunks of Bt in flight (ROWS x UNROLL).
constexpr int register_estimate(const Params& p) {
  return (p.kvec == 8 ? 4 : p.kvec == 2 ? 8 : 12) * p.unroll * (p.rows + p.maxm) + 8 * p.rows + outputs(p) + 24;
}
constexpr int register_budget(const Params& p) {
  const int per_thread = 65536 / threads(p);
  return per_thread < MAX_REGISTERS ? per_thread : MAX_REGISTERS;
}
// The K-split partials: every K warp but the first parks its group's sums (static shared memory).
constexpr int smem_bytes(const Params& p) { return (p.ksplit - 1) * groups_per_cta(p) * outputs(p) * 4; }
// The number of rows of A the kernel is built for: the smallest of 1, 2, 4 that holds M.
constexpr int maxm_for(long long M) { return M <= 1 ? 1 : M <= 2 ? 2 : 4; }

constexpr const char* violation(const Params& p) {
  if (p.maxm != 1 && p.maxm != 2 && p.maxm != 4) return "MAXM must be 1, 2 or 4";
  if (p.rows < 1 || p.rows > 8) return "ROWS must be 1..8";
  if (p.warps < 1 || threads(p) > MAX_THREADS) return "WARPS must be 1..32";
  if (p.ksplit < 1 || p.warps % p.ksplit) return "KSPLIT must divide WARPS";
  if (p.unroll < 1 || p.unroll > 8) return "UNROLL must be 1..8";
  if (register_estimate(p) > register_budget(p)) return "too many registers per thread for the block's threads";
  if (p.kvec != 1 && p.kvec != 2 && p.kvec != 8) return "KVEC must be 1, 2 or 8";
  return nullptr;
}

constexpr const char* shape_violation(const Params& p, long long M, long long N, long long K) {
  if (M <= 0 || N <= 0 || K <= 0) return "empty shape";
  if (M > 4) return "gemv takes M <= 4 (from there the tensor-core families are faster)";
  if (p.maxm != maxm_for(M)) return "MAXM must be the smallest of 1, 2, 4 that holds M";
  if (p.kvec != mma_rules::widest_kvec(K))
    return "KVEC must be the widest load K allows (8 if K % 8 == 0, else 2 if K is even, else 1)";
  return nullptr;
}

}  // namespace gemv_rules
