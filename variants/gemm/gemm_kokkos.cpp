// GEMM in Kokkos, for every enabled execution space and both layouts (family gemm_kokkos: rung 0 the
// straightforward portable versions, rung 1 the tuned one the CUDA ladder and cuBLAS are compared against):
//  - gemm_kokkos_tiled (gemm, gemm_bf16, gemm_fp16): a TeamPolicy, one team per tile of C. On a GPU a 128 x 128 tile,
//    256 threads each holding an 8 x 8 register sub-tile; the k loop stages 8-deep slices of A and B in
//    team scratch (k-major, so the compute loop reads along a tile's rows and columns), double-buffered:
//    every thread fetches its share of the next slice into registers before computing on the current one,
//    and stores it into the other buffer after, so one barrier per slice and the global loads overlap the
//    FMAs. The fetch maps consecutive threads to consecutive addresses of the layout (coalesced); the
//    scratch rows are padded by 4 floats, so the transposing stores of a row-major A (column-major B) hit
//    32 different banks; a thread's rows (columns) are strided by the thread grid's width, so the compute
//    reads of a warp are one broadcast and 16 consecutive words (no bank conflicts) and its C stores are
//    consecutive along the layout. On a host a team is one thread computing a 64 x 64 tile from 32-deep
//    slices (the accumulators stay in L1; the inner loop runs along the tile's contiguous direction).
//    gemm_bf16 reads the 16-bit patterns and widens them to float (bits << 16) on the fetch, gemm_fp16
//    likewise as binary16 (detail/fp16.hpp): the products are exact, the accumulation is float32 as on
//    tensor cores. Not registered for gemm_tf32: it would pass
//    (its float32 products are more accurate) but would not be a TF32 kernel.
//  - gemm_kokkos_warptile (gemm; rung 1): the design of gemm_cuda.cu's rungs 6-7 as a TeamPolicy kernel. On a
//    GPU one team of 256 threads per 128 x 128 tile of C, 16-deep k slices; the 8 warps own 32 x 64 pieces,
//    their lanes a 4 x 8 grid of 8 x 8 outputs (rows strided by 4, columns as two runs of 4 strided by 32).
//    Team scratch holds A k-contiguous as [128][16 + 4] and B as [16][128], so every compute read is a
//    float4 (A along k, B along n) and one conflict-free wavefront: 16 shared reads for 256 FMAs, where
//    gemm_kokkos_tiled needs 64 scalar ones. Global loads and C stores are 16-byte quads where every row is
//    16-byte aligned and whole quads long (k % 4 == 0 for A, n % 4 == 0 for B and C), else guarded scalars
//    (a template flag chosen at launch); tiles inside C and slices inside k skip the guards. Double
//    buffering through registers (portable Kokkos has no cp.async): a thread's 4 quads of the next slice
//    are fetched one per 4-deep step of the current slice's FMAs and each stored into the other buffer
//    after its step (one float4 of staging registers: staging all four at once spills at 128 registers),
//    one barrier a slice. LaunchBounds<256, 2>: at most 128 registers, two teams (16 warps) per SM.
//    Feature-major C = A B is the row-major C^T = B^T A^T on the same arrays (column-major B is row-major
//    B^T): the same kernel with the operands and m, n swapped. On a host it runs gemm_kokkos_tiled's host
//    path (a 256-thread team has no host equivalent; that path already keeps a 64 x 64 tile in L1 with the
//    inner loop along the contiguous direction), so on OpenMP and Serial it times as rung 0's tiled does.
//  - gemm_kokkos_naive (gemm, gemm_bf16, gemm_fp16): one thread per element of C (a RangePolicy over m n, consecutive
//    threads along the layout's contiguous direction of C), a float32 dot product over k from global
//    memory: the simplest correct portable kernel, the floor the tiled one must beat.
//  - gemm_kokkos_kernels (gemm): KokkosBlas::gemm("N", "N", 1, A, B, 0, C) (cuBLAS SGEMM where Kokkos
//    Kernels has that TPL for the layout: 3.4 has it for LayoutLeft only; its own kernels elsewhere). Kokkos
//    Kernels 3.4 takes no execution-space instance, so it runs on the space's default instance.
// Device views are Kokkos::View<T**, Layout, memory_space>; transfers are deep_copy between them and
// unmanaged host views of the problem's arrays, on the variant's instance.
#include <Kokkos_Core.hpp>
#include <KokkosBlas3_gemm.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kstudy/support/kokkos_support.hpp"
#include "detail/fp16.hpp"
#include "detail/kokkos_float4.hpp"
#include "gemm/gemm.hpp"

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_GEMM_UNROLL _Pragma("unroll")
#define KSTUDY_GEMM_NO_UNROLL _Pragma("unroll 1")
#else
#define KSTUDY_GEMM_UNROLL
#define KSTUDY_GEMM_NO_UNROLL
#endif

