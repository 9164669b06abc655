// ptx_sync.cuh -- thread identity, election, named/cluster barriers, fences, register reallocation,
// ldmatrix/stmatrix and small math helpers. sm_90a and sm_100a. Paste what you use into your .cu file.
#include <cstdint>
#include <cuda_bf16.h>

#define PTXB_DEV __device__ __forceinline__

// ---- identity ------------------------------------------------------------------------------------
PTXB_DEV uint32_t lane_id() { uint32_t r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
// Warp index made warp-uniform (lets the compiler keep role dispatch in uniform registers).
PTXB_DEV uint32_t warp_id_uniform() { return __shfl_sync(0xffffffffu, threadIdx.x / 32, 0); }
// Warpgroup = 4 consecutive warps (128 threads) whose first warp index is a multiple of 4.
PTXB_DEV uint32_t warpgroup_id_uniform() { return __shfl_sync(0xffffffffu, threadIdx.x / 128, 0); }
PTXB_DEV uint32_t sm_id() { uint32_t r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r; }

// 32-bit shared-window address of a shared-memory pointer (what every PTX wrapper here takes).
PTXB_DEV uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// elect.sync: exactly one active lane of the full warp returns true. Call with all 32 lanes converged.
PTXB_DEV bool elect_one_sync() {
  uint32_t is_elected;
  asm volatile(
      "{\n\t.reg .pred P;\n\t"
      "elect.sync _|P, %1;\n\t"
      "selp.b32 %0, 1, 0, P;\n\t}"
      : "=r"(is_elected) : "r"(0xffffffffu));
  return is_elected != 0;
}

// ---- named barriers (bar.sync / bar.arrive): ids 0..15, id 0 is __syncthreads ------------------
// num_threads is a multiple of 32 and counts every thread that arrives or syncs on `id`.
PTXB_DEV void named_barrier_sync(uint32_t id, uint32_t num_threads) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(num_threads) : "memory");
}
PTXB_DEV void named_barrier_arrive(uint32_t id, uint32_t num_threads) {
  asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(num_threads) : "memory");
}

// ---- cluster ---------------------------------------------------------------------------------------
PTXB_DEV uint32_t cluster_ctarank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
PTXB_DEV uint32_t cluster_nctarank() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r; }
PTXB_DEV uint32_t cluster_id_x() { uint32_t r; asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r)); return r; }
// Every thread of every CTA in the cluster must execute arrive then wait (aligned: warp-converged).
PTXB_DEV void cluster_arrive_release() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
PTXB_DEV void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory"); }
PTXB_DEV void cluster_wait_acquire() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
PTXB_DEV void cluster_sync() { cluster_arrive_release(); cluster_wait_acquire(); }
// Map a local shared::cta address to the same offset in CTA `cta_rank` of the cluster (shared::cluster).
PTXB_DEV uint32_t map_shared_to_rank(uint32_t smem_addr, uint32_t cta_rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr), "r"(cta_rank));
  return r;
}
// Plain 32-bit store/load into another CTA's shared memory (address from map_shared_to_rank).
PTXB_DEV void st_shared_cluster_u32(uint32_t cluster_addr, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(cluster_addr), "r"(v) : "memory");
}
PTXB_DEV uint32_t ld_shared_cluster_u32(uint32_t cluster_addr) {
  uint32_t v; asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(cluster_addr) : "memory"); return v;
}

// ---- fences -----------------------------------------------------------------------------------------
// Generic-proxy writes to shared memory -> visible to the async proxy (wgmma/tcgen05 operands, TMA store source).
PTXB_DEV void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Same for global memory (e.g. before TMA reads data that ordinary stores wrote in this kernel).
PTXB_DEV void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// All state spaces.
PTXB_DEV void fence_proxy_async_all() { asm volatile("fence.proxy.async;" ::: "memory"); }
// Make mbarrier.init visible to the other CTAs of the cluster (and to the async proxy); follow with cluster_sync().
PTXB_DEV void fence_mbarrier_init_cluster() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
PTXB_DEV void fence_acq_rel_cluster() { asm volatile("fence.acq_rel.cluster;" ::: "memory"); }
PTXB_DEV void fence_acq_rel_cta() { asm volatile("fence.acq_rel.cta;" ::: "memory"); }

