#pragma once
// What a study produces, independent of where it is written. Every sink (HDF5 archive, JSON, console)
// consumes these records; nothing else defines the archive's content.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace kstudy {

// The timing boundaries a sample can cross (the seed's five timers, plus the calibration probes), declared once:
// the enum, the names archives store, and `kstudy schema`'s "timers" table (from which the Python side reads
// each timer's clock and scope instead of listing names) all expand this list.
//   X(name, clock, scope, description)
//   clock: the clock it reads (device_events: CUDA events on the variant's stream; host_wall: the host clock);
//   scope: what the time spans: "host" (a CPU variant's run), "resident" (a device variant, inputs already on the
//          device), "host_in_host_out" (host input to host-visible output, transfers included), "calibration"
//          (a probe of the machine, no variant output), "process" (a fresh process or a compilation), "region"
//          (back-to-back calls through one measured region, for energy).
#define KSTUDY_TIMER_KINDS(X)                                                                                   \
  X(host_wall, host_wall, host, "CPU variants: host clock around the fenced run")                               \
  X(resident_wall, host_wall, resident, "device variants: host clock through the final fence, inputs resident") \
  X(device_events, device_events, resident, "CUDA events on the variant's stream around the same operation")    \
  X(one_shot, host_wall, host_in_host_out, "host input -> host-visible scores and flags, transfers included")   \
  X(one_shot_alloc, host_wall, host_in_host_out, "one-shot including allocation of every device buffer")        \
  X(pipelined, host_wall, host_in_host_out, "one-shot through chunked, overlapped upload/kernel/download")      \
  X(cold, host_wall, process, "first call in a fresh process")                                                  \
  X(compile, host_wall, process, "NVRTC compilation of the CUDA escape-path source, empty cache")               \
  X(launch, host_wall, calibration, "launch-overhead probes")                                                   \
  X(transfer, host_wall, calibration, "transfer calibration copies")                                            \
  X(layout_conversion, host_wall, calibration,                                                                  \
    "resident row-major -> feature-major conversion of a table (kind layout_conversion)")                       \
  X(pin, host_wall, calibration,                                                                                \
    "making host memory page-locked: cudaHostAlloc, or cudaHostRegister of an existing buffer")                 \
  X(energy, host_wall, region,                                                                                  \
    "resident calls back to back through one region of at least the energy window: wall time and (device "      \
    "variants) NVML energy per call")

enum class timer_kind {
#define KSTUDY_TIMER_ENUMERATOR(name, clock, scope, description) name,
  KSTUDY_TIMER_KINDS(KSTUDY_TIMER_ENUMERATOR)
#undef KSTUDY_TIMER_ENUMERATOR
};
const char* to_string(timer_kind kind);
timer_kind parse_timer_kind(const std::string& name);

// One timer's declared properties (KSTUDY_TIMER_KINDS), in declaration order.
struct timer_kind_info {
  timer_kind kind;
  const char* name;
  const char* clock;
  const char* scope;
  const char* description;
};
const std::vector<timer_kind_info>& timer_kinds();

// What the correctness gate said about the output a sample's timings belong to. Calibration samples
// (transfer, launch, layout_conversion, compile and Kokkos-initialize probes) compute no scores: nothing to gate.
enum class gate_verdict {
  passed,     // the variant's output at this point matched the reference
  failed,     // it did not: the sample is kept as rejected, never summarised
  not_gated,  // no gate ran: a calibration probe, or a variant that failed or was skipped before its gate
};
const char* to_string(gate_verdict verdict);
gate_verdict parse_gate_verdict(const std::string& name);

// The caches a timed region starts from. Warm: whatever the previous trial left (at small points much of
// the input stays in the GPU's L2 or the CPU's last-level cache across trials). Cold: a buffer of at least
// twice the cache was written just before the timed region, outside it, so the inputs come from memory.
enum class cache_mode { warm, cold };
const char* to_string(cache_mode mode);
cache_mode parse_cache_mode(const std::string& name);