namespace kstudy::gemm {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// A binary16 element: a type of its own, so that to_float widens it as binary16 (std::uint16_t is bfloat16).
struct fp16_bits {
  std::uint16_t bits;
};

// The stored element type of a precision's inputs.
template <gemm_precision P>
using input_t = std::conditional_t<P == gemm_precision::bf16, std::uint16_t,
                                   std::conditional_t<P == gemm_precision::fp16, fp16_bits, float>>;

KOKKOS_INLINE_FUNCTION float to_float(float v) { return v; }
KOKKOS_INLINE_FUNCTION float to_float(std::uint16_t bits) {
  union {
    std::uint32_t u;
    float f;
  } wide;
  wide.u = std::uint32_t(bits) << 16;
  return wide.f;
}
KOKKOS_INLINE_FUNCTION float to_float(fp16_bits h) { return detail::widen_fp16(h.bits); }

template <class Layout>
constexpr bool is_right_v = std::is_same_v<Layout, Kokkos::LayoutRight>;

// Tile shapes (see the top of the file). threads = (bm / tm) (bn / tn).
template <int BM, int BN, int BK, int TM, int TN, int Pad, bool DoubleBuffered>
struct tile_shape {
  static constexpr int bm = BM, bn = BN, bk = BK, tm = TM, tn = TN, pad = Pad;
  static constexpr bool double_buffered = DoubleBuffered;
  static constexpr int threads = (bm / tm) * (bn / tn);
  // Elements of the A and B slices each thread fetches (static members: nvcc's extended lambdas may not
  // first-capture a local inside if constexpr).
  static constexpr int a_fetches = bm * bk / threads, b_fetches = bk * bn / threads;
  static_assert(bm * bk % threads == 0 && bk * bn % threads == 0, "every thread fetches the same share");
};
template <bool OnHost>
struct tile_config : tile_shape<128, 128, 8, 8, 8, 4, true> {};
template <>
struct tile_config<true> : tile_shape<64, 64, 32, 64, 64, 0, false> {};

template <class ExecutionSpace>
using scratch_floats = Kokkos::View<float*, typename ExecutionSpace::scratch_memory_space, unmanaged>;

template <class ExecutionSpace>
std::size_t tiled_scratch_floats() {
  using cfg = tile_config<is_host_space_v<ExecutionSpace>>;
  return std::size_t(cfg::double_buffered ? 2 : 1) * cfg::bk * ((cfg::bm + cfg::pad) + (cfg::bn + cfg::pad));
}

// C = A B by tiles (gemm_kokkos_tiled). Free function: nvcc refuses extended lambdas in private members.
template <class ExecutionSpace, class Layout, class T, class In, class Out>
void launch_tiled(const ExecutionSpace& space, const In& a, const In& b, const Out& c) {
  using cfg = tile_config<is_host_space_v<ExecutionSpace>>;
  constexpr int bm = cfg::bm, bn = cfg::bn, bk = cfg::bk, tm = cfg::tm, tn = cfg::tn;
  constexpr int lda = bm + cfg::pad, ldb = bn + cfg::pad;  // scratch row lengths (one row per k)
  constexpr int row_threads = bm / tm, col_threads = bn / tn, threads = cfg::threads;
  constexpr bool right = is_right_v<Layout>;
  // Two resident teams per multiprocessor: at most 128 registers a thread (sm_90: 124-127, no spills; with
  // one team, 131-135 registers and only 8 warps per SM).
  constexpr int teams_per_sm = is_host_space_v<ExecutionSpace> ? 1 : 2;
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<threads, teams_per_sm>>;
  using member_type = typename policy_type::member_type;
  using scratch_view = scratch_floats<ExecutionSpace>;

  const int m = static_cast<int>(c.extent(0)), n = static_cast<int>(c.extent(1)), k = static_cast<int>(a.extent(1));
  const int tiles_m = (m + bm - 1) / bm, tiles_n = (n + bn - 1) / bn, slices = (k + bk - 1) / bk;
  const std::size_t scratch = tiled_scratch_floats<ExecutionSpace>();
  policy_type policy(space, tiles_m * tiles_n, threads);
  policy = policy.set_scratch_size(0, Kokkos::PerTeam(scratch_view::shmem_size(scratch)));

  Kokkos::parallel_for(
      "kstudy::gemm_tiled", policy, KOKKOS_LAMBDA(const member_type& team) {
        const int t = team.team_rank();
        const int slice_count = slices;  // captured here: nvcc refuses a first capture inside if constexpr
        // Consecutive tiles along the contiguous direction of C share a panel of A (row-major) or B.
        const int tile = team.league_rank();
        const int ti = right ? tile / tiles_n : tile % tiles_m, tj = right ? tile % tiles_n : tile / tiles_m;
        const int i0 = ti * bm, j0 = tj * bn;
        scratch_view shared(team.team_scratch(0), scratch);
        float* const a_tiles = shared.data();
        float* const b_tiles = a_tiles + (cfg::double_buffered ? 2 : 1) * bk * lda;
        // This thread's rows i0 + tr + row_threads r and columns j0 + tc + col_threads c; consecutive
        // threads run along the layout's contiguous direction of C.
        const int tr = right ? t / col_threads : t % row_threads;
        const int tc = right ? t % col_threads : t / row_threads;

        // Fetch q of this thread: element (r, kk) of the A slice, (kk, cc) of the B slice, with
        // consecutive threads on consecutive addresses of the layout.
        const auto a_slot = [&](int q, int& r, int& kk) {
          const int e = t + q * threads;
          r = right ? e / bk : e % bm;
          kk = right ? e % bk : e / bm;
        };
        const auto b_slot = [&](int q, int& kk, int& cc) {
          const int e = t + q * threads;
          kk = right ? e / bn : e % bk;
          cc = right ? e % bn : e / bk;
        };
        const auto a_value = [&](int r, int l) {
          const int i = i0 + r;
          return i < m && l < k ? to_float(a(i, l)) : 0.0f;
        };
        const auto b_value = [&](int l, int cc) {
          const int j = j0 + cc;
          return l < k && j < n ? to_float(b(l, j)) : 0.0f;
        };

        float acc[tm][tn];
        KSTUDY_GEMM_UNROLL
        for (int r = 0; r < tm; ++r) {
          KSTUDY_GEMM_UNROLL
          for (int cc = 0; cc < tn; ++cc) acc[r][cc] = 0.0f;
        }
        const auto multiply = [&](int buffer) {
          const float* as = a_tiles + buffer * bk * lda;
          const float* bs = b_tiles + buffer * bk * ldb;
          for (int kk = 0; kk < bk; ++kk) {
            float fa[tm], fb[tn];
            KSTUDY_GEMM_UNROLL
            for (int r = 0; r < tm; ++r) fa[r] = as[kk * lda + tr + row_threads * r];
            KSTUDY_GEMM_UNROLL
            for (int cc = 0; cc < tn; ++cc) fb[cc] = bs[kk * ldb + tc + col_threads * cc];
            KSTUDY_GEMM_UNROLL
            for (int r = 0; r < tm; ++r) {
              KSTUDY_GEMM_UNROLL
              for (int cc = 0; cc < tn; ++cc) acc[r][cc] += fa[r] * fb[cc];
            }
          }
        };

        if constexpr (cfg::double_buffered) {
          float next_a[cfg::a_fetches], next_b[cfg::b_fetches];
          const auto fetch = [&](int slice) {
            const int l0 = slice * bk;
            KSTUDY_GEMM_UNROLL
            for (int q = 0; q < cfg::a_fetches; ++q) {
              int r, kk;
              a_slot(q, r, kk);
              next_a[q] = a_value(r, l0 + kk);
            }
            KSTUDY_GEMM_UNROLL
            for (int q = 0; q < cfg::b_fetches; ++q) {
              int kk, cc;
              b_slot(q, kk, cc);
              next_b[q] = b_value(l0 + kk, cc);
            }
          };
          const auto store = [&](int buffer) {
            KSTUDY_GEMM_UNROLL
            for (int q = 0; q < cfg::a_fetches; ++q) {
              int r, kk;
              a_slot(q, r, kk);
              a_tiles[buffer * bk * lda + kk * lda + r] = next_a[q];
            }
            KSTUDY_GEMM_UNROLL
            for (int q = 0; q < cfg::b_fetches; ++q) {
              int kk, cc;
              b_slot(q, kk, cc);
              b_tiles[buffer * bk * ldb + kk * ldb + cc] = next_b[q];
            }
          };
          fetch(0);
          store(0);
          team.team_barrier();
          for (int slice = 0; slice < slice_count; ++slice) {
            const int buffer = slice & 1;
            const bool more = slice + 1 < slice_count;
            if (more) fetch(slice + 1);  // in flight during the FMAs below
            multiply(buffer);
            // The other buffer was last read in the previous slice, which every thread has finished.
            if (more) store(buffer ^ 1);
            team.team_barrier();
          }
        } else {
          for (int slice = 0; slice < slice_count; ++slice) {
            const int l0 = slice * bk;
            for (int q = 0; q < cfg::a_fetches; ++q) {
              int r, kk;
              a_slot(q, r, kk);
              a_tiles[kk * lda + r] = a_value(r, l0 + kk);
            }
            for (int q = 0; q < cfg::b_fetches; ++q) {
              int kk, cc;
              b_slot(q, kk, cc);
              b_tiles[kk * ldb + cc] = b_value(l0 + kk, cc);
            }
            team.team_barrier();
            multiply(0);
            team.team_barrier();
          }
        }

        KSTUDY_GEMM_UNROLL
        for (int r = 0; r < tm; ++r) {
          const int i = i0 + tr + row_threads * r;
          if (i >= m) continue;
          KSTUDY_GEMM_UNROLL
          for (int cc = 0; cc < tn; ++cc) {
            const int j = j0 + tc + col_threads * cc;
            if (j < n) c(i, j) = acc[r][cc];
          }
        }
      });
}

// C = A B, one thread per element (gemm_kokkos_naive).
template <class ExecutionSpace, class Layout, class In, class Out>
void launch_naive(const ExecutionSpace& space, const In& a, const In& b, const Out& c) {
  const std::int64_t m = c.extent(0), n = c.extent(1), k = a.extent(1);
  constexpr bool right = is_right_v<Layout>;
  Kokkos::parallel_for(
      "kstudy::gemm_naive", Kokkos::RangePolicy<ExecutionSpace, Kokkos::IndexType<std::int64_t>>(space, 0, m * n),
      KOKKOS_LAMBDA(const std::int64_t e) {
        const std::int64_t i = right ? e / n : e % m, j = right ? e % n : e / m;
        float sum = 0.0f;
        for (std::int64_t l = 0; l < k; ++l) sum += to_float(a(i, l)) * to_float(b(l, j));
        c(i, j) = sum;
      });
}

// ---------------------------------------------------------------------------------------------------------
// gemm_kokkos_warptile: the design of gemm_cuda.cu's rungs 6-7 in portable Kokkos (see the top of the file).

// C = A B on row-major operands given by pointer and row stride (the feature-major variant passes the
// transposed problem). M, N, K are the extents of this row-major problem.
struct warptile_operands {
  const float* a;
  const float* b;
  float* c;
  int m, n, k;
  std::int64_t lda, ldb, ldc;  // row strides in floats
};

// 128 x 128 x 16 tiles; 8 warps (4 down, 2 across) of 32 x 64 outputs, each a 4 x 8 grid of lanes with 8 x 8
// outputs. Lane (lr, lc) owns rows lr + 4 i (i < 8) and columns 4 lc + 32 j + e (j < 2, e < 4) of
// its warp's piece. Scratch per buffer: A as [128][16 + 4] (k-contiguous, rows padded so that the 4 rows a
// warp's float4 read touches fall in distinct bank quads), B as [16][128].
struct warptile_config {
  static constexpr int bm = 128, bn = 128, bk = 16, wm = 32, wn = 64, tm = 8, tn = 8;
  static constexpr int lanes_m = wm / tm, lanes_n = wn / tn, warps_n = bn / wn;
  static constexpr int threads = (bm / wm) * warps_n * 32;
  static constexpr int a_pitch = bk + 4, a_floats = bm * a_pitch, b_floats = bk * bn;  // per buffer
  static constexpr int scratch_quads = 2 * (a_floats + b_floats) / 4;                  // double-buffered
  // Quads of the A and B slices each thread fetches: chunk q of A is row q / (bk / 4), k offset
  // 4 (q % (bk / 4)) (four consecutive threads read 64 contiguous bytes of a row), chunk q of B is k row
  // q / (bn / 4), column 4 (q % (bn / 4)) (a warp reads 512 contiguous bytes).
  static constexpr int a_quads = bm * bk / 4 / threads, b_quads = bk * bn / 4 / threads;
  static_assert(lanes_m * lanes_n == 32 && threads == 256, "8 warps of 32 lanes");
  static_assert(bm * bk % (4 * threads) == 0 && bk * bn % (4 * threads) == 0, "every thread fetches whole quads");
  static_assert(a_floats % 4 == 0 && b_floats % 4 == 0, "buffers keep 16-byte alignment");
  static constexpr int quads = a_quads + b_quads;
  static_assert(quads == bk / 4 && threads % (bk / 4) == 0 && threads % (bn / 4) == 0,
                "one quad fetched per 4-deep step; a thread's quads of A (of B) share a column");
};

[[maybe_unused]] KOKKOS_INLINE_FUNCTION float component(const detail::float4_t& v, int e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;  // e is a constant after unrolling
}

// Four consecutive floats of a row from global memory at src, the first of them in column col of a row of
// cols: one 16-byte load where the rows are 16-byte aligned (Aligned: the row length and stride are multiples
// of 4, so a quad starting inside the row ends inside it), else four scalars. Guard: elements outside the
// matrix (row_ok false, or columns from cols on) read as zero and src is not dereferenced there.
template <bool Aligned, bool Guard>
KOKKOS_INLINE_FUNCTION detail::float4_t load_quad(const float* src, bool row_ok, int col, int cols) {
  if constexpr (!Guard) {
    if constexpr (Aligned) return *reinterpret_cast<const detail::float4_t*>(src);
    return {src[0], src[1], src[2], src[3]};
  } else if constexpr (Aligned) {
    return row_ok && col < cols ? *reinterpret_cast<const detail::float4_t*>(src)
                                : detail::float4_t{0.0f, 0.0f, 0.0f, 0.0f};
  } else {
    return {row_ok && col + 0 < cols ? src[0] : 0.0f, row_ok && col + 1 < cols ? src[1] : 0.0f,
            row_ok && col + 2 < cols ? src[2] : 0.0f, row_ok && col + 3 < cols ? src[3] : 0.0f};
  }
}

// One team's tile of C: thread t of cfg::threads, `scratch` 2 (a_floats + b_floats) 16-byte aligned floats,
// barrier() a team barrier. A function of plain arguments so that the same body runs under a Kokkos team.
// The k loop is double-buffered through registers (portable Kokkos has no cp.async): each thread fetches
// a quad of the next slice into registers before each quarter of the FMAs on the current one and stores it
// into the other buffer after, so the global loads are in flight during the FMAs and one barrier a slice
// suffices.
template <bool Aligned, class Barrier>
KOKKOS_INLINE_FUNCTION void warptile_tile(const warptile_operands& p, int tile, int t, float* scratch,
                                          const Barrier& barrier) {
  using cfg = warptile_config;
  using detail::float4_t;
  const int tiles_n = (p.n + cfg::bn - 1) / cfg::bn;
  // Consecutive teams along a row of tiles share a panel of A (the order of gemm_cuda.cu's rungs 6-7).
  const int row0 = (tile / tiles_n) * cfg::bm, col0 = (tile % tiles_n) * cfg::bn;
  const int warp = t / 32, lane = t % 32;
  const int warp_row = (warp / cfg::warps_n) * cfg::wm, warp_col = (warp % cfg::warps_n) * cfg::wn;
  const int lane_row = lane / cfg::lanes_n, lane_col = lane % cfg::lanes_n;
  const int a_offset = (warp_row + lane_row) * cfg::a_pitch;  // the lane's first A row in a buffer
  const int b_offset = warp_col + lane_col * 4;               // the lane's first B column in a buffer
  const bool inside = row0 + cfg::bm <= p.m && col0 + cfg::bn <= p.n;
  const int slices = (p.k + cfg::bk - 1) / cfg::bk;
  float* const a_buffers = scratch;
  float* const b_buffers = scratch + 2 * cfg::a_floats;

  // A thread's quads of a slice: q < a_quads is A row a_row + a_step q at k offset a_col, the others are
  // B k rows b_row + b_step (q - a_quads) at column b_col (see warptile_config).
  constexpr int a_step = cfg::threads / (cfg::bk / 4), b_step = cfg::threads / (cfg::bn / 4);
  const int a_row = t / (cfg::bk / 4), a_col = 4 * (t % (cfg::bk / 4));
  const int b_row = t / (cfg::bn / 4), b_col = 4 * (t % (cfg::bn / 4));
  // The one register stage: quad q of the next slice, fetched before the FMAs of 4-deep step q of this
  // slice and stored after them (see the k loop).
  float4_t next;
  const auto fetch = [&](int q, auto guard, int slice) {
    constexpr bool Guard = decltype(guard)::value;
    if (q < cfg::a_quads) {
      const int row = row0 + a_row + a_step * q, l = slice * cfg::bk + a_col;
      next = load_quad<Aligned, Guard>(p.a + std::int64_t(row) * p.lda + l, row < p.m, l, p.k);
    } else {
      const int l = slice * cfg::bk + b_row + b_step * (q - cfg::a_quads), col = col0 + b_col;
      next = load_quad<Aligned, Guard>(p.b + std::int64_t(l) * p.ldb + col, l < p.k, col, p.n);
    }
  };
  const auto store = [&](int q, int buffer) {
    float* dst = q < cfg::a_quads
                     ? a_buffers + buffer * cfg::a_floats + (a_row + a_step * q) * cfg::a_pitch + a_col
                     : b_buffers + buffer * cfg::b_floats + (b_row + b_step * (q - cfg::a_quads)) * cfg::bn + b_col;
    *reinterpret_cast<float4_t*>(dst) = next;
  };

  float acc[cfg::tm][cfg::tn];
  KSTUDY_GEMM_UNROLL
  for (int i = 0; i < cfg::tm; ++i) {
    KSTUDY_GEMM_UNROLL
    for (int j = 0; j < cfg::tn; ++j) acc[i][j] = 0.0f;
  }
  // Per 4-deep step: 8 float4 reads of A along k (a warp's 4 distinct rows are a_pitch floats apart:
  // distinct bank quads, the 8 lanes of a row broadcast) and per k two float4 reads of B (a warp reads 32
  // consecutive floats, the 4 lane rows broadcast): one wavefront each, 16 reads for 256 FMAs.
  // multiply(buffer, l4): the FMAs of k rows l4 .. l4 + 3 of a buffer.
  const auto multiply = [&](int buffer, int l4) {
    const float* a_lane = a_buffers + buffer * cfg::a_floats + a_offset;
    const float* b_lane = b_buffers + buffer * cfg::b_floats + b_offset;
    float4_t a_frag[cfg::tm];
    KSTUDY_GEMM_UNROLL
    for (int i = 0; i < cfg::tm; ++i)
      a_frag[i] = *reinterpret_cast<const float4_t*>(a_lane + i * cfg::lanes_m * cfg::a_pitch + l4);
    KSTUDY_GEMM_UNROLL
    for (int e = 0; e < 4; ++e) {
      float4_t b_frag[cfg::tn / 4];
      KSTUDY_GEMM_UNROLL
      for (int j = 0; j < cfg::tn / 4; ++j)
        b_frag[j] = *reinterpret_cast<const float4_t*>(b_lane + (l4 + e) * cfg::bn + j * 4 * cfg::lanes_n);
      KSTUDY_GEMM_UNROLL
      for (int i = 0; i < cfg::tm; ++i) {
        const float a_value = component(a_frag[i], e);
        KSTUDY_GEMM_UNROLL
        for (int j = 0; j < cfg::tn; ++j) acc[i][j] += a_value * component(b_frag[j / 4], j % 4);
      }
    }
  };

  // Slice 0 into buffer 0, guarded unless the tile lies inside C and the slice inside k.
  const bool plain0 = inside && cfg::bk <= p.k;
  KSTUDY_GEMM_UNROLL
  for (int q = 0; q < cfg::quads; ++q) {
    if (plain0)
      fetch(q, std::false_type{}, 0);
    else
      fetch(q, std::true_type{}, 0);
    store(q, 0);
  }
  barrier();
  // Quad q of the next slice is in flight during 4-deep step q of this one (256 FMAs a thread) and is stored
  // into the other buffer after it: one float4 of staging registers, not the slice's four (with four, ptxas
  // spills at 128 registers). The other buffer was last read in the previous slice, which every thread
  // finished before that slice's barrier.
  KSTUDY_GEMM_NO_UNROLL
  for (int s = 0; s < slices; ++s) {
    const int buffer = s & 1;
    const bool more = s + 1 < slices, plain = inside && (s + 2) * cfg::bk <= p.k;
    KSTUDY_GEMM_UNROLL
    for (int q = 0; q < cfg::quads; ++q) {
      if (more) {
        if (plain)
          fetch(q, std::false_type{}, s + 1);
        else
          fetch(q, std::true_type{}, s + 1);
      }
      multiply(buffer, 4 * q);
      if (more) store(q, buffer ^ 1);
    }
    barrier();
  }

  KSTUDY_GEMM_UNROLL
  for (int i = 0; i < cfg::tm; ++i) {
    const int row = row0 + warp_row + lane_row + i * cfg::lanes_m;
    if (row >= p.m) continue;
    KSTUDY_GEMM_UNROLL
    for (int j = 0; j < cfg::tn / 4; ++j) {
      const int col = col0 + b_offset + j * 4 * cfg::lanes_n;
      float* dst = p.c + std::int64_t(row) * p.ldc + col;
      const float4_t v{acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]};
      if constexpr (Aligned) {
        if (col < p.n) *reinterpret_cast<float4_t*>(dst) = v;  // col % 4 == 0 and n % 4 == 0: all inside
      } else {
        KSTUDY_GEMM_UNROLL
        for (int e = 0; e < 4; ++e)
          if (col + e < p.n) dst[e] = component(v, e);
      }
    }
  }
}

