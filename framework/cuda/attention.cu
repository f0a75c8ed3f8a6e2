// Fused causal self-attention on CUDA cores in float32, flash-attention style (Dao et al.,
// FlashAttention 1 and 2): online softmax over key tiles staged in shared memory forward, scores
// recomputed from q, k and the saved log-sum-exp backward. The T x T matrix never reaches memory.
// Grouped-query: NKV key/value heads serve NH query heads (NH/NKV each), q, k and v are separate
// strided row arrays; GPT-2's fused qkv is the case NKV = NH, all three inside one row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/kernels.h"
#include "framework/elementwise.h"

namespace gpt::cuda {
namespace {

// Keys (forward, dq) or queries (dk/dv) handled per step of the inner loop, and the register
// budget per thread. ptxas issues all of a step's shared-memory reads ahead of its arithmetic,
// so a step costs about kChunk * D registers per tile it reads; these settings give enough
// independent dot products for instruction-level parallelism (and one online-softmax rescale
// per step rather than per key) with no spills in ptxas -v for sm_80 and sm_90.
constexpr int kChunkForward = 8, kRegsForward = 168;
constexpr int kChunkDq = 4, kRegsDq = 255;
constexpr int kChunkDkv = 2, kRegsDkv = 168;

// A padding key of the dk/dv kernel: later than every query, so no query reaches it.
constexpr int kNoKey = 1 << 30;

__host__ __device__ constexpr int max_of(int a, int b) {
  return a > b ? a : b;
}

// Thread layout of one instance. G threads share one row (query or key) and split its padded
// head size kHsb = D*G: thread g holds the float4 groups g, g+G, g+2G, ... so that the G threads
// of a row read consecutive 16-byte words of a shared-memory row (no bank conflicts, and
// broadcast across the rows of a warp). Rows past HS are zero in shared memory and registers.
template <int D, int G>
struct Tiles {
  static_assert(D % 4 == 0 && G >= 1 && G <= 16 && (G & (G - 1)) == 0, "bad thread layout");
  static constexpr int kHsb = D * G;
  // Rows owned by a block: query rows (forward, dq) or key rows (dk/dv). At most 128 threads, so
  // that blocks with a large register budget still share an SM.
  static constexpr int kRows = G == 1 ? 64 : 128 / G;
  static constexpr int kThreads = kRows * G;
  // Rows of the tiles streamed through shared memory (keys, or queries for dk/dv): two tiles of
  // them take 32 KB at most, so several blocks fit on an SM.
  static constexpr int kCols = kHsb <= 64 ? 64 : 4096 / kHsb;
  // The staging buffer, through which a block's own rows move between global memory (coalesced)
  // and registers (one row per thread group), is padded so that the 8 threads of a quarter warp
  // reading 8/G rows hit 8 distinct 4-bank groups.
  static constexpr int kStride = kHsb + (4 * G) % 32;
  static constexpr int kStream = 2 * kCols * kHsb;
  static constexpr int kStage = kRows * kStride;
  static_assert(kCols % kChunkForward == 0 && kCols % kChunkDq == 0 && kCols % kChunkDkv == 0,
                "whole chunks");
  static_assert(kThreads >= kCols, "one thread per streamed row loads lse and delta");
};

// Per-launch sizes shared by the kernels.
struct Shape {
  int B, T, NH, NKV, HS;
  int group;          // NH / NKV: query heads per kv head
  int C;              // NH * HS: row stride of out and dout
  int64_t q_stride;   // row stride of q and dq
  int64_t kv_stride;  // row stride of k, v, dk and dv
  float scale;
};

// Where an operand of a product is rounded to bfloat16 (what a bf16 tensor-core kernel reads).
template <bool kBf16>
__device__ __forceinline__ float operand(float x) {
  if constexpr (kBf16) {
    return __bfloat162float(__float2bfloat16_rn(x));
  } else {
    return x;
  }
}

// The G lanes of this thread's row; they always branch together, so shuffles name only them.
template <int G>
__device__ __forceinline__ unsigned group_mask() {
  const unsigned lane = threadIdx.x & 31u;
  return ((1u << G) - 1u) << (lane & ~static_cast<unsigned>(G - 1));
}

// Butterfly sum over the row's G lanes: every lane ends with the same bits (each step adds the
// same two values, in either order), so the duplicated softmax state stays identical.
template <int G>
__device__ __forceinline__ float group_sum(float x, unsigned mask) {
#pragma unroll
  for (int o = 1; o < G; o <<= 1) x += __shfl_xor_sync(mask, x, o);
  return x;
}

// Rows t0..t0+R-1 of one head (src row stride `stride`) into shared rows of width kHsb at
// dst row stride SS; zero past T and past HS, so padding contributes nothing to any product.
// A pass of the NT threads covers kSpan columns of NT / kSpan rows. Unrolled only partly: fully
// unrolled, the compiler hoists every row's 64-bit offset out of the tile loop and keeps them
// all in registers.
template <int kHsb, int R, int SS, int NT, bool kRound>
__device__ __forceinline__ void load_rows(float* dst, const float* __restrict__ src, int64_t stride,
                                          int t0, int T, int HS) {
  constexpr int kSpan = NT < kHsb ? NT : kHsb, kStep = NT / kSpan;
  static_assert(NT % kSpan == 0 && kHsb % kSpan == 0 && R % kStep == 0, "copy layout");
  const int d0 = static_cast<int>(threadIdx.x) % kSpan, r0 = static_cast<int>(threadIdx.x) / kSpan;
  const int64_t step = kStep * stride;
#pragma unroll
  for (int d = d0; d < kHsb; d += kSpan) {
    const float* p = src + static_cast<int64_t>(t0 + r0) * stride + d;
#pragma unroll 8
    for (int r = r0; r < R; r += kStep) {
      float x = 0.0f;
      if (t0 + r < T && d < HS) x = *p;
      dst[r * SS + d] = operand<kRound>(x);
      p += step;
    }
  }
}

// Shared rows (stride SS) to rows t0.. of one head in global memory, rows < T and dims < HS only.
template <int kHsb, int R, int SS, int NT>
__device__ __forceinline__ void store_rows(float* __restrict__ dst, int64_t stride,
                                           const float* src, int t0, int T, int HS) {
  constexpr int kSpan = NT < kHsb ? NT : kHsb, kStep = NT / kSpan;
  static_assert(NT % kSpan == 0 && kHsb % kSpan == 0 && R % kStep == 0, "copy layout");
  const int d0 = static_cast<int>(threadIdx.x) % kSpan, r0 = static_cast<int>(threadIdx.x) / kSpan;
  const int64_t step = kStep * stride;
#pragma unroll
  for (int d = d0; d < kHsb; d += kSpan) {
    float* p = dst + static_cast<int64_t>(t0 + r0) * stride + d;
#pragma unroll 8
    for (int r = r0; r < R; r += kStep) {
      if (t0 + r < T && d < HS) *p = src[r * SS + d];
      p += step;
    }
  }
}

// This thread's D elements of staged row r.
template <int D, int G, int SS>
__device__ __forceinline__ void read_row(float (&x)[D], const float* stage, int r, int g) {
  const float4* row = reinterpret_cast<const float4*>(stage + r * SS);
#pragma unroll
  for (int c = 0; c < D / 4; c++) {
    const float4 v = row[c * G + g];
    x[4 * c] = v.x;
    x[4 * c + 1] = v.y;
    x[4 * c + 2] = v.z;
    x[4 * c + 3] = v.w;
  }
}

template <int D, int G, int SS>
__device__ __forceinline__ void write_row(float* stage, int r, int g, const float (&x)[D]) {
  float4* row = reinterpret_cast<float4*>(stage + r * SS);
#pragma unroll
  for (int c = 0; c < D / 4; c++)
    row[c * G + g] = make_float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]);
}

