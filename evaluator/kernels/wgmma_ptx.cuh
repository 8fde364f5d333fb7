// Hopper (sm_90a) PTX helpers for the wgmma family: mbarriers, TMA bulk-tensor copies,
// wgmma fences and shared-memory matrix descriptors, register reallocation.
//
// Invariants: every helper is a thin inline-PTX wrapper with no hidden state. Shared-memory
// addresses are 32-bit `.shared::cta` addresses (from __cvta_generic_to_shared). Descriptors
// assume K-major tiles whose rows are 128 bytes (64 fp16) written by TMA with 128-byte
// swizzle, each tile starting on a 1024-byte boundary. Only compiled for sm_90a device code.
#pragma once

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HGW_DEVICE_OK 1
#else
#define HGW_DEVICE_OK 0
#endif

#if HGW_DEVICE_OK
namespace hgw {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers -----------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Arrive on the barrier at the same shared offset in CTA `cta` of this cluster. Default (CTA-scope
// release) semantics: the arriving warp's smem reads were wgmma's, already retired by
// wgmma.wait_group; an explicit `.release.cluster` adds a cluster-scope fence to every k-block.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

// Spin until the phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA ---------------------------------------------------------------------------------
__device__ __forceinline__ void tma_prefetch_desc(const void* tmap) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}

// 2-D tile load global -> shared, completion counted in bytes on `bar`. c0 = inner (K) coordinate.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// Same, delivered to the same shared offset in every CTA of `mask` (and signalling each CTA's `bar`).
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* tmap, uint32_t bar, int c0, int c1,
                                                      uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}

// 2-D tile store shared -> global (bulk group).
__device__ __forceinline__ void tma_store_2d(const void* tmap, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(tmap)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Wait until at most N committed store groups still read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Make generic-proxy shared-memory writes visible to the async proxy (TMA, wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// One lane of the converged calling warp is chosen (the same lane in every thread's answer).
__device__ __forceinline__ bool elect_one() {
  uint32_t chosen;
  asm volatile(
      "{\n.reg .pred p;\n"
      "elect.sync _|p, 0xffffffff;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(chosen));
  return chosen != 0;
}

// ---- cluster ------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// Cluster-wide barrier (release/acquire); not `.aligned`, so diverged warps may call it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// A cluster barrier that orders nothing by itself (H100: about 0.1 us against 0.7 us with release): for
// start-up, where fence.mbarrier_init.release.cluster already published the one thing peers need.
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;\n" ::: "memory");
}

// Address of the same shared-memory offset in cluster CTA `cta` (for ld.shared::cluster).
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t cta) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(cta));
  return r;
}