// The Kokkos team functor around warptile_tile (a functor, not a lambda: nvcc's extended lambdas may not
// hold the generic lambdas above). A CUDA team of 256 with vector length 1 is a block of 1 x 256 threads
// with team_rank = threadIdx.y, so team_rank / 32 is the warp, as warptile_tile assumes. LaunchBounds<256,
// 2>: two resident teams per SM (16 warps), at most 128 registers (ptxas: 126-127, no spills, sm_90).
template <class ExecutionSpace, bool Aligned>
struct warptile_functor {
  using policy_type = Kokkos::TeamPolicy<ExecutionSpace, Kokkos::LaunchBounds<warptile_config::threads, 2>>;
  using member_type = typename policy_type::member_type;
  // A View of float4_t in scratch: Kokkos aligns it to 16 bytes (its value size) under 3.4 and 4.6.
  using scratch_view = Kokkos::View<detail::float4_t*, typename ExecutionSpace::scratch_memory_space, unmanaged>;
  warptile_operands m_p;

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    scratch_view quads(team.team_scratch(0), warptile_config::scratch_quads);
    warptile_tile<Aligned>(m_p, team.league_rank(), team.team_rank(), reinterpret_cast<float*>(quads.data()),
                           [&]() { team.team_barrier(); });
  }
};