// Partial dot product of this thread's D elements with its share of a shared row.
template <int D, int G>
__device__ __forceinline__ float partial_dot(const float (&x)[D], const float4* row, int g,
                                             float acc) {
#pragma unroll
  for (int c = 0; c < D / 4; c++) {
    const float4 v = row[c * G + g];
    acc = fmaf(x[4 * c], v.x, acc);
    acc = fmaf(x[4 * c + 1], v.y, acc);
    acc = fmaf(x[4 * c + 2], v.z, acc);
    acc = fmaf(x[4 * c + 3], v.w, acc);
  }
  return acc;
}

// sc[u] = partial dot products with kChunk consecutive shared rows: kChunk independent fma
// chains. The forward and dq kernels share a layout, so they recompute bit-identical scores.
template <int D, int G, int kChunk>
__device__ __forceinline__ void dot_chunk(float (&sc)[kChunk], const float (&x)[D],
                                          const float4* rows, int g) {
  constexpr int kRow4 = D * G / 4;
#pragma unroll
  for (int u = 0; u < kChunk; u++) sc[u] = 0.0f;
#pragma unroll
  for (int c = 0; c < D / 4; c++) {
#pragma unroll
    for (int u = 0; u < kChunk; u++) {
      const float4 v = rows[u * kRow4 + c * G + g];
      sc[u] = fmaf(x[4 * c], v.x, sc[u]);
      sc[u] = fmaf(x[4 * c + 1], v.y, sc[u]);
      sc[u] = fmaf(x[4 * c + 2], v.z, sc[u]);
      sc[u] = fmaf(x[4 * c + 3], v.w, sc[u]);
    }
  }
}

