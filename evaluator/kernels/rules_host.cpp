// A host build of the families' rules headers for the search (evaluator/kernels/rules.py loads it with
// ctypes): each kernel's own rules and formulas, evaluated by a real compiler, not restated in Python.
#include "mma_rules.cuh"
#include "small_rules.cuh"
#include "gemv_rules.cuh"
#include "wgmma_rules.cuh"

namespace {

template <typename P, int N>
P params(const int* v) {
  static_assert(sizeof(P) == N * sizeof(int), "Params must be N ints");
  P p{};
  int* out = reinterpret_cast<int*>(&p);
  for (int i = 0; i < N; ++i) out[i] = v[i];
  return p;
}

// Walk every point of a declared space (values[i][0 .. counts[i]-1] for the N parameters): how many the
// rules accept, and how many accepted points break `sane` (what the formulas promise).
template <typename P, int N, typename Violation, typename Sane>
long long walk(const int* const* values, const int* counts, long long* accepted, Violation violation, Sane sane) {
  long long broken = 0, ok = 0;
  int index[N] = {0};
  while (true) {
    int v[N];
    for (int i = 0; i < N; ++i) v[i] = values[i][index[i]];
    const P p = params<P, N>(v);
    if (violation(p) == nullptr) {
      ++ok;
      if (!sane(p)) ++broken;
    }
    int i = N - 1;
    while (i >= 0 && ++index[i] == counts[i]) index[i--] = 0;
    if (i < 0) break;
  }
  *accepted = ok;
  return broken;
}

using W = wgmma_rules::Params;
using M = mma_rules::Params;
using S = small_rules::Params;
using G = gemv_rules::Params;
constexpr int WN = 17, MN = 10, SN = 6, GN = 6;

}  // namespace

extern "C" {
// wgmma
int wgmma_box_k() { return wgmma_rules::BOX_K; }
const char* wgmma_violation(const int* v) { return wgmma_rules::violation(params<W, WN>(v)); }
const char* wgmma_shape_violation(const int* v, long long m, long long n, long long k) {
  return wgmma_rules::shape_violation(params<W, WN>(v), m, n, k);
}
int wgmma_smem_bytes(const int* v) { return wgmma_rules::smem_bytes(params<W, WN>(v)); }
int wgmma_c_panel(const int* v) { return wgmma_rules::c_panel(params<W, WN>(v)); }
int wgmma_wg_rows(const int* v) { return wgmma_rules::wg_rows(params<W, WN>(v)); }
// pad_rows: the rows of A (m) and of Bt (n) per block of C, the whole sides where the copies fit the workspace
long long wgmma_pad_block(long long m, long long n, long long k, int side) {
  return side == 0 ? wgmma_rules::pad_block_m(m, n, k) : wgmma_rules::pad_block_n(m, n, k);
}
long long wgmma_walk(const int* const* values, const int* counts, long long* accepted) {
  return walk<W, WN>(values, counts, accepted, [](const W& p) { return wgmma_rules::violation(p); }, [](const W& p) {
    const int rows = wgmma_rules::wg_rows(p);
    return (rows == 64 || rows == 128) && wgmma_rules::accumulators(p) <= wgmma_rules::max_accumulators(p) &&
           wgmma_rules::smem_bytes(p) > 1024 && !(p.cluster_m > 1 && (p.bn / p.cluster_m) % 8);
  });
}

// mma_ms / mma_splitk
const char* mma_violation(const int* v) { return mma_rules::violation(params<M, MN>(v)); }
const char* mma_shape_violation(const int* v, long long m, long long n, long long k) {
  return mma_rules::shape_violation(params<M, MN>(v), m, n, k);
}
int mma_smem_bytes(const int* v) { return mma_rules::smem_bytes(params<M, MN>(v)); }
int mma_register_estimate(const int* v) { return mma_rules::register_estimate(params<M, MN>(v)); }
long long mma_walk(const int* const* values, const int* counts, long long* accepted) {
  return walk<M, MN>(values, counts, accepted, [](const M& p) { return mma_rules::violation(p); }, [](const M& p) {
    return mma_rules::threads(p) <= mma_rules::MAX_THREADS && mma_rules::smem_bytes(p) > 0 &&
           mma_rules::accumulators(p) <= mma_rules::MAX_ACCUMULATORS && mma_rules::wm(p) % 16 == 0;
  });
}

// small
const char* small_violation(const int* v) { return small_rules::violation(params<S, SN>(v)); }
const char* small_shape_violation(const int* v, long long m, long long n, long long k) {
  return small_rules::shape_violation(params<S, SN>(v), m, n, k);
}
int small_smem_bytes(const int* v) { return small_rules::smem_bytes(params<S, SN>(v)); }
int small_register_estimate(const int* v) { return small_rules::register_estimate(params<S, SN>(v)); }
long long small_walk(const int* const* values, const int* counts, long long* accepted) {
  return walk<S, SN>(values, counts, accepted, [](const S& p) { return small_rules::violation(p); }, [](const S& p) {
    return small_rules::threads(p) <= small_rules::MAX_THREADS && small_rules::smem_bytes(p) >= 0 &&
           small_rules::accumulators(p) <= small_rules::MAX_ACCUMULATORS;
  });
}

// gemv
const char* gemv_violation(const int* v) { return gemv_rules::violation(params<G, GN>(v)); }
const char* gemv_shape_violation(const int* v, long long m, long long n, long long k) {
  return gemv_rules::shape_violation(params<G, GN>(v), m, n, k);
}
int gemv_smem_bytes(const int* v) { return gemv_rules::smem_bytes(params<G, GN>(v)); }
int gemv_register_estimate(const int* v) { return gemv_rules::register_estimate(params<G, GN>(v)); }
long long gemv_walk(const int* const* values, const int* counts, long long* accepted) {
  return walk<G, GN>(values, counts, accepted, [](const G& p) { return gemv_rules::violation(p); }, [](const G& p) {
    return gemv_rules::threads(p) <= gemv_rules::MAX_THREADS && gemv_rules::smem_bytes(p) >= 0 &&
           gemv_rules::groups_per_cta(p) * p.ksplit == p.warps;
  });
}
}