// Sets a record's extents (rows, features, depth: the names every per-point record, table_shape and the point
// keys share) to those of `from`, the shape it was measured at or the point it belongs to.
template <class Record, class Extents>
void copy_extents(Record& record, const Extents& from) {
  record.rows = from.rows;
  record.features = from.features;
  record.depth = from.depth;
}

// One measured trial.
struct sample_record {
  std::string experiment;
  std::string variant;      // variant id (name@backend), or a probe name for calibration samples
  std::string layout;       // row_major | feature_major | padded_row_major | "" for probes
  std::string memory_kind;  // pageable | pinned | device | ""
  std::string direction;    // h2d | d2h | "" (transfer calibration)
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;  // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t pitch = 0;
  std::int64_t block_size = 0;  // 0 = variant default
  std::int64_t bytes = 0;       // bytes moved by the timed region (the variant's traffic model)
  std::int64_t point = 0;       // index of the experiment point (for resume)
  std::int32_t replication = 0;
  std::int32_t trial = 0;
  timer_kind timer = timer_kind::host_wall;
  double seconds = 0.0;
  gate_verdict gate = gate_verdict::not_gated;
  // The GPU reported a slowdown reason at the point: before or after it, or in any reading taken during it
  // (the in-point sampler's, or those around a timed region: throttle_reasons below).
  bool throttled = false;
  // ok | rejected | failed: <error text> (the variant threw or a CUDA call failed; the study went on) |
  // skipped: <reason> (e.g. the point does not fit memory) | aborted: <error text> (the CUDA context was
  // lost; the point is not counted as finished, so --resume runs it again)
  std::string status;
  double occupancy = 0.0;  // calculated occupancy of the variant's kernel at this block size (0: n/a)
  // What the GPU did during this sample's timed region (NVML, read just outside it): energy from the device's
  // total-energy counter (J; NaN where not measured: no NVML, no counter, a host variant or a probe), and the
  // readings taken at its start, at its end and by the in-point sampler while it ran: mean power (W), lowest SM
  // clock (MHz) and every clocks-event reason bit seen (-1: no reading).
  double energy_joules = std::numeric_limits<double>::quiet_NaN();
  double power_watts = std::numeric_limits<double>::quiet_NaN();
  std::int64_t min_sm_clock_mhz = -1;
  std::int64_t throttle_reasons = -1;
  cache_mode cache = cache_mode::warm;  // the caches the timed region started from
  std::int64_t flush_bytes = 0;         // bytes written to evict the caches before it (0: warm)
  double flush_seconds = 0.0;           // how long that write took (outside the timed region)
  // The GPU that ran it, as the run's environment names it (the archive stamps it), so the runs of a study
  // spread over a node's GPUs (kstudy run --devices) stay told apart after their merge; "" without a GPU.
  std::string device_uuid;
  std::string device_pci_bus_id;
  std::string device_model;
};

// Whether a sample enters the summary: a measured trial (not a warm-up or a failure marker) with status
// ok whose output the gate did not reject (passed, or a calibration sample with nothing to gate).
bool summarised(const sample_record& sample);

// Whether a sample row shows that its (point, replication) unit finished (--resume skips it, salvage keeps it):
// any row but an abort marker (the CUDA context was lost: "aborted: ...") or a re-measured attempt's ("remeasured:
// ...", which a later attempt of the same unit follows).
bool finishes_unit(const sample_record& sample);

// A point's extents as people read them: "rows x features", with " x depth" for a three-axis operation.
std::string extents_text(std::int64_t rows, std::int64_t features, std::int64_t depth);

// Gate verdict for one (variant, shape).
struct gate_record {
  std::string experiment;
  std::string variant;
  std::string layout;
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;  // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t block_size = 0;
  bool passed = false;
  double max_abs_error = 0.0;
  double max_relative_error = 0.0;
  double rtol = 0.0;
  double atol = 0.0;
  // As kstudy::gate_result names them: outputs outside the tolerance (or left poisoned), discrete decisions that
  // differ where the reference is unambiguous, and outputs too close to a decision threshold to judge.
  std::int64_t value_failures = 0;
  std::int64_t discrete_mismatches = 0;
  std::int64_t ambiguous = 0;
  std::string message;
};