// Launches the warptile kernel on a device space: one team of 256 per 128 x 128 tile; rows read as 16-byte
// quads when every row of A, B and C starts 16-byte aligned and holds whole quads.
template <class ExecutionSpace>
void launch_warptile(const ExecutionSpace& space, const warptile_operands& p) {
  const auto quad_rows = [](const void* data, std::int64_t ld, int cols) {
    return reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && ld % 4 == 0 && cols % 4 == 0;
  };
  const bool aligned = quad_rows(p.a, p.lda, p.k) && quad_rows(p.b, p.ldb, p.n) && quad_rows(p.c, p.ldc, p.n);
  const int tiles =
      ((p.m + warptile_config::bm - 1) / warptile_config::bm) * ((p.n + warptile_config::bn - 1) / warptile_config::bn);
  const auto run = [&](auto functor) {
    using functor_type = decltype(functor);
    typename functor_type::policy_type policy(space, tiles, warptile_config::threads);
    policy = policy.set_scratch_size(
        0, Kokkos::PerTeam(functor_type::scratch_view::shmem_size(warptile_config::scratch_quads)));
    Kokkos::parallel_for("kstudy::gemm_warptile", policy, functor);
  };
  if (aligned)
    run(warptile_functor<ExecutionSpace, true>{p});
  else
    run(warptile_functor<ExecutionSpace, false>{p});
}