// A shared-memory word read a second time within a chunk. Volatile, so that the compiler reloads
// it instead of keeping every word of the first pass (kChunk rows) live in registers.
__device__ __forceinline__ float4 reload(const float4* p) {
  float4 v;
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ld.volatile.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
  return v;
}

// acc += a * (this thread's share of a shared row). kReload: the row was read by dot_chunk in the
// same chunk.
template <int D, int G, bool kReload>
__device__ __forceinline__ void axpy_row(float (&acc)[D], float a, const float4* row, int g) {
#pragma unroll
  for (int c = 0; c < D / 4; c++) {
    const float4 v = kReload ? reload(row + c * G + g) : row[c * G + g];
    acc[4 * c] = fmaf(a, v.x, acc[4 * c]);
    acc[4 * c + 1] = fmaf(a, v.y, acc[4 * c + 1]);
    acc[4 * c + 2] = fmaf(a, v.z, acc[4 * c + 2]);
    acc[4 * c + 3] = fmaf(a, v.w, acc[4 * c + 3]);
  }
}

// One (b, head) and one tile of kRows consecutive rows, decoded from blockIdx.x; the head is a
// query head (forward, dq) or a kv head (dk/dv). The big B*heads dimension lives in x; the tile
// index is the slow one, so that the blocks with the most causal work start first (the last query
// tiles forward and for dq, the first key tiles for dk/dv).
struct Block {
  int bh, b, h;    // bh = b * heads + h
  int t0;          // first row of the tile
  int rows;        // rows of the tile below T
  int64_t kv_off;  // where kv head h (dk/dv) or query head h's kv head starts in k, v, dk, dv
};

// Rows t0.. of the block's own tile of one head (src row stride `stride`) into this thread
// group's registers, through the staging buffer; the whole block takes part.
template <int D, int G, bool kRound>
__device__ __forceinline__ void load_own_row(float (&x)[D], float* stage,
                                             const float* __restrict__ src, int64_t stride,
                                             const Block& blk, const Shape& s, int r, int g) {
  using L = Tiles<D, G>;
  load_rows<L::kHsb, L::kRows, L::kStride, L::kThreads, kRound>(stage, src, stride, blk.t0, s.T,
                                                                s.HS);
  __syncthreads();
  read_row<D, G, L::kStride>(x, stage, r, g);
  __syncthreads();
}

// This thread group's registers to the block's own rows of one head in global memory, through
// the staging buffer; the whole block takes part.
template <int D, int G>
__device__ __forceinline__ void store_own_row(float* __restrict__ dst, int64_t stride, float* stage,
                                              const float (&x)[D], const Block& blk, const Shape& s,
                                              int r, int g) {
  using L = Tiles<D, G>;
  write_row<D, G, L::kStride>(stage, r, g, x);
  __syncthreads();
  store_rows<L::kHsb, L::kRows, L::kStride, L::kThreads>(dst, stride, stage, blk.t0, s.T, s.HS);
}

template <int D>
__device__ __forceinline__ void scale_row(float (&x)[D], float factor) {
#pragma unroll
  for (int d = 0; d < D; d++) x[d] *= factor;
}

// Where query head h of sequence b starts in q and dq, and in out and dout.
__device__ __forceinline__ int64_t q_offset(const Shape& s, int b, int h) {
  return static_cast<int64_t>(b) * s.T * s.q_stride + static_cast<int64_t>(h) * s.HS;
}
__device__ __forceinline__ int64_t o_offset(const Shape& s, int b, int h) {
  return static_cast<int64_t>(b) * s.T * s.C + static_cast<int64_t>(h) * s.HS;
}