// A ceiling measured in the same run: a bandwidth (bytes, bytes_per_second) or, from schema 7, a compute
// roof (flops, flops_per_second; bytes 0): device_fp32_fma (a probe kernel of independent FMA chains) and
// cuBLAS GEMMs at the roof's extent (cublas_fp32_gemm, cublas_tf32_gemm, cublas_bf16_gemm, cublas_fp16_gemm);
// device_bf16_wgmma, device_fp16_wgmma and device_tf32_wgmma (wgmma peak probes, sm_90a) and device_bf16_tensor,
// device_fp16_tensor, device_tf32_tensor, the best of each probe and cuBLAS at the same input type.
struct ceiling_record {
  std::string name;        // device_copy | device_read | h2d_pinned | ... | device_fp32_fma | cublas_tf32_gemm | ...
  std::int64_t bytes = 0;  // bytes per measured operation
  double seconds = 0.0;    // median
  double bytes_per_second = 0.0;
  std::int64_t flops = 0;  // flops per measured operation (compute roofs; 0 for bandwidths)
  double flops_per_second = 0.0;
  // The clock that timed it, named by the timer that uses that clock: device_events (CUDA events on the stream
  // the probe ran on, as device variants are timed) or host_wall (the host clock through a fence). A number
  // is quoted against a roof of its own clock only.
  timer_kind clock = timer_kind::host_wall;
};

// Median / spread per (variant, point, timer) over accepted samples.
struct summary_record {
  std::string experiment;
  std::string variant;
  std::string layout;
  std::string memory_kind;
  std::string direction;
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;  // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t block_size = 0;
  timer_kind timer = timer_kind::host_wall;
  cache_mode cache = cache_mode::warm;
  std::int64_t samples = 0;
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
  double q1 = 0.0;
  double q3 = 0.0;
  double bytes_per_second = 0.0;  // variant traffic / median
  double fraction_of_roof = 0.0;  // against the matching ceiling of the same run (0 if none)
  double occupancy = 0.0;         // calculated occupancy (block-size studies; 0: n/a)
  // The 95% interval of the median across replications (kstudy/precision.hpp; NaN before schema 13), and why
  // sampling of its point stopped: fixed | precision | time_out | max_replications ("" before schema 13).
  double interval_low = std::numeric_limits<double>::quiet_NaN();
  double interval_high = std::numeric_limits<double>::quiet_NaN();
  std::string stopped;
};

// Per-kernel breakdown of composed variants from Kokkos' profiling callbacks (attribution pass).
struct attribution_record {
  std::string experiment;
  std::string variant;
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;  // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::string kernel;      // Kokkos kernel label
  std::int64_t calls = 0;
  double seconds = 0.0;  // total over calls
};

// Where the wall time of one point run goes, declared once: the health table's <name>_seconds columns, the phase
// enum and `kstudy schema`'s "point_phases" (from which the Python side reads them) all expand this list. Host wall
// seconds of each phase; together with the timed regions inside `trials` they say what a protocol costs around
// what it measures (performance_notes, session 30: 99.7% of a wide softmax study's device time was outside its
// timed regions). NaN where a kind does not time the phase (only sweep does) and in archives before schema 14.
//   X(name, description)
#define KSTUDY_POINT_PHASES(X)                                                                                      \
  X(inputs,                                                                                                         \
    "generating the point's inputs and copying them into each layout its variants take (0 where the previous "      \
    "point's are reused: the block-size axis)")                                                                     \
  X(reference, "the float64 reference, once per point (0 where reused)")                                            \
  X(prepare,                                                                                                        \
    "each variant's construction, allocation, upload and gated first run, checked against the reference (a Python " \
    "rung's worker start included), after the memory check")                                                        \
  X(warm_up, "the untimed warm-up calls")                                                                           \
  X(trials,                                                                                                         \
    "the trials: their timed regions and what brackets them (poisoning, cold-mode flushes, GPU readings, one-shot " \
    "host buffers, a pipelined strategy's own gate)")                                                               \
  X(recheck, "the gate once more, on each variant's last timed run")                                                \
  X(attribution, "the per-kernel attribution pass of multi-kernel variants (first replication only)")