// C = A B for gemm_kokkos_warptile: on a device the warptile kernel (a feature-major C = A B is the row-major
// C^T = B^T A^T, whose operands are the same arrays: column-major B is row-major B^T, and so on); on a host
// the tiled kernel's host path (launch_tiled), see the top of the file.
template <class ExecutionSpace, class Layout, class In, class Out>
void launch_warptile_layout(const ExecutionSpace& space, const In& a, const In& b, const Out& c) {
  if constexpr (is_host_space_v<ExecutionSpace>) {
    launch_tiled<ExecutionSpace, Layout, float>(space, a, b, c);
  } else {
    const int m = static_cast<int>(c.extent(0)), n = static_cast<int>(c.extent(1)), k = static_cast<int>(a.extent(1));
    // Row strides of the row-major views of each operand; the variant's own Views are contiguous (stride
    // = extent), but the strides are what the layout guarantees.
    if constexpr (is_right_v<Layout>)
      launch_warptile(space, warptile_operands{a.data(), b.data(), c.data(), m, n, k, std::int64_t(a.stride(0)),
                                               std::int64_t(b.stride(0)), std::int64_t(c.stride(0))});
    else
      launch_warptile(space, warptile_operands{b.data(), a.data(), c.data(), n, m, k, std::int64_t(b.stride(1)),
                                               std::int64_t(a.stride(1)), std::int64_t(c.stride(1))});
  }
}