// 16-byte load from distributed shared memory (an address from cluster_map).
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// ---- shared-memory stores ----------------------------------------------------------------------
__device__ __forceinline__ void st_shared_f2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// ---- flags between CTAs (stream-K) --------------------------------------------------------------
// Release: every write this thread's CTA made before a barrier it passed is visible, GPU-wide,
// to whoever acquires the flag.
__device__ __forceinline__ void flag_release(unsigned* flag, unsigned value) {
  asm volatile("fence.acq_rel.gpu;\nst.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}

// Spin until *flag == value, with acquire semantics (the writer's data is visible afterwards).
__device__ __forceinline__ void flag_wait(const unsigned* flag, unsigned value) {
  unsigned v;
  do {
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  } while (v != value);
}

// ---- shared-memory matrix stores ---------------------------------------------------------
// Four 8x8 fp16 matrices: lane l holds row l/4, columns 2*(l%4)..+1 of matrix i in r_i (the mma
// accumulator layout); lanes 8i..8i+7 give the 16-byte-aligned row addresses of matrix i.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// ---- named barriers, registers -------------------------------------------------------------
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <uint32_t R>
__device__ __forceinline__ void regs_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

template <uint32_t R>
__device__ __forceinline__ void regs_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

// ---- wgmma ----------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keep the compiler from moving accumulator reads/writes across wgmma issue/wait points.
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row core groups 1024 bytes apart.
// Advancing 16 fp16 along K inside the 128-byte row is +32 bytes, i.e. +2 on the descriptor.
__device__ __forceinline__ uint64_t smem_desc_k128(uint32_t addr) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>(1) << 16;          // leading byte offset (unused when swizzled)
  d |= static_cast<uint64_t>(1024 >> 4) << 32;  // stride byte offset
  d |= static_cast<uint64_t>(1) << 62;          // 128-byte swizzle
  return d;
}

// The accumulator operands of one wgmma, 8 fp32 registers at a time: HGW_REGS_<n> is the PTX list of the
// first n ("%0, ..., %<n-1>"), HGW_ACC_<n> their "+f" bindings to d[0 .. n-1]. After them come the two
// descriptors (%<n>, %<n+1>) and the scale flag (%<n+2>).
#define HGW_REGS_8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define HGW_REGS_16 HGW_REGS_8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define HGW_REGS_24 HGW_REGS_16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define HGW_REGS_32 HGW_REGS_24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define HGW_REGS_40 HGW_REGS_32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define HGW_REGS_48 HGW_REGS_40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define HGW_REGS_56 HGW_REGS_48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define HGW_REGS_64 HGW_REGS_56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define HGW_REGS_72 HGW_REGS_64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define HGW_REGS_80 HGW_REGS_72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define HGW_REGS_88 HGW_REGS_80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define HGW_REGS_96 HGW_REGS_88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define HGW_REGS_104 HGW_REGS_96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define HGW_REGS_112 HGW_REGS_104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define HGW_REGS_120 HGW_REGS_112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define HGW_REGS_128 HGW_REGS_120 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define HGW_ACC_8 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define HGW_ACC_16 HGW_ACC_8, "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define HGW_ACC_24 HGW_ACC_16, "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define HGW_ACC_32 HGW_ACC_24, "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define HGW_ACC_40 HGW_ACC_32, "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define HGW_ACC_48 HGW_ACC_40, "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define HGW_ACC_56 HGW_ACC_48, "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define HGW_ACC_64 HGW_ACC_56, "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define HGW_ACC_72 HGW_ACC_64, "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define HGW_ACC_80 HGW_ACC_72, "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define HGW_ACC_88 HGW_ACC_80, "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define HGW_ACC_96 HGW_ACC_88, "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define HGW_ACC_104 HGW_ACC_96, "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
#define HGW_ACC_112 HGW_ACC_104, "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define HGW_ACC_120 HGW_ACC_112, "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
#define HGW_ACC_128 HGW_ACC_120, "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D[64 x 16] (+)= A[64 x 16] * B[16 x 16]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n16k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {" HGW_REGS_8 "}, %8, %9, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_8
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 32] (+)= A[64 x 16] * B[16 x 32]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n32k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {" HGW_REGS_16 "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_16
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 48] (+)= A[64 x 16] * B[16 x 48]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n48k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n48k16.f32.f16.f16 {" HGW_REGS_24 "}, %24, %25, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_24
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 64] (+)= A[64 x 16] * B[16 x 64]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n64k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" HGW_REGS_32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_32
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 80] (+)= A[64 x 16] * B[16 x 80]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n80k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n80k16.f32.f16.f16 {" HGW_REGS_40 "}, %40, %41, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_40
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 96] (+)= A[64 x 16] * B[16 x 96]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n96k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %50, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n96k16.f32.f16.f16 {" HGW_REGS_48 "}, %48, %49, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_48
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 112] (+)= A[64 x 16] * B[16 x 112]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n112k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %58, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n112k16.f32.f16.f16 {" HGW_REGS_56 "}, %56, %57, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_56
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 128] (+)= A[64 x 16] * B[16 x 128]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n128k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" HGW_REGS_64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_64
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 144] (+)= A[64 x 16] * B[16 x 144]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n144k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n144k16.f32.f16.f16 {" HGW_REGS_72 "}, %72, %73, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_72
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 160] (+)= A[64 x 16] * B[16 x 160]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n160k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16 {" HGW_REGS_80 "}, %80, %81, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_80
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 176] (+)= A[64 x 16] * B[16 x 176]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n176k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 {" HGW_REGS_88 "}, %88, %89, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_88
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 192] (+)= A[64 x 16] * B[16 x 192]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n192k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {" HGW_REGS_96 "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_96
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 208] (+)= A[64 x 16] * B[16 x 208]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n208k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %106, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n208k16.f32.f16.f16 {" HGW_REGS_104 "}, %104, %105, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_104
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 224] (+)= A[64 x 16] * B[16 x 224]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n224k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %114, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n224k16.f32.f16.f16 {" HGW_REGS_112 "}, %112, %113, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_112
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 240] (+)= A[64 x 16] * B[16 x 240]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n240k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %122, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n240k16.f32.f16.f16 {" HGW_REGS_120 "}, %120, %121, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_120
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64 x 256] (+)= A[64 x 16] * B[16 x 256]; A, B K-major in shared memory (descriptors).
__device__ __forceinline__ void wgmma_m64n256k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" HGW_REGS_128 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
               : HGW_ACC_128
               : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
template <int N>
__device__ __forceinline__ void wgmma_m64k16(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d) {
  static_assert(N % 16 == 0 && N >= 16 && N <= 256, "wgmma N must be a multiple of 16 from 16 to 256");
  if constexpr (N == 16) {
    wgmma_m64n16k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 32) {
    wgmma_m64n32k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 48) {
    wgmma_m64n48k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 64) {
    wgmma_m64n64k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 80) {
    wgmma_m64n80k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 96) {
    wgmma_m64n96k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 112) {
    wgmma_m64n112k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 128) {
    wgmma_m64n128k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 144) {
    wgmma_m64n144k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 160) {
    wgmma_m64n160k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 176) {
    wgmma_m64n176k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 192) {
    wgmma_m64n192k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 208) {
    wgmma_m64n208k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 224) {
    wgmma_m64n224k16(d, desc_a, desc_b, scale_d);
  } else if constexpr (N == 240) {
    wgmma_m64n240k16(d, desc_a, desc_b, scale_d);
  } else {
    wgmma_m64n256k16(d, desc_a, desc_b, scale_d);
  }
}

}  // namespace hgw
#endif  // HGW_DEVICE_OK
