// Exercises every wrapper of the shared headers (ptx_sync, ptx_mbarrier, ptx_tma); included by the
// per-architecture exercise files after the pack headers.
#pragma once

template <int K> __device__ void zero(float (&a)[K]) {
  for (int i = 0; i < K; ++i) a[i] = 0.f;
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)
exercise_sync_tma(const __grid_constant__ CUtensorMap tm2, const __grid_constant__ CUtensorMap tm3,
                  const __grid_constant__ CUtensorMap tm4, const __grid_constant__ CUtensorMap tm5,
                  float* out, const uint4* in, __nv_bfloat16* outb) {
  __shared__ alignas(1024) uint8_t buf[32768];
  __shared__ uint64_t bar[2];
  const uint32_t b = smem_u32(&bar[0]), b1 = smem_u32(&bar[1]);
  const uint32_t s = smem_u32(buf);
  if (threadIdx.x == 0) { mbar_init(b, 1); mbar_init(b1, 2); fence_mbarrier_init_cluster(); }
  cluster_sync();
  const uint32_t rank = cluster_ctarank(), nranks = cluster_nctarank();
  out[0] = (float)(lane_id() + warp_id_uniform() + warpgroup_id_uniform() + sm_id() + cluster_id_x() + rank + nranks);
  if (warpgroup_id_uniform() == 0) setmaxnreg_dec<40>(); else setmaxnreg_inc<232>();
  const int32_t c1[1] = {0};
  const int32_t c2[2] = {0, 0};
  const int32_t c3[3] = {0, 0, 0};
  const int32_t c4[4] = {0, 0, 0, 0};
  const int32_t c5[5] = {0, 0, 0, 0, 0};
  out[6] = (float)(tmap_u64(&tm2) & 1u);
  if (warp_id_uniform() == 0 && elect_one_sync()) {
    tma_prefetch_desc(&tm2);
    mbar_arrive_expect_tx(b, 4096);
    mbar_expect_tx(b, 4096);
    tma_load<1>(s, &tm2, b, c1);
    tma_load<2>(s, &tm2, b, c2);
    tma_load<3>(s, &tm3, b, c3);
    tma_load<4>(s, &tm4, b, c4);
    tma_load<5>(s, &tm5, b, c5);
    tma_load_hint<2>(s, &tm2, b, c2, l2_policy_evict_last());
    tma_load_hint<3>(s, &tm3, b, c3, l2_policy_evict_first());
    tma_load_hint<4>(s, &tm4, b, c4, l2_policy_evict_first());
    tma_load_multicast<2>(s, &tm2, b, 0x3, c2);
    tma_load_multicast<3>(s, &tm3, b, 0x3, c3);
    tma_load_multicast<4>(s, &tm4, b, 0x3, c4);
    tma_load_multicast<5>(s, &tm5, b, 0x3, c5);
    bulk_load_1d(s, in, 256, b);
    tma_prefetch_l2<2>(&tm2, c2);
    tma_prefetch_l2<3>(&tm3, c3);
    tma_prefetch_l2<4>(&tm4, c4);
    tma_prefetch_l2<5>(&tm5, c5);
  }
  mbar_wait(b, 0);
  mbar_wait_cluster(b, 0);
  while (!mbar_try_wait(b, 0)) {}
  PipeState ps{0, 0};
  ps.advance(2);
  mbar_arrive(b1);
  mbar_arrive_cnt(b1, 1);
  mbar_arrive_cluster(b1, rank ^ 1u);
  // ordinary smem writes -> async proxy, then TMA stores / reduce-adds
  st_shared_v4_u32(s + 16 * threadIdx.x, 1, 2, 3, 4);
  fence_proxy_async_shared();
  fence_proxy_async_global();
  fence_proxy_async_all();
  fence_acq_rel_cta();
  fence_acq_rel_cluster();
  named_barrier_sync(1, 384);
  named_barrier_arrive(2, 64);
  if (threadIdx.x == 0) {
    tma_store<2>(&tm2, s, c2);
    tma_store<3>(&tm3, s, c3);
    tma_store<4>(&tm4, s, c4);
    tma_store<5>(&tm5, s, c5);
    tma_reduce_add<2>(&tm2, s, c2);
    tma_reduce_add<3>(&tm3, s, c3);
    tma_reduce_add<4>(&tm4, s, c4);
    tma_reduce_add<5>(&tm5, s, c5);
    bulk_store_1d(out + 64, s, 256);
    tma_store_commit();
    tma_store_wait_read<0>();
    tma_store_wait<0>();
  }
  // ldmatrix / stmatrix and other per-thread helpers
  uint32_t r0, r1, r2, r3;
  ldmatrix_x4(s + 16 * (threadIdx.x % 32), r0, r1, r2, r3);
  ldmatrix_x4_trans(s + 16 * (threadIdx.x % 32), r0, r1, r2, r3);
  ldmatrix_x2(s + 16 * (threadIdx.x % 16), r0, r1);
  stmatrix_x4(s + 16 * (threadIdx.x % 32), r0, r1, r2, r3);
  stmatrix_x4_trans(s + 16 * (threadIdx.x % 32), r0, r1, r2, r3);
  stmatrix_x2(s + 16 * (threadIdx.x % 16), r0, r1);
  const uint32_t remote = map_shared_to_rank(s, rank ^ 1u);
  st_shared_cluster_u32(remote, r0);
  out[1] = (float)ld_shared_cluster_u32(remote) + exp2_approx(out[2]) + quad_max(out[3]) + quad_sum(out[4]);
  outb[0] = __float2bfloat16(__uint_as_float(pack_bf16x2(1.f, 2.f)));
  const uint4 v = ld_global_nc_v4(in + threadIdx.x);
  st_global_v4(out + 128 + 4 * threadIdx.x, v);
  red_add_f32(out + 5, 1.f);
  red_add_v4_f32(out + 8, 1.f, 2.f, 3.f, 4.f);
  cp_async_16(s + 16 * threadIdx.x, in + threadIdx.x, 8);
  cp_async_commit();
  cp_async_wait<0>();
  cp_async_mbar_arrive(b1);
  grid_dependency_wait();
  grid_launch_dependents();
  mbar_inval(b1);
  cluster_arrive_relaxed();
  cluster_wait_acquire();
  cluster_arrive_release();
  cluster_wait_acquire();
}