// Buffers, transfers and poisoning of one precision and layout in one execution space; a variant
// implements launch() (queues one resident run on m_space).
template <class ExecutionSpace, class Layout, gemm_precision P>
class gemm_kokkos_base : public kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = kokkos_queued_variant<ExecutionSpace>;

 public:
  using memory_space = typename ExecutionSpace::memory_space;
  using device_type = Kokkos::Device<ExecutionSpace, memory_space>;
  using value_type = input_t<P>;
  using input_matrix = Kokkos::View<value_type**, Layout, device_type>;
  using output_matrix = Kokkos::View<float**, Layout, device_type>;
  using const_host_input = Kokkos::View<const value_type**, Layout, Kokkos::HostSpace, unmanaged>;
  using host_output = Kokkos::View<float**, Layout, Kokkos::HostSpace, unmanaged>;
  using kokkos_base::on_host;
  static constexpr table_layout layout = is_right_v<Layout> ? table_layout::row_major : table_layout::feature_major;

  // own_stream: a private CUDA stream; Kokkos Kernels calls keep the default instance.
  explicit gemm_kokkos_base(bool own_stream) : kokkos_base(own_stream) {}
  ~gemm_kokkos_base() override { m_instance.drain(); }  // queued work ends before the buffers are freed

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = gemm_problem(problem, P);
    if (data.shape().layout != layout)
      throw std::invalid_argument(std::string(operation_name(P)) + ": this variant takes " +
                                  std::string(to_string(layout)) + " inputs");
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    // The kernels index with int where a GPU kernel should (tile and thread coordinates).
    constexpr std::int64_t limit = std::numeric_limits<int>::max();
    if (data.m() > limit || data.n() > limit || data.k() > limit)
      throw std::invalid_argument(std::string(operation_name(P)) + ": extents beyond 2^31 - 1");
    m_m = data.m();
    m_n = data.n();
    m_k = data.k();
    const auto alloc = [](const std::string& label) { return Kokkos::view_alloc(label, Kokkos::WithoutInitializing); };
    m_a = input_matrix(alloc("kstudy::gemm::a"), m_m, m_k);
    m_b = input_matrix(alloc("kstudy::gemm::b"), m_k, m_n);
    m_c = output_matrix(alloc("kstudy::gemm::c"), m_m, m_n);
    this->upload(data.streamed_inputs());
  }

  void poison() override {
    Kokkos::deep_copy(m_space, m_c, std::numeric_limits<float>::quiet_NaN());
    m_space.fence();
  }

  // On a device launches only queue (on the own stream, or the default instance's for Kokkos Kernels), so an
  // event recorded after enqueue_run() ends with them; only an own stream overlaps other instances' work.
  bool queues_asynchronously() const override { return !on_host && m_instance_owned; }
  bool enqueues_run() const override { return !on_host; }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 2) throw std::invalid_argument(std::string(operation_name(P)) + ": expected A and B");
    Kokkos::deep_copy(m_space, m_a,
                      const_host_input(inputs[0].as<const value_type>(), std::size_t(m_m), std::size_t(m_k)));
    Kokkos::deep_copy(m_space, m_b,
                      const_host_input(inputs[1].as<const value_type>(), std::size_t(m_k), std::size_t(m_n)));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    Kokkos::deep_copy(m_space, host_output(c_output(outputs), std::size_t(m_m), std::size_t(m_n)), m_c);
  }

 protected:
  using kokkos_base::m_instance;
  using kokkos_base::m_space;
  bool m_instance_owned = true;
  std::int64_t m_m = 0, m_n = 0, m_k = 0;
  input_matrix m_a, m_b;
  output_matrix m_c;
};

