// How fast can one SM fill its shared memory from the L2, and does the way it loads matter?
//
// The wgmma family's main loop on 64-row tiles takes about as long per k-block with its wgmma removed as with it
// (NOTES items 62-65), and its time per k-block tracks the bytes a CTA receives per k-block: 64x64 tiles (16 KiB)
// about 140 ns, 64x128 tiles at 1024^3 (24 KiB) about 220 ns: both about 64 bytes per SM clock. Is that a ceiling
// of the SM's fill rate from the L2, of the TMA unit, or of our ring?
//
// Each CTA (one per SM) streams `iters` stages of `rows` rows of 128 bytes (one k-block of a tile that many rows
// tall: A's 64 rows plus Bt's N) from a buffer that stays in the L2 into a ring of `stages` slots, as the GEMM's
// producer does; one consumer warpgroup waits for every slot and frees it (reading it first with READ). The ring
// and the barriers are the family's (wgmma_ptx.cuh). Ways to load a stage:
//   tma     one thread issues 2-D tensor loads, boxes of up to 256 rows, 128-byte swizzle (the family's loads)
//   tma_mc  the same in a 2x1 cluster: each CTA loads half of every stage's rows, multicast into both CTAs
//   bulk    one thread issues one 1-D bulk copy of the stage's bytes (no tensor map)
//   cpasync 128 producer threads copy 16 bytes at a time (cp.async.cg), completion on the slot's barrier
//   mixed   the first half of the rows by tensor loads, the second half by cp.async, at the same time
//   tma_mc4 a 4x1 cluster: each CTA loads a quarter of every stage's rows, multicast into all four
//   tma_2x2 a 2x2 cluster as a GEMM with 64-row tiles would run it: a stage's first 64 rows (A) are shared by the
//           two CTAs of a row (x = rank & 1 varies), the rest (Bt) by the two of a column; each CTA loads half of
//           each part, 32-row boxes, multicast to the pair that shares it
// Printed per configuration: the median over CTAs of bytes received per SM clock (clock64 around the consumer's
// loop), the slowest CTA's, the aggregate rate over all CTAs (globaltimer, first start to last end), and the share
// of its loop that thread 0 of the producer and of the consumer spent waiting on a barrier (mean over CTAs).
//
// Build and run: nvcc -O3 -std=c++17 -arch=sm_90a -I../../evaluator/kernels probe.cu -o probe && ./probe [out.json]
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "wgmma_ptx.cuh"

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e = (x);                                                                      \
    if (e != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

enum Mode { TMA = 0, TMA_MC = 1, BULK = 2, CPASYNC = 3, MIXED = 4, TMA_MC4 = 5, TMA_MC2X2 = 6 };
static const char* kModeNames[] = {"tma", "tma_mc", "bulk", "cpasync", "mixed", "tma_mc4", "tma_2x2"};

// CTAs per cluster, and the rows of a tensor map's box, by mode.
__host__ __device__ constexpr int cluster_size(int mode) {
  return mode == TMA_MC ? 2 : (mode == TMA_MC4 || mode == TMA_MC2X2 ? 4 : 1);
}
__host__ __device__ constexpr int box_rows(int mode, int rows) {
  if (mode == TMA_MC || mode == MIXED) return rows / 2;
  if (mode == TMA_MC4) return rows / 4;
  if (mode == TMA_MC2X2) return 32;
  return rows > 256 ? 256 : rows;
}

constexpr int ROW_BYTES = 128;
constexpr int PRODUCER_THREADS = 128;  // warpgroup 0 (cp.async uses all of it; TMA one elected thread)
constexpr int CONSUMER_THREADS = 128;  // warpgroup 1

struct Timing {
  long long cycles;
  long long producer_cycles, producer_wait, consumer_wait;  // thread 0 of each side: its loop, time in mbar_wait
  unsigned long long start_ns, end_ns;
  unsigned sink;
};

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// An arrive on `bar` once every cp.async this thread issued before has landed (counted in the barrier's init).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Stage i of CTA `cta` reads slot (cta * 7919 + i) mod the buffer's slots of `rows` rows. The slot advances by
// one a stage, with no division in the loop (a first version divided 64-bit integers every stage: about 400
// clocks of the producer thread's time, which bounded one CTA to a stage per ~250 ns).
__device__ __forceinline__ int first_slot(int cta, int rows, int total_rows) {
  return static_cast<int>((static_cast<long long>(cta) * 7919) % (total_rows / rows));
}

template <int MODE, int ROWS, int STAGES, bool READ>
__global__ void __launch_bounds__(PRODUCER_THREADS + CONSUMER_THREADS)
    fill(const __grid_constant__ CUtensorMap map, const uint8_t* buf, int total_rows, int iters, Timing* out) {
#if HGW_DEVICE_OK  // the helpers exist in sm_90a device code only
  using namespace hgw;
  constexpr int STAGE_BYTES = ROWS * ROW_BYTES;
  constexpr int CLUSTER = cluster_size(MODE);
  // Rows of a stage this CTA loads by tensor loads, and by cp.async.
  constexpr int TMA_ROWS = MODE == TMA ? ROWS : (MODE == TMA_MC || MODE == MIXED ? ROWS / 2 : 0);
  constexpr bool MULTI4 = MODE == TMA_MC4 || MODE == TMA_MC2X2;
  constexpr int CP_ROWS = MODE == CPASYNC ? ROWS : (MODE == MIXED ? ROWS / 2 : 0);
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t ring = (raw + 1023u) & ~1023u;
  const uint32_t full = ring + STAGES * STAGE_BYTES;
  const uint32_t empty = full + STAGES * 8;
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  const uint32_t rank = CLUSTER > 1 ? cluster_ctarank() : 0;
  const int cta = blockIdx.x / CLUSTER;  // the pair shares its stages' rows

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      // full: the TMA thread's expect_tx arrive and/or one noinc arrive per cp.async thread
      mbar_init(full + 8 * s, (TMA_ROWS > 0 || MODE == BULK || MULTI4 ? 1 : 0) + (CP_ROWS > 0 ? PRODUCER_THREADS : 0));
      mbar_init(empty + 8 * s, 4 * CLUSTER);  // every consumer warp of the cluster
    }
    mbar_init_fence();
  }
  if (CLUSTER > 1) {
    cluster_sync();
  } else {
    __syncthreads();
  }

  if (wg == 0) {
    // One producer thread, as the family's, unless cp.async is used; the others idle to the cluster barrier.
    const int my_iters = CP_ROWS > 0 || t == 0 ? iters : 0;
    int s = 0;
    uint32_t phase = 0;
    const int slots = total_rows / ROWS;
    int slot = first_slot(cta, ROWS, total_rows);
    const long long p0 = clock64();
    long long waited = 0;
    for (int i = 0; i < my_iters; ++i) {
      const long long w0 = clock64();
      mbar_wait(empty + 8 * s, phase ^ 1);
      waited += clock64() - w0;
      const uint32_t dst = ring + s * STAGE_BYTES;
      const uint32_t bar = full + 8 * s;
      const int row0 = slot * ROWS;
      if (++slot == slots) slot = 0;
      if (t == 0) {
        if constexpr (MODE == BULK) {
          mbar_arrive_expect_tx(bar, STAGE_BYTES);
          bulk_load(dst, buf + static_cast<size_t>(row0) * ROW_BYTES, STAGE_BYTES, bar);
        } else if constexpr (MODE == TMA_MC4) {
          mbar_arrive_expect_tx(bar, STAGE_BYTES);
          const int mine = rank * (ROWS / 4);
          tma_load_2d_multicast(dst + mine * ROW_BYTES, &map, bar, 0, row0 + mine, 0xF);
        } else if constexpr (MODE == TMA_MC2X2) {
          static_assert(ROWS > 64 && (ROWS - 64) % 64 == 0, "64 rows of A, Bt in pairs of 32-row boxes");
          mbar_arrive_expect_tx(bar, STAGE_BYTES);
          const uint32_t x = rank & 1, y = rank >> 1;
          const int a = x * 32;  // this CTA's half of A, to both CTAs of its row (ranks 2y, 2y + 1)
          tma_load_2d_multicast(dst + a * ROW_BYTES, &map, bar, 0, row0 + a, static_cast<uint16_t>(0x3u << (2 * y)));
          constexpr int HALF_B = (ROWS - 64) / 2;  // this CTA's half of Bt, to both CTAs of its column (x, x + 2)
#pragma unroll
          for (int r = 0; r < HALF_B; r += 32) {
            const int b = 64 + static_cast<int>(y) * HALF_B + r;
            tma_load_2d_multicast(dst + b * ROW_BYTES, &map, bar, 0, row0 + b,
                                  static_cast<uint16_t>((1u << x) | (1u << (x + 2))));
          }
        } else if constexpr (TMA_ROWS > 0) {
          mbar_arrive_expect_tx(bar, (MODE == TMA_MC ? ROWS : TMA_ROWS) * ROW_BYTES);
          constexpr int BOX = TMA_ROWS > 256 ? 256 : TMA_ROWS;
#pragma unroll
          for (int r = 0; r < TMA_ROWS; r += BOX) {
            if constexpr (MODE == TMA_MC) {
              const int mine = rank * TMA_ROWS + r;
              tma_load_2d_multicast(dst + mine * ROW_BYTES, &map, bar, 0, row0 + mine, 0x3);
            } else {
              tma_load_2d(dst + r * ROW_BYTES, &map, bar, 0, row0 + r);
            }
          }
        }
      }
      if constexpr (CP_ROWS > 0) {
        constexpr int FIRST = ROWS - CP_ROWS;  // cp.async takes the last rows of the stage
        constexpr int CHUNKS = CP_ROWS * ROW_BYTES / 16;
#pragma unroll 4
        for (int c = t; c < CHUNKS; c += PRODUCER_THREADS) {
          const int off = FIRST * ROW_BYTES + c * 16;
          cp_async_16(dst + off, buf + static_cast<size_t>(row0) * ROW_BYTES + off);
        }
        cp_async_arrive(bar);
      }
      if (++s == STAGES) {
        s = 0;
        phase ^= 1;
      }
    }
    if (t == 0) {
      out[blockIdx.x].producer_cycles = clock64() - p0;
      out[blockIdx.x].producer_wait = waited;
    }
  } else {
    unsigned acc = 0;
    long long cwaited = 0;
    long long c0 = 0;
    unsigned long long n0 = 0;
    if (t == 0) {
      c0 = clock64();
      n0 = global_ns();
    }
    int s = 0;
    uint32_t phase = 0;
    for (int i = 0; i < iters; ++i) {
      const long long w0 = clock64();
      mbar_wait(full + 8 * s, phase);
      cwaited += clock64() - w0;
      if constexpr (READ) {  // the whole stage once, as a wgmma group reads its operands
        const uint32_t base = ring + s * STAGE_BYTES;
#pragma unroll 4
        for (int c = t; c < STAGE_BYTES / 16; c += CONSUMER_THREADS) {
          uint32_t a, b, d, e;
          asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(a), "=r"(b), "=r"(d), "=r"(e)
                       : "r"(base + c * 16));
          acc ^= a ^ b ^ d ^ e;
        }
      }
      __syncwarp();
      if (t % 32 == 0) {
        if constexpr (CLUSTER > 1) {
          for (uint32_t c = 0; c < CLUSTER; ++c) mbar_arrive_cluster(empty + 8 * s, c);
        } else {
          mbar_arrive(empty + 8 * s);
        }
      }
      if (++s == STAGES) {
        s = 0;
        phase ^= 1;
      }
    }
    if (t == 0) {
      out[blockIdx.x].cycles = clock64() - c0;
      out[blockIdx.x].consumer_wait = cwaited;
      out[blockIdx.x].start_ns = n0;
      out[blockIdx.x].end_ns = global_ns();
    }
    if (acc == 0x9e3779b9u) out[blockIdx.x].sink = acc;  // keeps READ's loads
  }
  if (CLUSTER > 1) cluster_sync();  // no CTA leaves while its peer may still multicast into it or arrive on it