// kv_heads: the blocks run over kv heads (dk/dv) rather than query heads.
template <int kRows>
__device__ __forceinline__ Block block_tile(const Shape& s, bool last_first, bool kv_heads) {
  const int n_tiles = (s.T + kRows - 1) / kRows;
  const int heads = kv_heads ? s.NKV : s.NH;
  const int x = static_cast<int>(blockIdx.x);
  const int n_bh = s.B * heads;
  const int order = x / n_bh;
  Block blk;
  blk.bh = x % n_bh;
  blk.b = blk.bh / heads;
  blk.h = blk.bh % heads;
  blk.t0 = (last_first ? n_tiles - 1 - order : order) * kRows;
  blk.rows = s.T - blk.t0 < kRows ? s.T - blk.t0 : kRows;
  const int kv_head = kv_heads ? blk.h : blk.h / s.group;
  blk.kv_off =
      static_cast<int64_t>(blk.b) * s.T * s.kv_stride + static_cast<int64_t>(kv_head) * s.HS;
  return blk;
}

// This thread's place: thread group r (the row it owns), lane g in the group, and the group's
// shuffle mask.
struct Lane {
  int tid, r, g;
  unsigned mask;
};
template <int G>
__device__ __forceinline__ Lane thread_lane() {
  const int tid = static_cast<int>(threadIdx.x);
  return {tid, tid / G, tid % G, group_mask<G>()};
}

// The two tiles a kernel streams through shared memory (k and v forward and for dq, q and dout
// for dk/dv), kCols rows of kHsb floats each, one after the other at its start, with their float4
// views; the staging buffer overlays them, used outside the streaming loops only.
struct StreamedTiles {
  float* a;
  float* b;
  const float4* a4;
  const float4* b4;
  float* stage;
};
template <int D, int G>
__device__ __forceinline__ StreamedTiles streamed_tiles(float4* smem4) {
  float* a = reinterpret_cast<float*>(smem4);
  float* b = a + Tiles<D, G>::kCols * Tiles<D, G>::kHsb;
  return {a, b, reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b), a};
}

// Rows i0.. of two sources (row strides a_stride, b_stride) into the two streamed tiles of
// shared memory, kCols rows of kHsb floats each (k and v forward and for dq, q and dout for
// dk/dv), rounded to bf16 where kRound; the whole block takes part.
template <int D, int G, bool kRound>
__device__ __forceinline__ void load_tile_pair(float* a_tile, const float* __restrict__ a,
                                               int64_t a_stride, float* b_tile,
                                               const float* __restrict__ b, int64_t b_stride,
                                               int i0, const Shape& s) {
  using L = Tiles<D, G>;
  load_rows<L::kHsb, L::kCols, L::kHsb, L::kThreads, kRound>(a_tile, a, a_stride, i0, s.T, s.HS);
  load_rows<L::kHsb, L::kCols, L::kHsb, L::kThreads, kRound>(b_tile, b, b_stride, i0, s.T, s.HS);
}

// A query-row kernel's tile (forward, dq): its block, where the kv head of its query head starts
// in k and v, and the last key row r attends to; -1 makes a padding row past T skip every key.
struct QueryTile {
  Block blk;
  const float* k_src;
  const float* v_src;
  int row_lim;
};
template <int kRows>
__device__ __forceinline__ QueryTile query_tile(const Shape& s, const float* k_all,
                                                const float* v_all, int r) {
  const Block blk = block_tile<kRows>(s, true, false);
  return {blk, k_all + blk.kv_off, v_all + blk.kv_off, r < blk.rows ? blk.t0 + r : -1};
}

// Streams the keys and values a query tile attends to through the two streamed tiles (k into
// k_tile, v into v_tile), kCols rows at a time, and calls chunk(c0, jc) for each chunk of kChunk
// keys (jc = the chunk's first key, at row c0 of the tiles) whose first key row r attends to;
// the whole block takes part.
template <int D, int G, bool kBf16, int kChunk, class Chunk>
__device__ __forceinline__ void for_each_key_chunk(float* k_tile, float* v_tile,
                                                   const QueryTile& tile, const Shape& s,
                                                   Chunk chunk) {
  constexpr int kCols = Tiles<D, G>::kCols;
  // Keys up to the tile's last row.
  const int n_key_tiles = (tile.blk.t0 + tile.blk.rows - 1) / kCols + 1;
  for (int kt = 0; kt < n_key_tiles; kt++) {
    const int j0 = kt * kCols;
    load_tile_pair<D, G, kBf16>(k_tile, tile.k_src, s.kv_stride, v_tile, tile.v_src, s.kv_stride,
                                j0, s);
    __syncthreads();
#pragma unroll 1
    for (int c0 = 0; c0 < kCols; c0 += kChunk) {
      const int jc = j0 + c0;
      if (jc > tile.row_lim) break;  // causal: this and the later chunks are all masked
      chunk(c0, jc);
    }
    __syncthreads();
  }
}

