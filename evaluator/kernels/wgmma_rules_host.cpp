// A host build of wgmma_rules.cuh for the search (evaluator/kernels/rules.py loads it with ctypes): the
// kernel's own rules and formulas, evaluated by a real compiler, not restated in Python.
#include "wgmma_rules.cuh"

namespace {
wgmma_rules::Params params(const int* v) {
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12]};
}
}  // namespace

extern "C" {
int wgmma_bk() { return wgmma_rules::BK; }
const char* wgmma_violation(const int* v) { return wgmma_rules::violation(params(v)); }
const char* wgmma_shape_violation(const int* v, long long M, long long N, long long K) {
  return wgmma_rules::shape_violation(params(v), M, N, K);
}
int wgmma_smem_bytes(const int* v) { return wgmma_rules::smem_bytes(params(v)); }
int wgmma_tails(const int* v) { return wgmma_rules::tails(params(v)) ? 1 : 0; }
int wgmma_c_panel(const int* v) { return wgmma_rules::c_panel(params(v)); }
int wgmma_wg_rows(const int* v) { return wgmma_rules::wg_rows(params(v)); }

// Walk every point of a declared space (values[i][0 .. counts[i]-1] for the 13 parameters): how many
// points the rules accept, and how many accepted points break what the formulas promise (rows per
// consumer 64 or 128, accumulators within their budget, shared memory positive and 1024-aligned in
// its slack, a multicast slice of whole swizzle groups).
long long wgmma_walk(const int* const* values, const int* counts, long long* accepted) {
  long long broken = 0, ok = 0;
  int index[13] = {0};
  while (true) {
    int v[13];
    for (int i = 0; i < 13; ++i) v[i] = values[i][index[i]];
    const wgmma_rules::Params p = params(v);
    if (wgmma_rules::violation(p) == nullptr) {
      ++ok;
      const int rows = wgmma_rules::wg_rows(p);
      if ((rows != 64 && rows != 128) || wgmma_rules::accumulators(p) > wgmma_rules::max_accumulators(p) ||
          wgmma_rules::smem_bytes(p) <= 1024 || (p.cluster_m > 1 && (p.bn / p.cluster_m) % 8))
        ++broken;
    }
    int i = 12;
    while (i >= 0 && ++index[i] == counts[i]) index[i--] = 0;
    if (i < 0) break;
  }
  *accepted = ok;
  return broken;
}
}