// ---- register reallocation (warpgroup-wide, sm_90a / sm_100a) ----------------------------------------
// All 4 warps of a warpgroup must execute the same setmaxnreg. N in [24, 256], multiple of 8.
// Producer warpgroups typically decrease (e.g. 40), consumers increase (e.g. 232).
template <uint32_t N> PTXB_DEV void setmaxnreg_inc() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
}
template <uint32_t N> PTXB_DEV void setmaxnreg_dec() {
  static_assert(N >= 24 && N <= 256 && N % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
}

// ---- programmatic dependent launch -----------------------------------------------------------------
PTXB_DEV void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
PTXB_DEV void grid_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// ---- ldmatrix / stmatrix (8x8 b16 tiles; each lane supplies one 16-byte row address) ----------------
// x4: lanes 0-7 address rows of matrix 0, 8-15 matrix 1, 16-23 matrix 2, 24-31 matrix 3.
// Result register i holds 2 b16 of matrix i: lane l gets row l/4, columns 2*(l%4) and 2*(l%4)+1.
PTXB_DEV void ldmatrix_x4(uint32_t smem_addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr));
}
PTXB_DEV void ldmatrix_x4_trans(uint32_t smem_addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr));
}
PTXB_DEV void ldmatrix_x2(uint32_t smem_addr, uint32_t& r0, uint32_t& r1) {  // lanes 0-15 give addresses
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(smem_addr));
}
// stmatrix (sm_90+): inverse of ldmatrix; same fragment layout, same per-lane row addresses.
PTXB_DEV void stmatrix_x4(uint32_t smem_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(smem_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
PTXB_DEV void stmatrix_x4_trans(uint32_t smem_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               :: "r"(smem_addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
PTXB_DEV void stmatrix_x2(uint32_t smem_addr, uint32_t r0, uint32_t r1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" :: "r"(smem_addr), "r"(r0), "r"(r1) : "memory");
}

// ---- math -----------------------------------------------------------------------------------------
PTXB_DEV float exp2_approx(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
// Two floats -> one bf16x2 register: `lo` in bits 0-15, `hi` in bits 16-31 (round to nearest even).
PTXB_DEV uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r;
}
// 16-byte vector store to shared memory.
PTXB_DEV void st_shared_v4_u32(uint32_t smem_addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" :: "r"(smem_addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// ---- row reductions over the 4 lanes that share an MMA fragment row (lanes 4k .. 4k+3) --------------
PTXB_DEV float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
PTXB_DEV float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// ---- vector global memory access and reductions --------------------------------------------------------
// 16-byte read-only load (address 16-B aligned; data not written during the kernel).
PTXB_DEV uint4 ld_global_nc_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
PTXB_DEV void st_global_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// Fire-and-forget atomic adds (no return value): fp32 scalar and 4 x fp32 (address 16-B aligned, sm_90+).
PTXB_DEV void red_add_f32(float* p, float v) { asm volatile("red.global.add.f32 [%0], %1;" :: "l"(p), "f"(v) : "memory"); }
PTXB_DEV void red_add_v4_f32(float* p, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

// ---- cp.async (per-thread 16-byte global -> shared copies: gathers, paged/ragged rows) ----------------
// src_bytes < 16 zero-fills the rest (src_bytes = 0: nothing is read, 16 zero bytes are written).
PTXB_DEV void cp_async_16(uint32_t dst_smem, const void* src, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst_smem), "l"(src), "r"(src_bytes) : "memory");
}
PTXB_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most N committed groups of THIS thread are pending; then __syncthreads (or a named
// barrier) before other threads read the data.
template <int N> PTXB_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }
// Alternative completion: arrive on an mbarrier when this thread's prior cp.async finish (does not count
// as an arrival of the thread itself: init the barrier with the number of copying threads).
PTXB_DEV void cp_async_mbar_arrive(uint32_t mbar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" :: "r"(mbar) : "memory");
}

// ---- L2 cache policies (for the *_hint TMA loads): keep reused tiles, stream the rest -------------------
PTXB_DEV uint64_t l2_policy_evict_last() {
  uint64_t p; asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p)); return p;
}
PTXB_DEV uint64_t l2_policy_evict_first() {
  uint64_t p; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p)); return p;
}