// out (B,T,NH*HS) and lse (B,NH,T). Thread group r owns query row t0 + r: q and the output
// accumulator in registers, the running max m and sum l duplicated over its G lanes.
template <int D, int G, bool kBf16>
__global__ void __launch_bounds__(Tiles<D, G>::kThreads,
                                  65536 / (Tiles<D, G>::kThreads * kRegsForward))
    attention_forward_kernel(float* __restrict__ out, float* __restrict__ lse,
                             const float* __restrict__ q_all, const float* __restrict__ k_all,
                             const float* __restrict__ v_all, Shape s) {
  using L = Tiles<D, G>;
  constexpr int kHsb = L::kHsb, kRows = L::kRows;
  constexpr int kRow4 = kHsb / 4, kChunk = kChunkForward;
  // The staging buffer overlays the streamed tiles.
  __shared__ float4 smem4[max_of(L::kStream, L::kStage) / 4];
  const auto [ks, vs, k4, v4, stage] = streamed_tiles<D, G>(smem4);

  const auto [tid, r, g, mask] = thread_lane<G>();
  const QueryTile tile = query_tile<kRows>(s, k_all, v_all, r);
  const Block& blk = tile.blk;
  const int row_lim = tile.row_lim;

  float q[D];
  load_own_row<D, G, kBf16>(q, stage, q_all + q_offset(s, blk.b, blk.h), s.q_stride, blk, s, r, g);

  float acc[D] = {};
  float m = -INFINITY, l = 0.0f;

  for_each_key_chunk<D, G, kBf16, kChunk>(ks, vs, tile, s, [&](int c0, int jc) {
    float sc[kChunk];
    dot_chunk<D, G>(sc, q, k4 + c0 * kRow4, g);
    float chunk_max = -INFINITY;
#pragma unroll
    for (int u = 0; u < kChunk; u++) {
      float x = group_sum<G>(sc[u], mask) * s.scale;
      if (jc + u > row_lim) x = -INFINITY;
      sc[u] = x;
      chunk_max = fmaxf(chunk_max, x);
    }
    // Key jc <= row_lim is unmasked, so chunk_max is finite and no inf - inf arises. Once the
    // row's maximum is found, most chunks skip the rescale (uniform over the row's lanes).
    if (chunk_max > m) {
      const float alpha = fast_expf(m - chunk_max);  // 0 on the first chunk (m = -inf)
      l *= alpha;
#pragma unroll
      for (int d = 0; d < D; d++) acc[d] *= alpha;
      m = chunk_max;
    }
#pragma unroll
    for (int u = 0; u < kChunk; u++) {
      const float p = fast_expf(sc[u] - m);
      l += p;  // the normaliser sums the unrounded probabilities
      axpy_row<D, G, false>(acc, operand<kBf16>(p), v4 + (c0 + u) * kRow4, g);
    }
  });

  // Padding rows have l = 0; their results are never stored.
  scale_row(acc, l > 0.0f ? 1.0f / l : 0.0f);
  if (g == 0 && row_lim >= 0) lse[static_cast<int64_t>(blk.bh) * s.T + row_lim] = m + logf(l);
  store_own_row<D, G>(out + o_offset(s, blk.b, blk.h), s.C, stage, acc, blk, s, r, g);
}

