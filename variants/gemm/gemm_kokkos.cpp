// GEMM in Kokkos, for every enabled execution space and both layouts (rung 0: the portable versions the
// CUDA ladder is compared against):
//  - gemm_kokkos_tiled (gemm, gemm_bf16): a TeamPolicy, one team per tile of C. On a GPU a 128 x 128 tile,
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
//    gemm_bf16 reads the 16-bit patterns and widens them to float (bits << 16) on the fetch: the products
//    are exact, the accumulation is float32 as on tensor cores. Not registered for gemm_tf32: it would pass
//    (its float32 products are more accurate) but would not be a TF32 kernel.
//  - gemm_kokkos_naive (gemm, gemm_bf16): one thread per element of C (a RangePolicy over m n, consecutive
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
#include "gemm/gemm.hpp"

#if defined(__CUDA_ARCH__)  // the device pass only: the host compiler warns on an unknown pragma
#define KSTUDY_GEMM_UNROLL _Pragma("unroll")
#else
#define KSTUDY_GEMM_UNROLL
#endif

namespace kstudy::gemm {
namespace {

using unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;

// The stored element type of a precision's inputs.
template <gemm_precision P>
using input_t = std::conditional_t<P == gemm_precision::bf16, std::uint16_t, float>;

KOKKOS_INLINE_FUNCTION float to_float(float v) { return v; }
KOKKOS_INLINE_FUNCTION float to_float(std::uint16_t bits) {
  union {
    std::uint32_t u;
    float f;
  } wide;
  wide.u = std::uint32_t(bits) << 16;
  return wide.f;
}

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
  using cfg = tile_config<detail::is_host_space_v<ExecutionSpace>>;
  return std::size_t(cfg::double_buffered ? 2 : 1) * cfg::bk * ((cfg::bm + cfg::pad) + (cfg::bn + cfg::pad));
}

// C = A B by tiles (gemm_kokkos_tiled). Free function: nvcc refuses extended lambdas in private members.
template <class ExecutionSpace, class Layout, class T, class In, class Out>
void launch_tiled(const ExecutionSpace& space, const In& a, const In& b, const Out& c) {
  using cfg = tile_config<detail::is_host_space_v<ExecutionSpace>>;
  constexpr int bm = cfg::bm, bn = cfg::bn, bk = cfg::bk, tm = cfg::tm, tn = cfg::tn;
  constexpr int lda = bm + cfg::pad, ldb = bn + cfg::pad;  // scratch row lengths (one row per k)
  constexpr int row_threads = bm / tm, col_threads = bn / tn, threads = cfg::threads;
  constexpr bool right = is_right_v<Layout>;
  // Two resident teams per multiprocessor: at most 128 registers a thread (sm_90: 124-127, no spills; with
  // one team, 131-135 registers and only 8 warps per SM).
  constexpr int teams_per_sm = detail::is_host_space_v<ExecutionSpace> ? 1 : 2;
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

// Buffers, transfers and poisoning of one precision and layout in one execution space; a variant
// implements launch() (queues one resident run on m_space).
template <class ExecutionSpace, class Layout, gemm_precision P>
class gemm_kokkos_base : public detail::kokkos_queued_variant<ExecutionSpace> {
  using kokkos_base = detail::kokkos_queued_variant<ExecutionSpace>;

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
  const std::string prefix = P == gemm_precision::fp32 ? "gemm" : "gemm_bf16";
  const std::string suffix = is_right_v<Layout> ? "" : "_feature_major";
  const std::string widen = P == gemm_precision::bf16 ? "; bf16 widened to float on the fetch" : "";
  const bool host = detail::is_host_space_v<Space>;
  auto tiled = variant_info_for(
      P, prefix + "_kokkos_tiled" + suffix, "gemm_kokkos",
      std::string("TeamPolicy, one team per ") +
          (host ? "64 x 64 tile of C (one thread), 32-deep k slices in team scratch"
                : "128 x 128 tile of C, 256 threads with 8 x 8 register tiles, 8-deep k slices double-buffered "
                  "in padded team scratch") +
          widen + ", own instance",
      layout);
  tiled.kernels_launched = 1;  // gemm_tiled
  detail::register_kokkos_variant<gemm_kokkos_tiled<Space, Layout, P>>(std::move(tiled));

  auto naive = variant_info_for(P, prefix + "_kokkos_naive" + suffix, "gemm_kokkos",
                                "RangePolicy, one thread per element of C, float32 dot product over k from global "
                                "memory" +
                                    widen + ", own instance",
                                layout);
  naive.kernels_launched = 1;  // gemm_naive
  // Each thread reads its row of A and column of B: m n k of each (caches aside), C once.
  naive.traffic = [](const table_shape& s) {
    traffic_model t;
    t.bytes_read = 2 * s.rows * s.features * s.depth * input_element_bytes(P);
    t.bytes_written = s.rows * s.features * std::int64_t(sizeof(float));
    return t;
  };
  // It allocates A, B and C once: the essential bytes, not the traffic.
  naive.footprint = [](const table_shape& s) { return essential_traffic(P, s.rows, s.features, s.depth).total(); };
  detail::register_kokkos_variant<gemm_kokkos_naive<Space, Layout, P>>(std::move(naive));

  if constexpr (P == gemm_precision::fp32) {
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
    detail::register_kokkos_variant<gemm_kokkos_kernels<Space, Layout>>(std::move(kernels));
  }
}

template <class Space>
void register_space() {
  register_layout<Space, Kokkos::LayoutRight, gemm_precision::fp32>();
  register_layout<Space, Kokkos::LayoutLeft, gemm_precision::fp32>();
  register_layout<Space, Kokkos::LayoutRight, gemm_precision::bf16>();
  register_layout<Space, Kokkos::LayoutLeft, gemm_precision::bf16>();
}

[[maybe_unused]] const int registered =
    detail::for_each_enabled_space([](auto tag) { register_space<typename decltype(tag)::type>(); });

}  // namespace
}  // namespace kstudy::gemm