enum class point_phase {
#define KSTUDY_POINT_PHASE_ENUMERATOR(name, description) name,
  KSTUDY_POINT_PHASES(KSTUDY_POINT_PHASE_ENUMERATOR)
#undef KSTUDY_POINT_PHASE_ENUMERATOR
};
// One phase's declared properties (KSTUDY_POINT_PHASES), in declaration order; column: its health-table column.
struct point_phase_info {
  point_phase phase;
  const char* name;
  const char* column;
  const char* description;
};
const std::vector<point_phase_info>& point_phases();

// The GPU's state before and after one experiment point (NVML), one row per point run. Readings NVML
// could not give are -1. A point aborted by a lost CUDA context and run again on --resume has two rows.
struct health_record {
  std::string experiment;
  std::int64_t point = 0;
  std::int32_t replication = 0;
  std::int64_t rows = 0;  // point keys (0 / "" where the experiment kind has no such axis)
  std::int64_t features = 0;
  std::int64_t depth = 1;  // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t block_size = 0;
  std::int64_t bytes = 0;
  std::string memory_kind;
  std::string direction;
  std::string device;      // "<GPU name> (<PCI bus id>)" or "unavailable: <why>"
  bool available = false;  // both readings came from NVML
  std::int64_t before_sm_clock_mhz = -1;
  std::int64_t before_memory_clock_mhz = -1;
  std::int64_t before_temperature_c = -1;
  std::int64_t before_power_mw = -1;
  std::int64_t before_throttle_reasons = -1;  // NVML clocks-event (throttle) reason bitmask
  std::int64_t after_sm_clock_mhz = -1;
  std::int64_t after_memory_clock_mhz = -1;
  std::int64_t after_temperature_c = -1;
  std::int64_t after_power_mw = -1;
  std::int64_t after_throttle_reasons = -1;
  double seconds = 0.0;  // wall time between the two readings
  // A slowdown reason (power cap, thermal, HW slowdown / power brake) was set before, after or during the point.
  bool throttled = false;
  std::string reasons;  // names of every reason bit seen at the point, e.g. "gpu_idle,sw_power_cap"
  // During the point: energy between the two readings (J, the device's total-energy counter; NaN where it
  // is not available, environment gpu_energy says why), and what the in-point sampler and the readings around
  // timed regions saw: their number, the lowest SM clock, the mean power and every reason bit.
  double energy_joules = std::numeric_limits<double>::quiet_NaN();
  std::int64_t sampled_readings = 0;
  std::int64_t sampled_min_sm_clock_mhz = -1;
  double sampled_mean_power_mw = std::numeric_limits<double>::quiet_NaN();
  std::int64_t sampled_throttle_reasons = -1;
  // Schema 14: the point's wall time by phase (KSTUDY_POINT_PHASES: inputs_seconds, reference_seconds, ...).
#define KSTUDY_POINT_PHASE_MEMBER(name, description) double name##_seconds = std::numeric_limits<double>::quiet_NaN();
  KSTUDY_POINT_PHASES(KSTUDY_POINT_PHASE_MEMBER)
#undef KSTUDY_POINT_PHASE_MEMBER
};
// A point run's seconds in one phase (its health-table column).
double& phase_seconds(health_record& record, point_phase phase);