// dq of a tile of query rows, and delta = rowsum(dout * out) for them (the dk/dv kernel reads
// it, so this kernel runs first). dq_i = scale * sum_{j<=i} dS_ij k_j with
// dS_ij = P_ij (dout_i . v_j - delta_i) and P_ij = exp(s_ij - lse_i).
template <int D, int G, bool kBf16>
__global__ void __launch_bounds__(Tiles<D, G>::kThreads, 65536 / (Tiles<D, G>::kThreads * kRegsDq))
    attention_dq_kernel(float* __restrict__ dq_all, float* __restrict__ delta,
                        const float* __restrict__ dout, const float* __restrict__ out,
                        const float* __restrict__ q_all, const float* __restrict__ k_all,
                        const float* __restrict__ v_all, const float* __restrict__ lse, Shape s) {
  using L = Tiles<D, G>;
  constexpr int kHsb = L::kHsb, kRows = L::kRows, NT = L::kThreads;
  constexpr int kRow4 = kHsb / 4, kChunk = kChunkDq;
  const auto [tid, r, g, mask] = thread_lane<G>();
  // The staging buffer overlays the streamed tiles.
  __shared__ float4 smem4[max_of(L::kStream, L::kStage) / 4];
  const auto [ks, vs, k4, v4, stage] = streamed_tiles<D, G>(smem4);
  const QueryTile tile = query_tile<kRows>(s, k_all, v_all, r);
  const Block& blk = tile.blk;
  const int row_lim = tile.row_lim;
  const int64_t q_off = q_offset(s, blk.b, blk.h), o_off = o_offset(s, blk.b, blk.h);
  const int64_t stat = static_cast<int64_t>(blk.bh) * s.T + row_lim;  // lse/delta index

  float q[D], dO[D];
  load_own_row<D, G, kBf16>(q, stage, q_all + q_off, s.q_stride, blk, s, r, g);
  load_own_row<D, G, kBf16>(dO, stage, dout + o_off, s.C, blk, s, r, g);
  // out is a result, not an operand: only dout is rounded, as in dP = dout . v, so that delta
  // stays sum_j P_ij dP_ij.
  load_rows<kHsb, kRows, L::kStride, NT, false>(stage, out + o_off, s.C, blk.t0, s.T, s.HS);
  __syncthreads();
  const float delta_i = group_sum<G>(
      partial_dot<D, G>(dO, reinterpret_cast<const float4*>(stage + r * L::kStride), g, 0.0f),
      mask);
  if (g == 0 && row_lim >= 0) delta[stat] = delta_i;
  const float lse_i = row_lim >= 0 ? lse[stat] : 0.0f;
  __syncthreads();

  float dq[D] = {};

  for_each_key_chunk<D, G, kBf16, kChunk>(ks, vs, tile, s, [&](int c0, int jc) {
    float sc[kChunk], dp[kChunk];
    dot_chunk<D, G>(sc, q, k4 + c0 * kRow4, g);
    dot_chunk<D, G>(dp, dO, v4 + c0 * kRow4, g);
#pragma unroll
    for (int u = 0; u < kChunk; u++) {
      const float x = group_sum<G>(sc[u], mask) * s.scale;
      const float y = group_sum<G>(dp[u], mask);
      const float p = jc + u <= row_lim ? fast_expf(x - lse_i) : 0.0f;
      const float ds = p * (y - delta_i);
      axpy_row<D, G, true>(dq, operand<kBf16>(ds), k4 + (c0 + u) * kRow4, g);
    }
  });

  scale_row(dq, s.scale);
  store_own_row<D, G>(dq_all + q_off, s.q_stride, stage, dq, blk, s, r, g);
}

