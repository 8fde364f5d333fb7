#pragma once
// The wgmma family's rules and resource formulas, written once. The kernel template uses them (its
// static_assert, shared-memory layout and hgemm_supports); the search reads them through a host build of
// this header (evaluator/kernels/rules.py), so the two cannot disagree. Plain C++17, no CUDA.

namespace wgmma_rules {

constexpr int BOX_K = 64;                             // k per TMA box: one 128-byte swizzle row of fp16
constexpr long long WORKSPACE_BYTES = 64ll << 20;     // the contract's workspace, at least

struct Params {
  int bm, bn, stages, consumers, group_m, persistent, epilogue, cluster_m, pingpong, split_k, split_dsmem,
      epi_panels, stream_k, swap_ab, warp_producer, stage_k, pad_rows;
};

constexpr int bk(const Params& p) { return p.stage_k; }  // k per ring stage: stage_k / BOX_K boxes per operand

constexpr int wg_rows(const Params& p) { return p.pingpong ? p.bm : p.bm / p.consumers; }  // rows per consumer
constexpr int m_iters(const Params& p) { return wg_rows(p) / 64; }                          // m64 blocks per consumer
constexpr bool dsmem(const Params& p) { return p.split_dsmem != 0 && p.split_k > 1; }
constexpr int c_panel(const Params& p) { return p.bn % 64 ? 32 : 64; }  // columns per C panel (one TMA box)
constexpr int c_cols(const Params& p) { return p.epi_panels ? c_panel(p) * p.epi_panels : p.bn; }
constexpr int a_bytes(const Params& p) { return p.bm * bk(p) * 2; }
constexpr int b_bytes(const Params& p) { return p.bn * bk(p) * 2; }
constexpr int c_bytes(const Params& p) {
  return (p.epilogue && p.split_k == 1) ? p.consumers * wg_rows(p) * c_cols(p) * 2 : 0;
}
// Shared layout from a 1024-aligned base: A ring, B ring, C staging (or the parked DSMEM partial, which
// reuses the ring), then 2 * stages + 2 barriers and 1024 bytes of alignment slack.
constexpr int off_b(const Params& p) { return p.stages * a_bytes(p); }
constexpr int off_c(const Params& p) { return off_b(p) + p.stages * b_bytes(p); }
constexpr int p_ld(const Params& p) { return p.bn + 8; }  // partial row stride: 8 floats keep writes conflict-free
constexpr int p_bytes(const Params& p) { return dsmem(p) ? p.bm * p_ld(p) * 4 : 0; }
constexpr int off_bar(const Params& p) { return off_c(p) + c_bytes(p) > p_bytes(p) ? off_c(p) + c_bytes(p) : p_bytes(p); }
constexpr int smem_bytes(const Params& p) { return off_bar(p) + (2 * p.stages + 2) * 8 + 1024; }
constexpr int accumulators(const Params& p) { return m_iters(p) * p.bn / 2; }  // fp32 per consumer thread
// Two consumers get 232 registers each from setmaxnreg: a ping-pong consumer holds its whole tile (up to
// 128 x 192), a cooperative one its share (up to 128 x 192 of a 256-row tile; ptxas: no spills at 256x192);
// three consumers (192-row tiles) get 160 registers each.
constexpr int max_accumulators(const Params& p) { return p.consumers == 2 ? 192 : p.consumers == 3 ? 96 : 128; }

// The first structural rule `p` breaks, or nullptr.
constexpr const char* violation(const Params& p) {
  if (!(p.bm == 64 || p.bm == 128 || p.bm == 192 || p.bm == 256)) return "BM must be 64, 128, 192 or 256";
  if (p.bn < 16 || p.bn > 256 || p.bn % 16) return "BN must be a multiple of 16 from 16 to 256";
  if (p.stages < 2) return "at least two ring stages";
  if (p.consumers < 1 || p.consumers > 3) return "one to three consumer warpgroups";
  if (p.cluster_m != 1 && p.cluster_m != 2 && p.cluster_m != 4) return "CLUSTER_M must be 1, 2 or 4";
  if (p.split_k < 1 || p.split_k > 64) return "SPLIT_K must be 1..64";
  if (p.epi_panels != 0 && p.epi_panels != 2) return "EPI_PANELS must be 0 or 2";
  if (p.pingpong && p.consumers != 2) return "ping-pong needs two consumer warpgroups";
  if (p.split_dsmem && (p.split_k < 2 || p.split_k > 8)) return "split_dsmem needs 2 <= split_k <= 8 (a portable cluster)";
  if (p.split_dsmem && (p.persistent || p.cluster_m != 1 || p.pingpong || p.consumers > 2))
    return "split_dsmem runs one CTA per (tile, slice): persistent=0, cluster_m=1, pingpong=0, consumers <= 2";
  if (p.split_k > 1 && p.epilogue) return "split-K writes fp32 partials directly: epilogue=0";
  if (p.epilogue && p.bn % 32) return "the TMA-store epilogue stores C in 32- or 64-column panels: BN a multiple of 32";
  if (p.epi_panels && (!p.epilogue || p.split_k > 1)) return "epi_panels stages C panels for the TMA store: epilogue=1, split_k=1";
  if (p.stream_k && (!p.persistent || p.split_k > 1 || p.pingpong || p.consumers > 2))
    return "stream_k needs persistent=1, split_k=1, pingpong=0, consumers <= 2";
  if (p.swap_ab != 0 && p.swap_ab != 1) return "SWAP_AB must be 0 or 1";
  if (p.warp_producer != 0 && p.warp_producer != 1) return "WARP_PRODUCER must be 0 or 1";
  if (p.stage_k != BOX_K && p.stage_k != 2 * BOX_K) return "STAGE_K must be 64 or 128";
  if (p.pad_rows != 0 && p.pad_rows != 1) return "PAD_ROWS must be 0 or 1";
  if (p.pad_rows && p.stream_k) return "pad_rows keeps the workspace for the padded rows: stream_k=0";
  if (p.swap_ab && (p.epilogue || p.split_dsmem || p.stream_k || p.pingpong))
    return "swap_ab stores C transposed from the registers or the workspace: epilogue=0, split_dsmem=0, stream_k=0, "
           "pingpong=0 (its element stores spill a ping-pong consumer's registers)";
  if (wg_rows(p) != 64 && wg_rows(p) != 128) return "tile rows per consumer warpgroup must be 64 or 128";
  if (accumulators(p) > max_accumulators(p)) return "too many accumulator registers per consumer thread";
  if (p.cluster_m > 1 && (p.bn / p.cluster_m) % 8) return "a multicast slice must be whole 8-row swizzle groups";
  return nullptr;
}

// k-blocks (ring stages) for a K: the last may be partial (TMA zero-fills it).
constexpr long long k_blocks(int stage_k, long long K) { return (K + stage_k - 1) / stage_k; }

// With pad_rows, A (M x K) and Bt (N x K) are first copied into the workspace with rows of padded_k(K) halves (16
// bytes, TMA's rule), A's rows then Bt's; the split-K partials follow at the next 256-byte boundary.
constexpr long long padded_k(long long K) { return (K + 7) / 8 * 8; }
constexpr long long pad_bytes(const Params& p, long long M, long long N, long long K) {
  return p.pad_rows ? ((M + N) * padded_k(K) * 2 + 255) / 256 * 256 : 0;
}
constexpr long long partial_bytes(const Params& p, long long M, long long N) {
  return p.split_k > 1 && !dsmem(p) ? static_cast<long long>(p.split_k) * M * N * 4 : 0;
}
// Where the copies of all of A and Bt do not fit the workspace, C is computed block by block: rows [m0, m0 + bm) of
// A and [n0, n0 + bn) of Bt copied, then their GEMM; each block's sides are multiples of PAD_BLOCK rows (or the
// whole side), and the copies of one block's rows fill at most the workspace.
constexpr long long PAD_BLOCK = 256;
constexpr long long pad_room(long long K) { return WORKSPACE_BYTES / (padded_k(K) * 2); }  // padded rows that fit
constexpr bool pad_blocked(long long M, long long N, long long K) { return (M + N) * padded_k(K) * 2 > WORKSPACE_BYTES; }
constexpr long long pad_block_m(long long M, long long N, long long K) {
  const long long room = pad_room(K);
  if (!pad_blocked(M, N, K) || M <= room / 2) return M;
  if (N <= room / 2) return (room - N) / PAD_BLOCK * PAD_BLOCK;
  return room / 2 / PAD_BLOCK * PAD_BLOCK;
}
constexpr long long pad_block_n(long long M, long long N, long long K) {
  if (!pad_blocked(M, N, K)) return N;
  const long long left = pad_room(K) - pad_block_m(M, N, K);  // rows of Bt beside a block's rows of A
  return N <= left ? N : left / PAD_BLOCK * PAD_BLOCK;
}

// The first rule the shape M x N x K breaks for `p` (what hgemm_supports refuses), or nullptr. Any M; partial
// tiles in M, N and K are loaded by TMA with zero fill and stored clipped (TMA) or predicated (the other
// stores). TMA's own rule, every row it reads or writes 16-byte aligned, leaves two: rows of A and Bt that are
// not (K not a multiple of 8) are copied first (pad_rows), and rows of C that are not are stored from the
// registers, element by element where N is odd.
constexpr const char* shape_violation(const Params& p, long long M, long long N, long long K) {
  if (M <= 0 || N <= 0 || K <= 0) return "empty shape";
  if (K % 8 && !p.pad_rows) return "K must be a multiple of 8 (TMA needs 16-byte rows of A and Bt), or pad_rows=1";
  if (K % 8 == 0 && p.pad_rows) return "pad_rows is for K not a multiple of 8 (these rows are 16-byte aligned)";
  if (N % 8 && (p.epilogue || p.split_k > 1))
    return "N must be a multiple of 8 for the TMA store (16-byte rows of C) and for split-K's sum (whole float4s): "
           "epilogue=0, split_k=1";
  if (k_blocks(bk(p), K) < p.split_k) return "fewer k-blocks than split_k";
  if (partial_bytes(p, M, N) > WORKSPACE_BYTES) return "split-K partials exceed the 64 MiB workspace";
  if (p.pad_rows && pad_blocked(M, N, K)) {
    if (pad_room(K) < 2 * PAD_BLOCK) return "K too long for PAD_BLOCK padded rows of A and of Bt in the workspace";
    if (partial_bytes(p, M, N) > 0)
      return "the padded rows of A and Bt fill the 64 MiB workspace, block by block: no room for split-K partials";
  } else if (pad_bytes(p, M, N, K) + partial_bytes(p, M, N) > WORKSPACE_BYTES) {
    return "the padded rows of A and Bt and the split-K partials exceed the 64 MiB workspace";
  }
  return nullptr;
}

}  // namespace wgmma_rules
