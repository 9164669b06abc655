// ptx_gmma_desc.cuh -- 64-bit shared-memory matrix descriptors for wgmma (sm_90a), and the swizzle
// address function (for threads that write or read a swizzled tile themselves).
// Descriptor bits: [0,14) start address >> 4 | [16,30) leading byte offset (LBO) >> 4 |
// [32,46) stride byte offset (SBO) >> 4 | [49,52) base offset | [62,64) swizzle mode.

enum GmmaSwizzle : uint32_t { GMMA_SWIZZLE_NONE = 0, GMMA_SWIZZLE_128B = 1, GMMA_SWIZZLE_64B = 2, GMMA_SWIZZLE_32B = 3 };

// base_offset: 0 when the tile starts on a multiple of the swizzle repeat (1024 B for 128B, 512 B for 64B,
// 256 B for 32B). Otherwise (smem_addr >> 7) & 7. Keep swizzled tiles 1024-B aligned and it stays 0.
__host__ __device__ constexpr uint64_t make_gmma_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                      GmmaSwizzle swizzle, uint32_t base_offset = 0) {
  return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32) | ((uint64_t)(base_offset & 7u) << 49) |
         ((uint64_t)swizzle << 62);
}

// K-major operand (K contiguous), rows of exactly the swizzle width (128B: 64 bf16, 64B: 32, 32B: 16),
// 8-row groups stored back to back, as a TMA box with that swizzle and inner box = swizzle width produces.
// SBO = 8 rows * row bytes. LBO is unused for swizzled K-major layouts (encode 16 B, i.e. 1).
__host__ __device__ constexpr uint64_t gmma_desc_kmajor(uint32_t smem_addr, GmmaSwizzle swizzle) {
  return make_gmma_desc(smem_addr, 16,
                        swizzle == GMMA_SWIZZLE_128B ? 1024u : swizzle == GMMA_SWIZZLE_64B ? 512u : 256u, swizzle);
}
// Step the start address of an existing descriptor by `bytes` (multiple of 16), e.g. the next k16 slice
// of a 128B-swizzled K-major tile is +32 bytes; the next 64-row block is +64*128 bytes.
__host__ __device__ constexpr uint64_t gmma_desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + (uint64_t)(bytes >> 4);
}

// MN-major operand (MN contiguous, e.g. V[kv, d] used as B of P*V with TRANS_B = 1), swizzled:
// swizzle atom = 8 K-rows x (swizzle width) bytes of MN; LBO = byte distance between atoms along MN,
// SBO = byte distance between 8-row groups along K (1024 for a 128B atom stacked along K).
__host__ __device__ constexpr uint64_t gmma_desc_mnmajor(uint32_t smem_addr, uint32_t lbo_atom_mn_bytes,
                                                         uint32_t sbo_k8_bytes, GmmaSwizzle swizzle) {
  return make_gmma_desc(smem_addr, lbo_atom_mn_bytes, sbo_k8_bytes, swizzle);
}
// No swizzle ("interleave"): core matrix = 8 rows x 16 B stored contiguously (128 B).
// K-major: LBO = distance between core matrices adjacent in K, SBO = adjacent in M/N.
// MN-major: LBO = adjacent in K, SBO = adjacent in M/N as well (PTX canonical layout ((T,1,m),(8,k))).
__host__ __device__ constexpr uint64_t gmma_desc_noswizzle(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return make_gmma_desc(smem_addr, lbo_bytes, sbo_bytes, GMMA_SWIZZLE_NONE);
}

// Byte offset inside a swizzled tile of (row, 16-byte chunk), tile aligned to its repeat (1024/512/256 B).
// 128B: chunk' = chunk ^ (row % 8), rows of 128 B.   64B: chunk' = chunk ^ ((row / 2) % 4), rows of 64 B.
// 32B: chunk' = chunk ^ ((row / 4) % 2), rows of 32 B. Equivalently, on the byte offset o:
// 128B: o ^ (((o >> 7) & 7) << 4);  64B: o ^ (((o >> 7) & 3) << 4);  32B: o ^ (((o >> 7) & 1) << 4).
__host__ __device__ constexpr uint32_t swizzle_offset(uint32_t linear_byte_offset, GmmaSwizzle swizzle) {
  return swizzle == GMMA_SWIZZLE_128B  ? linear_byte_offset ^ (((linear_byte_offset >> 7) & 7u) << 4)
         : swizzle == GMMA_SWIZZLE_64B ? linear_byte_offset ^ (((linear_byte_offset >> 7) & 3u) << 4)
         : swizzle == GMMA_SWIZZLE_32B ? linear_byte_offset ^ (((linear_byte_offset >> 7) & 1u) << 4)
                                       : linear_byte_offset;
}