// dk and dv of a tile of key rows of one kv head: thread group r owns key t0 + r (k, v and both
// accumulators in registers) and walks, for each query head of the kv head's group in order, the
// query tiles from the diagonal to T in order: dv_j = sum_h sum_{i>=j} P_ij dout_i,
// dk_j = scale * sum_h sum_{i>=j} dS_ij q_i. One block sums the whole group, so the sum over the
// group's heads needs no atomics and has one fixed order.
template <int D, int G, bool kBf16>
__global__ void __launch_bounds__(Tiles<D, G>::kThreads, 65536 / (Tiles<D, G>::kThreads * kRegsDkv))
    attention_dkv_kernel(float* __restrict__ dk_all, float* __restrict__ dv_all,
                         const float* __restrict__ dout, const float* __restrict__ q_all,
                         const float* __restrict__ k_all, const float* __restrict__ v_all,
                         const float* __restrict__ lse, const float* __restrict__ delta, Shape s) {
  using L = Tiles<D, G>;
  constexpr int kHsb = L::kHsb, kRows = L::kRows, kCols = L::kCols;
  constexpr int kRow4 = kHsb / 4, kChunk = kChunkDkv;
  // The staging buffer overlays the streamed tiles and their lse and delta.
  __shared__ float4 smem4[max_of(L::kStream + 2 * kCols, L::kStage) / 4];
  const auto [qs, dos, q4, do4, stage] = streamed_tiles<D, G>(smem4);
  float* lse_s = reinterpret_cast<float*>(smem4) + L::kStream;
  float* delta_s = lse_s + kCols;

  const auto [tid, r, g, mask] = thread_lane<G>();
  const Block blk = block_tile<kRows>(s, false, true);
  // Queries i >= key_lim reach this key; a padding key past T is reached by none.
  const int key_lim = r < blk.rows ? blk.t0 + r : kNoKey;

  float k[D], v[D];
  load_own_row<D, G, kBf16>(k, stage, k_all + blk.kv_off, s.kv_stride, blk, s, r, g);
  load_own_row<D, G, kBf16>(v, stage, v_all + blk.kv_off, s.kv_stride, blk, s, r, g);

  float dk[D] = {}, dv[D] = {};

  for (int hq = blk.h * s.group; hq < (blk.h + 1) * s.group; hq++) {
    const float* q_src = q_all + q_offset(s, blk.b, hq);
    const float* do_src = dout + o_offset(s, blk.b, hq);
    const int64_t stats = (static_cast<int64_t>(blk.b) * s.NH + hq) * s.T;
    const float* lse_src = lse + stats;
    const float* delta_src = delta + stats;
    // Queries before the tile's first key reach none of its keys.
    for (int i0 = blk.t0; i0 < s.T; i0 += kCols) {
      load_tile_pair<D, G, kBf16>(qs, q_src, s.q_stride, dos, do_src, s.C, i0, s);
      if (tid < kCols) {
        const bool in = i0 + tid < s.T;
        lse_s[tid] = in ? lse_src[i0 + tid] : 0.0f;
        delta_s[tid] = in ? delta_src[i0 + tid] : 0.0f;
      }
      __syncthreads();
#pragma unroll 1
      for (int c0 = 0; c0 < kCols; c0 += kChunk) {
        const int ic = i0 + c0;
        if (ic >= s.T) break;                  // the rest of the tile is past T
        if (ic + kChunk <= key_lim) continue;  // causal: every query of the chunk precedes the key
        float sc[kChunk], dp[kChunk];
        dot_chunk<D, G>(sc, k, q4 + c0 * kRow4, g);
        dot_chunk<D, G>(dp, v, do4 + c0 * kRow4, g);
#pragma unroll
        for (int u = 0; u < kChunk; u++) {
          const int i = ic + u;
          const float x = group_sum<G>(sc[u], mask) * s.scale;
          const float y = group_sum<G>(dp[u], mask);
          const float p = i >= key_lim && i < s.T ? fast_expf(x - lse_s[c0 + u]) : 0.0f;
          const float ds = p * (y - delta_s[c0 + u]);
          axpy_row<D, G, true>(dv, operand<kBf16>(p), do4 + (c0 + u) * kRow4, g);
          axpy_row<D, G, true>(dk, operand<kBf16>(ds), q4 + (c0 + u) * kRow4, g);
        }
      }
      __syncthreads();
    }
  }

  scale_row(dk, s.scale);
  store_own_row<D, G>(dk_all + blk.kv_off, s.kv_stride, stage, dk, blk, s, r, g);
  __syncthreads();  // the staging buffer is read by the store before dv overwrites it
  store_own_row<D, G>(dv_all + blk.kv_off, s.kv_stride, stage, dv, blk, s, r, g);
}

template <int kHsb, bool kBf16>
struct Config {};

// Calls f(Config<kHsb, bf16>{}) for the smallest padded head size kHsb >= HS.
template <class F>
void dispatch(int64_t HS, bool bf16, F&& f) {
  auto with_precision = [&]<int kHsb>(Config<kHsb, false>) {
    if (bf16) {
      f(Config<kHsb, true>{});
    } else {
      f(Config<kHsb, false>{});
    }
  };
  if (HS <= 16) {
    with_precision(Config<16, false>{});
  } else if (HS <= 32) {
    with_precision(Config<32, false>{});
  } else if (HS <= 64) {
    with_precision(Config<64, false>{});
  } else if (HS <= 128) {
    with_precision(Config<128, false>{});
  } else {
    with_precision(Config<256, false>{});
  }
}

// Elements per thread of a row: 32 for the forward and dq kernels (fewer threads per row repeat
// fewer exponentials and shuffles); 16 for dk/dv, whose four row vectors (k, v, dk, dv) spill at
// 32.
template <int kHsb>
constexpr int kDimsQueryRows = kHsb < 32 ? kHsb : 32;
constexpr int kDimsDkv = 16;