template <class ExecutionSpace, class Layout, gemm_precision P>
class gemm_kokkos_tiled final : public gemm_kokkos_base<ExecutionSpace, Layout, P> {
 public:
  gemm_kokkos_tiled() : gemm_kokkos_base<ExecutionSpace, Layout, P>(/*own_stream=*/true) {}
  void launch() override {
    launch_tiled<ExecutionSpace, Layout, input_t<P>>(this->m_space, this->m_a, this->m_b, this->m_c);
  }
};

template <class ExecutionSpace, class Layout>
class gemm_kokkos_warptile final : public gemm_kokkos_base<ExecutionSpace, Layout, gemm_precision::fp32> {
 public:
  gemm_kokkos_warptile() : gemm_kokkos_base<ExecutionSpace, Layout, gemm_precision::fp32>(/*own_stream=*/true) {}
  void launch() override {
    launch_warptile_layout<ExecutionSpace, Layout>(this->m_space, this->m_a, this->m_b, this->m_c);
  }
};

template <class ExecutionSpace, class Layout, gemm_precision P>
class gemm_kokkos_naive final : public gemm_kokkos_base<ExecutionSpace, Layout, P> {
 public:
  gemm_kokkos_naive() : gemm_kokkos_base<ExecutionSpace, Layout, P>(/*own_stream=*/true) {}
  void launch() override { launch_naive<ExecutionSpace, Layout>(this->m_space, this->m_a, this->m_b, this->m_c); }
};

template <class ExecutionSpace, class Layout>
class gemm_kokkos_kernels final : public gemm_kokkos_base<ExecutionSpace, Layout, gemm_precision::fp32> {
 public:
  gemm_kokkos_kernels() : gemm_kokkos_base<ExecutionSpace, Layout, gemm_precision::fp32>(/*own_stream=*/false) {
    this->m_instance_owned = false;  // the library queues on the default instance: run() fences
  }
  void launch() override { KokkosBlas::gemm("N", "N", 1.0f, this->m_a, this->m_b, 0.0f, this->m_c); }
};