#endif
}

// ---------------------------------------------------------------------------------------------------------------

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
  if (q != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "no cuTensorMapEncodeTiled\n");
    std::exit(1);
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
}

// The buffer as rows of 64 fp16, boxes of 64 x box_rows with 128-byte swizzle (as the wgmma family's maps).
static CUtensorMap make_map(const void* buf, int total_rows, int box_rows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {64, static_cast<cuuint64_t>(total_rows)};
  cuuint64_t strides[1] = {ROW_BYTES};
  cuuint32_t box[2] = {64, static_cast<cuuint32_t>(box_rows)};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(buf), dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled: %d\n", static_cast<int>(r));
    std::exit(1);
  }
  return map;
}

struct Result {
  const char* mode;
  int rows, stages, read, ctas;
  double median_bpc, slowest_bpc, aggregate_tbs, ns_per_stage;
  double producer_waits, consumer_waits;  // share of its loop thread 0 of each side spent waiting, mean over CTAs
};

template <int MODE, int ROWS, int STAGES, bool READ>
static Result run(const uint8_t* buf, int total_rows, int want_ctas, int iters, int clock_khz) {
  constexpr int STAGE_BYTES = ROWS * ROW_BYTES;
  const size_t smem = 1024 + STAGES * (STAGE_BYTES + 16);
  auto kernel = fill<MODE, ROWS, STAGES, READ>;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const CUtensorMap map = make_map(buf, total_rows, box_rows(MODE, ROWS));
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(PRODUCER_THREADS + CONSUMER_THREADS);
  cfg.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_size(MODE);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  // At most as many clusters as fit at once (SMs per GPC need not divide by 4), in whole clusters.
  int ctas = want_ctas / cluster_size(MODE) * cluster_size(MODE);
  if (cluster_size(MODE) > 1) {
    int fit = 0;
    cfg.gridDim = dim3(ctas);
    CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg));
    ctas = std::min(ctas, fit * cluster_size(MODE));
  }
  cfg.gridDim = dim3(ctas);
  Timing* out = nullptr;
  CHECK(cudaMalloc(&out, ctas * sizeof(Timing)));
  std::vector<Timing> host(ctas);
  Result res{kModeNames[MODE], ROWS, STAGES, READ ? 1 : 0, ctas, 0, 0, 0, 0, 0, 0};
  for (int rep = 0; rep < 4; ++rep) {  // the first run warms the L2; keep the best of the other three
    CHECK(cudaLaunchKernelEx(&cfg, kernel, map, buf, total_rows, iters, out));
    CHECK(cudaDeviceSynchronize());
    if (rep == 0) continue;
    CHECK(cudaMemcpy(host.data(), out, ctas * sizeof(Timing), cudaMemcpyDeviceToHost));
    std::vector<double> bpc(ctas);
    unsigned long long first = ~0ull, last = 0;
    for (int c = 0; c < ctas; ++c) {
      bpc[c] = static_cast<double>(iters) * STAGE_BYTES / static_cast<double>(host[c].cycles);
      first = std::min(first, host[c].start_ns);
      last = std::max(last, host[c].end_ns);
    }
    std::sort(bpc.begin(), bpc.end());
    const double median = bpc[ctas / 2];
    if (median > res.median_bpc) {
      res.median_bpc = median;
      res.slowest_bpc = bpc[0];
      res.aggregate_tbs = static_cast<double>(iters) * STAGE_BYTES * ctas / static_cast<double>(last - first) / 1e3;
      double pw = 0, cw = 0;
      for (int c = 0; c < ctas; ++c) {
        pw += static_cast<double>(host[c].producer_wait) / static_cast<double>(host[c].producer_cycles) / ctas;
        cw += static_cast<double>(host[c].consumer_wait) / static_cast<double>(host[c].cycles) / ctas;
      }
      res.producer_waits = pw;
      res.consumer_waits = cw;
      res.ns_per_stage = clock_khz > 0 ? STAGE_BYTES / median / (clock_khz * 1e-6) : 0.0;
    }
  }
  CHECK(cudaFree(out));
  return res;
}