// Fills s from validated sizes; false when there is nothing to compute.
bool make_shape(Shape& s, const char* what, const AttentionShape& a) {
  check_attention_shape(a, what);
  GPT_CHECK(a.HS <= 256, what << " with HS=" << a.HS << " (HS must be at most 256)");
  if (a.B == 0 || a.T == 0 || a.NH == 0 || a.HS == 0) return false;
  GPT_CHECK(a.B * a.NH <= INT32_MAX && a.T <= INT32_MAX / 64 && a.NH * a.HS <= INT32_MAX,
            what << " sizes out of range: B=" << a.B << " T=" << a.T << " NH=" << a.NH);
  s.B = static_cast<int>(a.B);
  s.T = static_cast<int>(a.T);
  s.NH = static_cast<int>(a.NH);
  s.NKV = static_cast<int>(a.NKV);
  s.HS = static_cast<int>(a.HS);
  s.group = static_cast<int>(a.NH / a.NKV);
  s.C = static_cast<int>(a.NH * a.HS);
  s.q_stride = a.q_stride;
  s.kv_stride = a.kv_stride;
  s.scale = 1.0f / std::sqrt(static_cast<float>(a.HS));
  return true;
}

// Blocks of a launch over every (b, head) of `heads` and every tile of kRows rows.
template <int kRows>
unsigned grid_blocks(const Shape& s, int heads) {
  const int64_t blocks = static_cast<int64_t>(s.B) * heads * ((s.T + kRows - 1) / kRows);
  GPT_CHECK(blocks <= INT32_MAX, "attention grid of " << blocks << " blocks is too large");
  return static_cast<unsigned>(blocks);
}

}  // namespace

void check_attention_shape(const AttentionShape& s, const char* what) {
  GPT_CHECK(s.B >= 0 && s.T >= 0 && s.NH >= 0 && s.NKV > 0 && s.HS >= 0 && s.NH % s.NKV == 0 &&
                s.q_stride >= s.NH * s.HS && s.kv_stride >= s.NKV * s.HS,
            what << " with B=" << s.B << " T=" << s.T << " NH=" << s.NH << " NKV=" << s.NKV
                 << " HS=" << s.HS << " q_stride=" << s.q_stride << " kv_stride=" << s.kv_stride
                 << " (NKV must divide NH, and each stride hold its heads)");
}

void attention_forward(cudaStream_t stream, float* out, float* lse, const float* q, const float* k,
                       const float* v, const AttentionShape& shape, bool bf16_operands) {
  Shape s;
  if (!make_shape(s, "attention_forward", shape)) return;
  dispatch(s.HS, bf16_operands, [&]<int kHsb, bool kBf16>(Config<kHsb, kBf16>) {
    constexpr int D = kDimsQueryRows<kHsb>, G = kHsb / D;
    using L = Tiles<D, G>;
    attention_forward_kernel<D, G, kBf16>
        <<<grid_blocks<L::kRows>(s, s.NH), L::kThreads, 0, stream>>>(out, lse, q, k, v, s);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

void attention_backward(cudaStream_t stream, float* dq, float* dk, float* dv, float* delta,
                        const float* dout, const float* out, const float* q, const float* k,
                        const float* v, const float* lse, const AttentionShape& shape,
                        bool bf16_operands) {
  Shape s;
  if (!make_shape(s, "attention_backward", shape)) return;
  dispatch(s.HS, bf16_operands, [&]<int kHsb, bool kBf16>(Config<kHsb, kBf16>) {
    constexpr int Dq = kDimsQueryRows<kHsb>, Gq = kHsb / Dq;
    using Lq = Tiles<Dq, Gq>;
    attention_dq_kernel<Dq, Gq, kBf16>
        <<<grid_blocks<Lq::kRows>(s, s.NH), Lq::kThreads, 0, stream>>>(dq, delta, dout, out, q, k,
                                                                       v, lse, s);
    GPT_CUDA_CHECK_LAUNCH();
    constexpr int Dk = kDimsDkv, Gk = kHsb / Dk;
    using Lk = Tiles<Dk, Gk>;
    attention_dkv_kernel<Dk, Gk, kBf16>
        <<<grid_blocks<Lk::kRows>(s, s.NKV), Lk::kThreads, 0, stream>>>(dk, dv, dout, q, k, v, lse,
                                                                        delta, s);
    GPT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gpt::cuda