template <class Space, class Layout, gemm_precision P>
void register_layout() {
  constexpr table_layout layout = is_right_v<Layout> ? table_layout::row_major : table_layout::feature_major;
  const std::string prefix = operation_name(P);
  const std::string suffix = is_right_v<Layout> ? "" : "_feature_major";
  const std::string widen = P == gemm_precision::bf16   ? "; bf16 widened to float on the fetch"
                            : P == gemm_precision::fp16 ? "; fp16 widened to float on the fetch"
                                                        : "";
  const bool host = is_host_space_v<Space>;
  auto tiled = variant_info_for(
      P, prefix + "_kokkos_tiled" + suffix, "gemm_kokkos",
      std::string("TeamPolicy, one team per ") +
          (host ? "64 x 64 tile of C (one thread), 32-deep k slices in team scratch"
                : "128 x 128 tile of C, 256 threads with 8 x 8 register tiles, 8-deep k slices double-buffered "
                  "in padded team scratch") +
          widen + ", own instance",
      layout);
  tiled.kernels_launched = 1;  // gemm_tiled
  tiled.rung = 0;              // the portable ladder's first attempt
  register_kokkos_variant<gemm_kokkos_tiled<Space, Layout, P>>(std::move(tiled));

  auto naive = variant_info_for(P, prefix + "_kokkos_naive" + suffix, "gemm_kokkos",
                                "RangePolicy, one thread per element of C, float32 dot product over k from global "
                                "memory" +
                                    widen + ", own instance",
                                layout);
  naive.kernels_launched = 1;  // gemm_naive
  naive.rung = 0;
  // Each thread reads its row of A and column of B: m n k of each (caches aside), C once.
  naive.traffic = [](const table_shape& s) {
    traffic_model t;
    t.bytes_read = 2 * s.rows * s.features * s.depth * input_element_bytes(P);
    t.bytes_written = s.rows * s.features * std::int64_t(sizeof(float));
    return t;
  };
  // It allocates A, B and C once: the essential bytes, not the traffic.
  naive.footprint = [](const table_shape& s) { return essential_traffic(P, s.rows, s.features, s.depth).total(); };
  register_kokkos_variant<gemm_kokkos_naive<Space, Layout, P>>(std::move(naive));

  if constexpr (P == gemm_precision::fp32) {
    auto warptile = variant_info_for(
        P, "gemm_kokkos_warptile" + suffix, "gemm_kokkos",
        host ? std::string("on a host the gemm_kokkos_tiled host path (one thread per 64 x 64 tile of C, 32-deep k "
                           "slices); on a device a 128 x 128 x 16 warp-tiled team kernel") +
                   (is_right_v<Layout> ? "" : " on C^T = B^T A^T") + ", own instance"
             : std::string("TeamPolicy, one team of 256 per 128 x 128 tile of C") +
                   (is_right_v<Layout> ? "" : " of the row-major C^T = B^T A^T") +
                   ": 8 warps of 32 x 64, lanes of 8 x 8 outputs; 16-deep k slices double-buffered through "
                   "registers in padded team scratch (A k-contiguous, B n-contiguous), float4 scratch reads and "
                   "16-byte global loads where rows allow, one barrier a slice, own instance",
        layout);
    warptile.kernels_launched = 1;  // gemm_warptile (gemm_tiled on a host)
    warptile.rung = 1;
    register_kokkos_variant<gemm_kokkos_warptile<Space, Layout>>(std::move(warptile));

    // Kokkos Kernels 3.4's cuBLAS TPL covers LayoutLeft gemm only: row-major runs its own kernel on CUDA too.
    auto kernels = variant_info_for(P, "gemm_kokkos_kernels" + suffix, "kokkos_kernels",
                                    std::string("KokkosBlas::gemm(\"N\", \"N\", 1, A, B, 0, C) (") +
                                        (is_right_v<Layout> ? "Kokkos Kernels' own kernel; its cuBLAS TPL takes "
                                                              "LayoutLeft only"
                                                            : "cuBLAS SGEMM through the TPL where enabled") +
                                        "), default instance",
                                    layout);
    kernels.implementation = implementation::kokkos_kernels;
    kernels.kernels_launched = 1;  // KokkosBlas::gemm (one library call)
    register_kokkos_variant<gemm_kokkos_kernels<Space, Layout>>(std::move(kernels));
  }
}

template <class Space>
void register_space() {
  register_layout<Space, Kokkos::LayoutRight, gemm_precision::fp32>();
  register_layout<Space, Kokkos::LayoutLeft, gemm_precision::fp32>();
  register_layout<Space, Kokkos::LayoutRight, gemm_precision::bf16>();
  register_layout<Space, Kokkos::LayoutLeft, gemm_precision::bf16>();
  register_layout<Space, Kokkos::LayoutRight, gemm_precision::fp16>();
  register_layout<Space, Kokkos::LayoutLeft, gemm_precision::fp16>();
}

[[maybe_unused]] const int registered =
    for_each_enabled_space([](auto tag) { register_space<typename decltype(tag)::type>(); });

}  // namespace
}  // namespace kstudy::gemm