int main(int argc, char** argv) {
  int sms = 0, clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0) != cudaSuccess) {  // ns per stage then unknown
    (void)cudaGetLastError();
    clock_khz = 0;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const size_t bytes = 16u << 20;  // 16 MiB: stays in the L2
  const int total_rows = static_cast<int>(bytes / ROW_BYTES);
  uint8_t* buf = nullptr;
  CHECK(cudaMalloc(&buf, bytes));
  CHECK(cudaMemset(buf, 1, bytes));
  const int iters = 2048;
  std::printf("%s, %d SMs, clock %d MHz (ns per stage at that clock)\n", prop.name, sms, clock_khz / 1000);
  std::printf("%-8s %5s %6s %4s %5s %10s %10s %9s %8s %9s %9s\n", "mode", "rows", "stages", "read", "ctas",
              "B/clk med", "B/clk min", "TB/s", "ns/stage", "prod wait", "cons wait");
  std::vector<Result> all;
  auto show = [&](Result r) {
    std::printf("%-8s %5d %6d %4d %5d %10.1f %10.1f %9.2f %8.1f %9.2f %9.2f\n", r.mode, r.rows, r.stages, r.read,
                r.ctas, r.median_bpc, r.slowest_bpc, r.aggregate_tbs, r.ns_per_stage, r.producer_waits,
                r.consumer_waits);
    std::fflush(stdout);
    all.push_back(r);
  };
  const int pairs = sms / 2 * 2;
  for (int ctas : {1, sms}) {
    const int even = ctas == 1 ? 2 : pairs;
    // A 64x64 tile's k-block (128 rows), 64x128 (192 rows), 128x128 (256 rows); rings of the family's depth.
    show(run<TMA, 128, 1, false>(buf, total_rows, ctas, iters, clock_khz));  // ring depth: 1, 2, 4, 8, 12
    show(run<TMA, 128, 2, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 128, 4, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 128, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 128, 8, true>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 128, 12, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 192, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 192, 8, true>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 256, 6, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA, 64, 16, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<TMA_MC, 128, 8, false>(buf, total_rows, even, iters, clock_khz));
    show(run<TMA_MC, 192, 8, false>(buf, total_rows, even, iters, clock_khz));
    show(run<TMA_MC, 192, 8, true>(buf, total_rows, even, iters, clock_khz));
    show(run<TMA_MC4, 128, 8, false>(buf, total_rows, ctas == 1 ? 4 : ctas, iters, clock_khz));
    show(run<TMA_MC4, 192, 8, false>(buf, total_rows, ctas == 1 ? 4 : ctas, iters, clock_khz));
    show(run<TMA_MC2X2, 192, 8, false>(buf, total_rows, ctas == 1 ? 4 : ctas, iters, clock_khz));
    show(run<TMA_MC2X2, 192, 8, true>(buf, total_rows, ctas == 1 ? 4 : ctas, iters, clock_khz));
    show(run<TMA_MC2X2, 128, 8, false>(buf, total_rows, ctas == 1 ? 4 : ctas, iters, clock_khz));
    show(run<BULK, 128, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<BULK, 192, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<CPASYNC, 128, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<CPASYNC, 192, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<MIXED, 128, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<MIXED, 192, 8, false>(buf, total_rows, ctas, iters, clock_khz));
    show(run<MIXED, 192, 8, true>(buf, total_rows, ctas, iters, clock_khz));
  }
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 1;
    std::fprintf(f, "{\"gpu\": \"%s\", \"sms\": %d, \"clock_mhz\": %d, \"rows\": [\n", prop.name, sms, clock_khz / 1000);
    for (size_t i = 0; i < all.size(); ++i) {
      const Result& r = all[i];
      std::fprintf(f,
                   "  {\"mode\": \"%s\", \"rows\": %d, \"stages\": %d, \"read\": %d, \"ctas\": %d, "
                   "\"bytes_per_clock_median\": %.2f, \"bytes_per_clock_slowest\": %.2f, \"aggregate_tb_s\": %.3f, "
                   "\"ns_per_stage\": %.1f, \"producer_waits\": %.3f, \"consumer_waits\": %.3f}%s\n",
                   r.mode, r.rows, r.stages, r.read, r.ctas, r.median_bpc, r.slowest_bpc, r.aggregate_tbs,
                   r.ns_per_stage, r.producer_waits, r.consumer_waits, i + 1 < all.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  CHECK(cudaFree(buf));
  return 0;
}
