// Do L2 lines a kernel marks evict_last survive the evaluator's flush (a memset of twice the L2)?
//
// X (16 MiB by default) is read with a given L2 policy, optionally rewritten by a plain kernel (as the evaluator's
// refresh does before every sample), the L2 is flushed with cudaMemsetAsync of 2 x L2 bytes (as in server
// mode), optionally after a defence, and then X is read once more with plain loads, timed with events.
// The timed read's time against a cold read (written, flushed) and a warm one (just read) says how much of
// X was still in the L2. Prints one line per scenario: median, p10, p90 of 25 repetitions (us) and the
// share of X the timed read found in the L2, (cold - t) / (cold - warm). Three passes: the persisting
// set-aside as the process starts, set to 0, set to its maximum. Then, as offline mode runs calls, the second
// of two back-to-back reads of X under each policy, and the host's time for the reset call.
//
// Build and run: nvcc -O3 -arch=sm_90a probe.cu -o probe && ./probe [MiB]
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e = (x);                                                                      \
    if (e != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

enum Policy { PLAIN = 0, EVICT_LAST = 1, PREFETCH_LAST = 2, EVICT_FIRST = 3, FRACTION_HALF = 4 };

__global__ void read_x(const uint4* x, size_t n, int policy, unsigned* sink) {
  unsigned acc = 0;
  uint64_t pol = 0;
  if (policy == EVICT_LAST) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  if (policy == EVICT_FIRST) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  if (policy == FRACTION_HALF)
    asm volatile("createpolicy.fractional.L2::evict_last.L2::evict_first.b64 %0, 0.5;" : "=l"(pol));
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint4 v;
    if (policy == PLAIN) {
      v = x[i];
    } else if (policy == PREFETCH_LAST) {
      asm volatile("prefetch.global.L2::evict_last [%0];" ::"l"(x + i));
      v = make_uint4(0, 0, 0, 0);
    } else {
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(x + i), "l"(pol));
    }
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void write_x(uint4* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = make_uint4(seed, seed + 1, seed + 2, static_cast<unsigned>(i));
}

// Holds the stream for about `cycles` clocks (the reset-ordering scenario enqueues it ahead of everything).
__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// The defence of scenario "applypriority": every 128-byte line of X back to evict_normal.
__global__ void normal_priority(const char* x, size_t bytes) {
  for (size_t i = (blockIdx.x * blockDim.x + threadIdx.x) * 128ull; i < bytes; i += gridDim.x * blockDim.x * 128ull)
    asm volatile("applypriority.global.L2::evict_normal [%0], 128;" ::"l"(x + i));
}

struct Scenario {
  const char* name;
  int touch;         // policy of the read before the flush; -1: none
  bool refresh;      // rewrite X with a plain kernel after that read
  bool flush;        // memset 2 x L2
  int defence;       // 0 none, 1 cudaCtxResetPersistingL2Cache, 2 applypriority over X, 3 the reset called
                     // while a 2 ms spin still holds the stream ahead of the evict_last read (is it ordered?)
};

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 16;
  const size_t bytes = mib << 20, n = bytes / 16;
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  size_t limit = 0;
  CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
  std::printf("%s, L2 %d MiB, persisting max %d MiB, persisting limit %zu, X %zu MiB\n", prop.name,
              prop.l2CacheSize >> 20, prop.persistingL2CacheMaxSize >> 20, limit, mib);
  const size_t flush_bytes = 2ull * prop.l2CacheSize;
  uint4* x;
  char* flush;
  unsigned* sink;
  CHECK(cudaMalloc(&x, bytes));
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&sink, 4));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int blocks = prop.multiProcessorCount * 4, threads = 512;

  const Scenario scenarios[] = {
      {"warm: plain read, no flush", PLAIN, false, false, 0},
      {"cold: written, flushed", -1, true, true, 0},
      {"plain read, refresh, flush", PLAIN, true, true, 0},
      {"evict_last read, flush", EVICT_LAST, false, true, 0},
      {"evict_last read, refresh, flush", EVICT_LAST, true, true, 0},
      {"prefetch evict_last, refresh, flush", PREFETCH_LAST, true, true, 0},
      {"half evict_last, refresh, flush", FRACTION_HALF, true, true, 0},
      {"evict_first read, refresh, flush", EVICT_FIRST, true, true, 0},
      {"evict_last, refresh, reset persisting, flush", EVICT_LAST, true, true, 1},
      {"evict_last, refresh, applypriority X, flush", EVICT_LAST, true, true, 2},
      {"spin, evict_last, refresh, reset at once, flush", EVICT_LAST, true, true, 3},
  };
  std::vector<float> medians;
  float cold = 0, warm = 0;
  const size_t start_limit = limit;
  for (int pass = 0; pass < 3; ++pass) {
    if (pass == 1) {
      CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
      CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
      std::printf("-- persisting limit %zu (was %zu)\n", limit, start_limit);
    }
    if (pass == 2) {
      // The same with the persisting set-aside at its maximum (a candidate cannot set it; for reference).
      CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, prop.persistingL2CacheMaxSize));
      CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
      std::printf("-- persisting limit %zu MiB\n", limit >> 20);
    }
    for (const Scenario& sc : scenarios) {
      // Each scenario starts with no line marked persisting by the one before.
      CHECK(cudaStreamSynchronize(s));
      CHECK(cudaCtxResetPersistingL2Cache());
      std::vector<float> t;
      for (int rep = 0; rep < 26; ++rep) {
        write_x<<<blocks, threads, 0, s>>>(x, n, rep);
        CHECK(cudaMemsetAsync(flush, rep, flush_bytes, s));
        if (sc.defence == 3) spin<<<1, 1, 0, s>>>(4000000ll);  // about 2 ms at 1.98 GHz
        if (sc.touch >= 0) read_x<<<blocks, threads, 0, s>>>(x, n, sc.touch, sink);
        if (sc.refresh) write_x<<<blocks, threads, 0, s>>>(x, n, rep + 1000);
        if (sc.defence == 1 || sc.defence == 3) CHECK(cudaCtxResetPersistingL2Cache());
        if (sc.defence == 2) normal_priority<<<blocks, threads, 0, s>>>(reinterpret_cast<char*>(x), bytes);
        if (sc.flush) CHECK(cudaMemsetAsync(flush, rep + 1, flush_bytes, s));
        CHECK(cudaEventRecord(e0, s));
        read_x<<<blocks, threads, 0, s>>>(x, n, PLAIN, sink);
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaStreamSynchronize(s));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) t.push_back(ms * 1000.f);
      }
      std::sort(t.begin(), t.end());
      const float med = t[t.size() / 2], p10 = t[t.size() / 10], p90 = t[t.size() * 9 / 10];
      if (sc.name[0] == 'w') warm = med;
      if (sc.name[0] == 'c') cold = med;
      const float share = cold > warm ? (cold - med) / (cold - warm) : 0.f;
      std::printf("%-48s %8.2f us  p10 %8.2f  p90 %8.2f  in L2 %5.0f%%\n", sc.name, med, p10, p90,
                  sc.name[0] == 'w' ? 100.f : 100.f * share);
    }
  }
  // Offline mode keeps the L2 between calls: does marking help a read that follows a read of the same X?
  // Timed: the second of two back-to-back reads, both under the same policy; with the set-aside as the process
  // started, and at 0.
  for (size_t aside : {start_limit, size_t(0)}) {
    CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, aside));
    for (int policy : {PLAIN, EVICT_LAST, FRACTION_HALF}) {
      std::vector<float> t;
      for (int rep = 0; rep < 26; ++rep) {
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaCtxResetPersistingL2Cache());
        CHECK(cudaMemsetAsync(flush, rep, flush_bytes, s));
        read_x<<<blocks, threads, 0, s>>>(x, n, policy, sink);
        CHECK(cudaEventRecord(e0, s));
        read_x<<<blocks, threads, 0, s>>>(x, n, policy, sink);
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaStreamSynchronize(s));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (rep > 0) t.push_back(ms * 1000.f);
      }
      std::sort(t.begin(), t.end());
      std::printf("back-to-back reads, set-aside %2zu MiB, %-12s %8.2f us  p10 %8.2f  p90 %8.2f\n", aside >> 20,
                  policy == PLAIN ? "plain" : policy == EVICT_LAST ? "evict_last" : "half marked",
                  t[t.size() / 2], t[t.size() / 10], t[t.size() * 9 / 10]);
    }
  }

  // Does the reset wait for the GPU? The host's time for the call with a 2 ms spin queued, and with none.
  for (int busy = 1; busy >= 0; --busy) {
    CHECK(cudaStreamSynchronize(s));
    if (busy) spin<<<1, 1, 0, s>>>(4000000ll);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(cudaCtxResetPersistingL2Cache());
    const auto t1 = std::chrono::steady_clock::now();
    const bool still_busy = cudaStreamQuery(s) == cudaErrorNotReady;
    std::printf("reset call with %s queued: %.1f us on the host; the stream %s busy after it\n",
                busy ? "a 2 ms spin" : "nothing", std::chrono::duration<double, std::micro>(t1 - t0).count(),
                still_busy ? "still" : "no longer");
  }
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGetLastError());
  return 0;
}