// One kernel launch of `kstudy profile`: hardware counters read by Nsight Compute (ncu) for one profiled
// call of a device variant at one point. Counters come from a replayed, instrumented launch: its duration
// is kept to interpret the counters (a rate over the profiled kernel) and is never a timing sample.
// Values ncu did not report are NaN (doubles) or -1 (integers).
struct profile_record {
  std::string experiment;
  std::string variant;  // variant id (name@backend)
  std::string layout;
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;       // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t block_size = 0;  // the point's block size (0 = variant default); launch_block_size: what ran
  std::int64_t point = 0;       // index of the experiment point
  std::string status;           // ok | rejected (gate failed; counters kept) | failed: <reason> | skipped: <reason>
  bool gate_passed = false;
  std::int32_t launch = -1;             // order of the kernel within the profiled call, from 0 (-1: no kernel)
  std::string kernel;                   // kernel name as ncu reports it (demangled)
  std::string label;                    // Kokkos kernel label, or the Kokkos profiling region around a library kernel
  std::int64_t grid_size = -1;          // blocks
  std::int64_t launch_block_size = -1;  // threads per block
  std::int64_t registers_per_thread = -1;
  double profiled_duration_s = 0.0;        // gpu__time_duration.sum under ncu: instrumented, never a timing
  double dram_bytes_read = 0.0;            // B
  double dram_bytes_written = 0.0;         // B
  double dram_throughput_pct = 0.0;        // % of the DRAM's peak sustained throughput over the kernel
  double achieved_occupancy_pct = 0.0;     // active warps / maximum warps per SM, % (over active cycles)
  double theoretical_occupancy_pct = 0.0;  // the limit the launch configuration allows, %
  double global_load_sectors = 0.0;        // 32-byte L1TEX sectors of global loads
  double global_load_requests = 0.0;       // global load requests (one per warp-level instruction)
  double global_store_sectors = 0.0;
  double global_store_requests = 0.0;
  // Shared-memory bank conflicts (extra wavefronts) of loads and stores, and the L2's hit rate over the
  // sectors it served (schema 6; NaN where not reported, 0 in archives before it).
  double shared_bank_conflicts_load = 0.0;
  double shared_bank_conflicts_store = 0.0;
  double l2_hit_rate_pct = 0.0;
  // Schema 11, what the SMs executed, so that a roofline can be drawn from counters rather than from a model
  // (NaN where ncu did not report them, and in archives before schema 11). Raw counts only: executed flops
  // (weights per opcode), flop/s and intensity are derived in one place, scripts/kstudy_py/archive.py.
  static constexpr double unreported = std::numeric_limits<double>::quiet_NaN();
  // Predicated-on thread instructions per floating-point opcode (a half-precision one may be a half2's two lanes).
  double fp32_ffma_inst = unreported, fp32_fadd_inst = unreported, fp32_fmul_inst = unreported;
  double fp64_dfma_inst = unreported, fp64_dadd_inst = unreported, fp64_dmul_inst = unreported;
  double fp16_hfma_inst = unreported, fp16_hadd_inst = unreported, fp16_hmul_inst = unreported;
  // Tensor pipe: warp instructions (mma.sync HMMA; Hopper's wgmma, GMMA) and math ops of its path per input
  // type (ncu counts a multiply-add as 2 ops: flops).
  double tensor_hmma_inst = unreported, tensor_gmma_inst = unreported;
  double tensor_fp16_ops = unreported, tensor_bf16_ops = unreported, tensor_tf32_ops = unreported;
  double tensor_fp64_ops = unreported, tensor_fp8_ops = unreported;
  // Pipe utilisation, % of peak over active cycles, and warp instructions per active SM cycle.
  double fma_pipe_pct = unreported, tensor_pipe_pct = unreported, lsu_pipe_pct = unreported;
  double ipc = unreported;
  // Warp stall reasons: cycles a warp spent in each per issued instruction (their sum is the warp latency).
  double stall_long_scoreboard = unreported, stall_short_scoreboard = unreported, stall_mio_throttle = unreported;
  double stall_lg_throttle = unreported, stall_wait = unreported, stall_math_pipe_throttle = unreported;
  double stall_barrier = unreported, stall_not_selected = unreported, stall_selected = unreported;
  double stall_no_instruction = unreported, stall_dispatch_stall = unreported, stall_tex_throttle = unreported;
  double stall_gmma = unreported;  // Hopper: waiting for a wgmma to complete
  // Local-memory traffic through L1 (register spills and local arrays), B.
  double local_load_bytes = unreported, local_store_bytes = unreported;
};

