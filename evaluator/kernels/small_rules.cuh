#pragma once
// The small family's rules and resource formulas, written once: the template includes this header, the
// search reads it through a host build (evaluator/kernels/rules.py). Plain C++17, no CUDA.

#include "mma_rules.cuh"

namespace small_rules {

constexpr int MAX_ACCUMULATORS = 64;
constexpr int MAX_THREADS = 1024;

struct Params {
  int bm, bn, warps_m, warps_n, warps_k, kvec;  // kvec: halfs per global load along K (mma_rules::widest_kvec)
};

constexpr int threads(const Params& p) { return 32 * p.warps_m * p.warps_n * p.warps_k; }
constexpr int wm(const Params& p) { return p.bm / p.warps_m; }
constexpr int wn(const Params& p) { return p.bn / p.warps_n; }
constexpr int accumulators(const Params& p) { return (wm(p) / 16) * (wn(p) / 8) * 4; }
// Rough registers per thread: accumulators, two chunks of fragments, about 30 for addressing.
constexpr int register_estimate(const Params& p) {
  return accumulators(p) + 2 * ((wm(p) / 16) * 8 + (wn(p) / 8) * 4) + 30;
}
constexpr int register_budget(const Params& p) { return 65536 / threads(p) < 255 ? 65536 / threads(p) : 255; }
// The K-warp reduction buffer: every K warp but the first parks its accumulators.
constexpr int smem_bytes(const Params& p) { return (p.warps_k - 1) * p.warps_m * p.warps_n * accumulators(p) * 32 * 4; }

constexpr const char* violation(const Params& p) {
  if (p.warps_m < 1 || p.warps_n < 1 || p.warps_k < 1 || p.bm % p.warps_m || p.bn % p.warps_n)
    return "warps must divide the tile";
  if (wm(p) % 16 || wn(p) % 8 || wm(p) > 64 || wn(p) > 64)
    return "the warp tile must be 16..64 rows (x16) by 8..64 columns (x8)";
  if (accumulators(p) > MAX_ACCUMULATORS) return "too many accumulators per thread";
  if (threads(p) > MAX_THREADS) return "too many threads per block";
  if (register_estimate(p) > register_budget(p)) return "too many registers per thread for the block's threads";
  if (p.kvec != 1 && p.kvec != 2 && p.kvec != 8) return "KVEC must be 1, 2 or 8";
  return nullptr;
}

constexpr const char* shape_violation(const Params& p, long long M, long long N, long long K) {
  if (M <= 0 || N <= 0 || K <= 0) return "empty shape";
  if (p.kvec != mma_rules::widest_kvec(K))
    return "KVEC must be the widest load K allows (8 if K % 8 == 0, else 2 if K is even, else 1)";
  return nullptr;
}

}  // namespace small_rules
