// ptx_mbarrier.cuh -- mbarrier: an 8-byte, 8-byte-aligned object in shared memory with an expected
// arrival count, a pending transaction (tx) byte count and a phase bit. sm_90a and sm_100a.
// Addresses are 32-bit shared-window addresses (smem_u32(ptr)); needs ptx_sync.cuh.

// One thread initialises; then fence (cluster use: fence_mbarrier_init_cluster + cluster_sync) or __syncthreads.
PTXB_DEV void mbar_init(uint32_t mbar, uint32_t arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(mbar), "r"(arrive_count) : "memory");
}
PTXB_DEV void mbar_inval(uint32_t mbar) {  // before reusing the 8 bytes for anything else
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(mbar) : "memory");
}

// Arrive once (release, CTA scope). Counts toward the phase's expected arrivals.
PTXB_DEV void mbar_arrive(uint32_t mbar) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" :: "r"(mbar) : "memory");
}
// Arrive `count` times at once.
PTXB_DEV void mbar_arrive_cnt(uint32_t mbar, uint32_t count) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared::cta.b64 st, [%0], %1;\n\t}"
               :: "r"(mbar), "r"(count) : "memory");
}
// Arrive once AND raise the pending tx-count by tx_bytes (the bytes the async copies of this phase
// will deliver into THIS CTA's shared memory). Typical: one elected producer thread per stage.
PTXB_DEV void mbar_arrive_expect_tx(uint32_t mbar, uint32_t tx_bytes) {
  asm volatile("{\n\t.reg .b64 st;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}"
               :: "r"(mbar), "r"(tx_bytes) : "memory");
}
// Raise the tx-count without arriving.
PTXB_DEV void mbar_expect_tx(uint32_t mbar, uint32_t tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" :: "r"(mbar), "r"(tx_bytes) : "memory");
}
// Arrive on the mbarrier at the same offset in CTA `cta_rank` of the cluster (release, cluster scope).
// Used by consumers to free a stage in a multicasting producer CTA.
PTXB_DEV void mbar_arrive_cluster(uint32_t mbar, uint32_t cta_rank) {
  asm volatile(
      "{\n\t.reg .b32 ra;\n\t"
      "mapa.shared::cluster.u32 ra, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n\t}"
      :: "r"(mbar), "r"(cta_rank) : "memory");
}

// Non-blocking probe: true once the phase with parity `phase_parity` has completed (acquire, CTA scope).
PTXB_DEV bool mbar_try_wait(uint32_t mbar, uint32_t phase_parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred P;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P, [%1], %2;\n\t"
      "selp.b32 %0, 1, 0, P;\n\t}"
      : "=r"(done) : "r"(mbar), "r"(phase_parity) : "memory");
  return done != 0;
}
// Block until the phase with parity `phase_parity` completes. Phase k has parity k & 1; a freshly
// initialised barrier is in phase 0, so the first wait uses parity 0.
PTXB_DEV void mbar_wait(uint32_t mbar, uint32_t phase_parity) {
  asm volatile(
      "{\n\t.reg .pred P;\n\t"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n\t"
      "@!P bra WAIT_%=;\n\t}"
      :: "r"(mbar), "r"(phase_parity) : "memory");
}
// Same, with cluster-scope acquire: use when the arrivals came from other CTAs of the cluster.
PTXB_DEV void mbar_wait_cluster(uint32_t mbar, uint32_t phase_parity) {
  asm volatile(
      "{\n\t.reg .pred P;\n\t"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P, [%0], %1;\n\t"
      "@!P bra WAIT_%=;\n\t}"
      :: "r"(mbar), "r"(phase_parity) : "memory");
}

// Ring-buffer helper: stage index and the parity to wait for. Start consumers at phase 0 ("full"
// barriers) and producers at phase 1 for "empty" barriers, so the first producer wait passes at once.
struct PipeState {
  uint32_t stage;
  uint32_t phase;
  __device__ __forceinline__ void advance(uint32_t num_stages) {
    if (++stage == num_stages) { stage = 0; phase ^= 1u; }
  }
};