// What the code knows about one variant at one point an experiment measured: its identity, the model
// of what it moves and computes there, and the operation's own minimum of both. One row per (variant,
// rows, features, block_size), written with the point's first replication.
struct variant_record {
  std::string variant;    // variant id (name@backend), as in sample_record::variant
  std::string operation;  // the operation it implements (variant_info::operation): scoring, stream_triad, ...
  // The ceiling its operation's flops are quoted against (operation_info::compute_ceiling): a compute-bound
  // operation names a compute roof of the run's ceilings; empty for bandwidth-bound ones (and before schema 7).
  std::string compute_ceiling;
  std::string axes;            // the operation's axis names, comma-separated: rows,features | n | m,n,k (rows,
                               // features, depth below are its extents in order; missing ones are 1)
  std::string family;          // variant_info::family: cpu_reference, composed, partial_fusion, ...
  std::string fusion_level;    // none | partial | full
  std::string implementation;  // kokkos | kokkos_kernels | handwritten_cuda | vendor_library | reference | mixed |
                               // kokkos_mixed
                               // (variant_info::implementation; empty in archives before version 6)
  std::string layout;          // row_major | feature_major | padded_row_major
  std::string backend;         // serial | openmp | cuda
  bool on_device = false;      // its memory is not host-accessible: one-shot timings include transfers
  std::int32_t kernels_launched = 0;  // per resident run
  // Position on its operation's kernel ladder (variant_info::rung): 1 the simplest, 0 not a rung (and every
  // variant of an archive before schema version 6).
  std::int32_t rung = 0;
  std::int64_t rows = 0;
  std::int64_t features = 0;
  std::int64_t depth = 1;                // third extent of a three-axis operation (gemm: k); 1 otherwise
  std::int64_t block_size = 0;           // the point's block size (0 = variant default)
  std::int64_t modelled_bytes_read = 0;  // the variant's traffic model for one resident run at this shape
  std::int64_t modelled_bytes_written = 0;
  std::int64_t essential_bytes = 0;  // the operation's minimum traffic at this shape (essential_traffic)
  std::int64_t essential_flops = 0;  // the operation's arithmetic at this shape (essential_flops)
  // Device memory the variant held at this point: the most in use (cudaMemGetInfo) after prepare and after
  // its gated run, less what was in use before prepare; buffers, library workspaces and scratch included.
  // -1 for host variants and archives before schema 7.
  std::int64_t peak_device_bytes = -1;
  // What an autotuned variant chose (variant::tuned_parameters()), "name=value" pairs joined by ",";
  // empty when it chooses nothing.
  std::string tuned_parameters;
};

// Root attributes and /environment: provenance of the whole archive.
struct run_metadata {
  std::map<std::string, std::string> root;         // schema_version, kstudy_version, git_commit, ...
  std::map<std::string, std::string> environment;  // kokkos_version, kokkos_configuration, gpu_name, ...
};

// A merged archive's record of one shard it took rows from (/shards/<index>, written by kstudy merge).
struct shard_record {
  std::int64_t index = 0;
  std::string source;                    // the shard archive's path at merge time
  run_metadata metadata;                 // its root attributes and /environment
  std::vector<ceiling_record> ceilings;  // the ceilings it measured (each shard measures its own)
};

// One experiment's definition as run (the JSON text) and its protocol.
struct experiment_record {
  std::string name;
  std::string definition_json;
  std::string protocol_json;
  std::string fingerprint;  // hash of the definition, to refuse merging / resuming a different experiment
};

}  // namespace kstudy
