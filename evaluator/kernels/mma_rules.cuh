#pragma once
// The mma_ms / mma_splitk families' rules and resource formulas, written once: the template includes this
// header, the search reads it through a host build (evaluator/kernels/rules.py). Plain C++17, no CUDA.

namespace mma_rules {

constexpr long long WORKSPACE_BYTES = 64ll << 20;  // the contract's workspace, at least
constexpr int MAX_ACCUMULATORS = 128;               // fp32 accumulators per thread; more spill at 255 registers
constexpr int MAX_THREADS = 1024;

struct Params {
  int bm, bn, bk, warps_m, warps_n, stages, raster, split_k, kvec, realign;
};

// Halfs per global load along K: 16-byte loads (cp.async) need 16-byte rows, K % 8 == 0; otherwise rows
// are read 4 bytes (K even) or 2 bytes at a time. The kernel is rendered for the widest load K allows.
constexpr int widest_kvec(long long K) { return K % 8 == 0 ? 8 : K % 2 == 0 ? 2 : 1; }

constexpr int threads(const Params& p) { return 32 * p.warps_m * p.warps_n; }
constexpr int wm(const Params& p) { return p.bm / p.warps_m; }
constexpr int wn(const Params& p) { return p.bn / p.warps_n; }
constexpr int accumulators(const Params& p) { return wm(p) * wn(p) / 32; }
// Rough registers per thread: accumulators, the fragments of every k-step of one BK slice (the compiler
// hoists those ldmatrix loads), and about 40 for addressing.
constexpr int register_estimate(const Params& p) {
  return (wm(p) / 16) * (wn(p) / 8) * 4 + (p.bk / 16) * ((wm(p) / 16) * 4 + (wn(p) / 8) * 2) + 40;
}
constexpr int register_budget(const Params& p) { return 65536 / threads(p) < 255 ? 65536 / threads(p) : 255; }
// REALIGN 1 stages each row's aligned 16-byte blocks (one more than the slice's chunks) and realigns a slice
// into one of two swizzled tiles the MMAs read.
// Padding after every eight staged rows spreads the shift pass's reads over the banks: 32 bytes where K is odd
// (every read on its own bank), 16 where K is even (at most two a bank).
constexpr int raw_row_bytes(const Params& p) { return (p.bk / 8 + 1) * 16; }
constexpr int raw_pad_bytes(const Params& p) { return p.kvec == 1 ? 32 : 16; }
constexpr int raw_tile_bytes(const Params& p, int rows) { return rows * raw_row_bytes(p) + rows / 8 * raw_pad_bytes(p); }
constexpr int pipe_bytes(const Params& p) {
  return p.realign ? p.stages * (raw_tile_bytes(p, p.bm) + raw_tile_bytes(p, p.bn)) + 2 * (p.bm + p.bn) * p.bk * 2
                        : p.stages * (p.bm + p.bn) * p.bk * 2;
}
constexpr int c_stride(const Params& p) { return p.bn + 8; }  // halfs; padding spreads fragment writes over banks
constexpr int c_bytes(const Params& p) { return p.split_k == 1 ? p.bm * c_stride(p) * 2 : 0; }
// Dynamic shared memory of one CTA: the pipeline, or the C staging tile if larger.
constexpr int smem_bytes(const Params& p) { return pipe_bytes(p) > c_bytes(p) ? pipe_bytes(p) : c_bytes(p); }

constexpr const char* violation(const Params& p) {
  if (p.bk != 32 && p.bk != 64) return "BK must be 32 or 64";
  if (p.warps_m < 1 || p.warps_n < 1 || p.bm % p.warps_m || p.bn % p.warps_n) return "warps must divide the tile";
  if (wm(p) % 16 || wn(p) % 16) return "the warp tile must be a multiple of 16x16";
  if (accumulators(p) > MAX_ACCUMULATORS) return "too many accumulators per thread";
  if (threads(p) > MAX_THREADS) return "too many threads per block";
  if (register_estimate(p) > register_budget(p)) return "too many registers per thread for the block's threads";
  if (p.stages < 2) return "the pipeline needs at least two stages";
  if (p.split_k < 1) return "SPLIT_K must be positive";
  if (p.kvec != 1 && p.kvec != 2 && p.kvec != 8) return "KVEC must be 1, 2 or 8";
  if (p.realign != 0 && p.realign != 1) return "REALIGN must be 0 or 1";
  if (p.realign != 0 && p.kvec == 8) return "REALIGN is for rows that are not 16-byte aligned (KVEC 1 or 2)";
  return nullptr;
}

constexpr long long partial_bytes(const Params& p, long long M, long long N) {
  return p.split_k > 1 ? static_cast<long long>(p.split_k) * M * N * 4 : 0;
}

constexpr const char* shape_violation(const Params& p, long long M, long long N, long long K) {
  if (M <= 0 || N <= 0 || K <= 0) return "empty shape";
  if (p.kvec != widest_kvec(K)) return "KVEC must be the widest load K allows (8 if K % 8 == 0, else 2 if K is even, else 1)";
  if (partial_bytes(p, M, N) > WORKSPACE_BYTES) return "split-K partials exceed the 64 MiB workspace";
  if (p.split_k > (K + p.bk - 1) / p.bk) return "more K splits than K tiles";
  return nullptr;
}

}  // namespace mma_rules
