// Attention through cuDNN's fused flash attention (family attention_cuda, the vendor rung): the operation graph
// cuDNN's flash fprop engine matches, built with the backend graph API the way NVIDIA's cudnn-frontend lowers its
// SDPA forward node (CompositeSDPANode with its composite softmax and diagonal band mask), inference mode:
//
//   S  = bmm1(Q, K^T)                          float32, virtual; K^T is a stride view of K
//   S' = pointwise MUL(S, scale)               scale: a pass-by-value float32 scalar (1 / sqrt(head_dim))
//   causal only: row = GEN_INDEX(S', axis 2), col = GEN_INDEX(S', axis 3) (int32),
//        keep = CMP_GE(row, col) (boolean), S' = BINARY_SELECT(S', -inf, keep)
//   M  = reduction MAX(S') over keys           [1, H, T, 1]
//   E  = EXP(SUB(S', M))
//   Z  = reduction ADD(E)                      [1, H, T, 1]
//   stats = ADD(M, LOG(Z))                     virtual, unused: the frontend emits it in inference mode too
//   P  = DIV(E, Z)                             virtual, in Q's type (bf16 or fp16): bmm2 takes it as its A
//   O  = bmm2(P, V)
//
// Tensors are [B = 1, H, T, D] with the strides of the row-major heads x tokens x head_dim arrays. cuDNN's
// engine needs head_dim a multiple of 8 (and at most 256): a problem whose head_dim is not is zero-padded on
// the device to the next multiple of 8 (padded Q and K columns add nothing to the scores, padded V columns
// give O columns that are not downloaded; the scale stays 1 / sqrt(head_dim)).
//
// libcudnn is not linked: libcudnn.so.9 is opened with dlopen on the first prepare ($KSTUDY_CUDNN_LIBRARY
// names another file), and the few backend entry points used are declared below, so this file builds where
// no cuDNN is installed. Missing library, a cuDNN before 9.0, a machine cuDNN cannot start on, or no engine
// for the graph: prepare throws variant_unavailable (the runner records a skip). KSTUDY_CUDNN_LOG=1 prints
// each graph-building step to stderr; KSTUDY_CUDNN_NO_STATS=1 leaves the unused stats nodes out (a diagnosis
// switch, should an engine refuse the frontend's pattern). The plan (engine from heuristics mode A, then
// FALLBACK) is built in prepare, with its workspace and the variant pack (the buffers do not move); a run is one
// cudnnBackendExecute on the variant's stream.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention.hpp"
#include "detail/cudnn_library.hpp"
#include "kstudy/cuda_escape.hpp"
#include "kstudy/support/cuda_buffers.hpp"
#include "kstudy/support/cuda_variant.hpp"
#include "kstudy/variant.hpp"
#include "kstudy/variant_unavailable.hpp"

namespace kstudy::attention {
namespace {

// ---------------------------------------------------------------------------------------------------------
// The subset of cuDNN's backend API this file uses, declared here (values from cuDNN 9.14.0's cudnn_graph.h;
// the enumerators are cuDNN 9's ABI). Enumerations are passed as 32-bit ints, as the C enums are.

namespace cudnn9 {

using status = std::int32_t;  // cudnnStatus_t
using handle = void*;         // cudnnHandle_t
using descriptor = void*;     // cudnnBackendDescriptor_t
constexpr status success = 0;

namespace type {  // cudnnBackendAttributeType_t
constexpr std::int32_t handle = 0, data_type = 1, boolean = 2, int64 = 3, heur_mode = 8, knob_type = 9,
                       pointwise_mode = 14, backend_descriptor = 15, reduction_operator = 18, void_ptr = 6;
}  // namespace type

namespace kind {  // cudnnBackendDescriptorType_t
constexpr std::int32_t pointwise = 0, engine = 2, engine_config = 3, engine_heuristics = 4, execution_plan = 5,
                       knob_choice = 7, operation_pointwise = 13, operation_graph = 15, variant_pack = 16, tensor = 17,
                       matmul = 18, operation_matmul = 19, reduction = 21, operation_reduction = 22;
}  // namespace kind

namespace attr {  // cudnnBackendAttributeName_t
constexpr std::int32_t pointwise_mode = 0, pointwise_math_prec = 1, pointwise_axis = 9;
constexpr std::int32_t engineheur_mode = 200, engineheur_operation_graph = 201, engineheur_results = 202;
constexpr std::int32_t enginecfg_engine = 300, enginecfg_knob_choices = 302;
constexpr std::int32_t execution_plan_handle = 400, execution_plan_engine_config = 401,
                       execution_plan_workspace_size = 402;
constexpr std::int32_t knob_choice_knob_type = 600, knob_choice_knob_value = 601;
constexpr std::int32_t operation_pointwise_pw_descriptor = 750, operation_pointwise_xdesc = 751,
                       operation_pointwise_bdesc = 752, operation_pointwise_ydesc = 753,
                       operation_pointwise_tdesc = 758;
constexpr std::int32_t operationgraph_handle = 800, operationgraph_ops = 801;
constexpr std::int32_t tensor_byte_alignment = 900, tensor_data_type = 901, tensor_dimensions = 902,
                       tensor_strides = 903, tensor_unique_id = 906, tensor_is_virtual = 907, tensor_is_by_value = 908;
constexpr std::int32_t variant_pack_unique_ids = 1000, variant_pack_data_pointers = 1001, variant_pack_workspace = 1003;
constexpr std::int32_t engine_global_index = 1301;
constexpr std::int32_t matmul_comp_type = 1500;
constexpr std::int32_t operation_matmul_adesc = 1520, operation_matmul_bdesc = 1521, operation_matmul_cdesc = 1522,
                       operation_matmul_desc = 1523;
constexpr std::int32_t reduction_operator = 1600, reduction_comp_type = 1601;
constexpr std::int32_t operation_reduction_xdesc = 1610, operation_reduction_ydesc = 1611,
                       operation_reduction_desc = 1612;
}  // namespace attr

namespace data {  // cudnnDataType_t
constexpr std::int32_t float32 = 0, half = 2, int32 = 4, bfloat16 = 9, boolean = 11;
}
namespace pointwise {  // cudnnPointwiseMode_t
constexpr std::int32_t add = 0, mul = 1, div = 6, sub = 9, exp = 13, log = 15, cmp_ge = 303, gen_index = 501,
                       binary_select = 601;
}
namespace reduce {  // cudnnReduceTensorOp_t
constexpr std::int32_t add = 0, max = 3;
}
namespace heur {  // cudnnBackendHeurMode_t
constexpr std::int32_t fallback = 2, mode_a = 3;
}

using get_version_fn = std::size_t (*)();
using get_error_string_fn = const char* (*)(status);
using get_last_error_string_fn = void (*)(char*, std::size_t);
using create_fn = status (*)(handle*);
using destroy_fn = status (*)(handle);
using set_stream_fn = status (*)(handle, cudaStream_t);
using backend_create_fn = status (*)(std::int32_t, descriptor*);
using backend_destroy_fn = status (*)(descriptor);
using backend_finalize_fn = status (*)(descriptor);
using backend_set_fn = status (*)(descriptor, std::int32_t, std::int32_t, std::int64_t, const void*);
using backend_get_fn = status (*)(descriptor, std::int32_t, std::int32_t, std::int64_t, std::int64_t*, void*);
using backend_execute_fn = status (*)(handle, descriptor, descriptor);

}  // namespace cudnn9

bool log_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("KSTUDY_CUDNN_LOG");
    return env != nullptr && *env != '\0' && std::string(env) != "0";
  }();
  return enabled;
}
void log_step(const std::string& what) {
  if (log_enabled()) std::fprintf(stderr, "[kstudy cudnn] %s\n", what.c_str());
}

// The entry points, resolved from the opened library once per process (or why they could not be).
struct cudnn_library {
  cudnn9::get_version_fn get_version = nullptr;
  cudnn9::get_error_string_fn error_string = nullptr;
  cudnn9::get_last_error_string_fn last_error_string = nullptr;  // optional
  cudnn9::create_fn create = nullptr;
  cudnn9::destroy_fn destroy = nullptr;
  cudnn9::set_stream_fn set_stream = nullptr;
  cudnn9::backend_create_fn backend_create = nullptr;
  cudnn9::backend_destroy_fn backend_destroy = nullptr;
  cudnn9::backend_finalize_fn backend_finalize = nullptr;
  cudnn9::backend_set_fn backend_set = nullptr;
  cudnn9::backend_get_fn backend_get = nullptr;
  cudnn9::backend_execute_fn backend_execute = nullptr;
  std::size_t version = 0;
  std::string path;
  std::string unavailable;  // why it cannot be used, or ""
};

const cudnn_library& cudnn() {
  static cudnn_library api;
  static std::once_flag once;
  std::call_once(once, [] {
    api.path = kstudy::detail::open_cudnn(
        [](void* library) {
          using kstudy::detail::resolve_symbol;
          std::string missing;
          kstudy::detail::resolve_cudnn_handle_api(library, api, missing);
          resolve_symbol(library, "cudnnBackendCreateDescriptor", api.backend_create, missing);
          resolve_symbol(library, "cudnnBackendDestroyDescriptor", api.backend_destroy, missing);
          resolve_symbol(library, "cudnnBackendFinalize", api.backend_finalize, missing);
          resolve_symbol(library, "cudnnBackendSetAttribute", api.backend_set, missing);
          resolve_symbol(library, "cudnnBackendGetAttribute", api.backend_get, missing);
          resolve_symbol(library, "cudnnBackendExecute", api.backend_execute, missing);
          std::string optional;
          if (missing.empty()) resolve_symbol(library, "cudnnGetLastErrorString", api.last_error_string, optional);
          return missing;
        },
        "", api.unavailable, log_step);
    if (api.path.empty()) return;
    api.version = api.get_version();
    log_step(api.path + ": cudnnGetVersion() = " + std::to_string(api.version));
    if (api.version < 90000)
      api.unavailable = "cuDNN " + std::to_string(api.version) + " (" + api.path +
                        ") is older than 9.0, the first with this backend graph API's attention engines";
  });
  if (!api.unavailable.empty()) throw variant_unavailable(api.unavailable);
  return api;
}

// "<status name> (<code>)" and, where the library has it, cuDNN's last error message of this thread.
std::string describe(cudnn9::status status) {
  const auto& api = cudnn();
  std::string text = std::string(api.error_string(status)) + " (" + std::to_string(status) + ")";
  if (api.last_error_string != nullptr) {
    char message[2048] = {0};
    api.last_error_string(message, sizeof(message));
    if (message[0] != '\0') text += ": " + std::string(message);
  }
  return text;
}

// cuDNN's refusals (the NOT_SUPPORTED family, 3000-3999) are this machine's or this library's limits; anything
// else is a failure.
bool not_supported(cudnn9::status status) { return status >= 3000 && status < 4000; }

void check(cudnn9::status status, const char* call, const std::string& what) {
  if (status == cudnn9::success) return;
  throw std::runtime_error(std::string("attention_cudnn: ") + call + " [" + what + "] failed: " + describe(status));
}
#define KSTUDY_CUDNN_CALL(call, what) check((call), #call, (what))

// One backend descriptor, destroyed with its owner.
class backend_descriptor {
 public:
  backend_descriptor(std::int32_t kind, std::string name) : m_name(std::move(name)) {
    KSTUDY_CUDNN_CALL(cudnn().backend_create(kind, &m_descriptor), "create " + m_name);
  }
  backend_descriptor(const backend_descriptor&) = delete;
  backend_descriptor& operator=(const backend_descriptor&) = delete;
  ~backend_descriptor() {
    if (m_descriptor != nullptr) cudnn().backend_destroy(m_descriptor);
  }

  cudnn9::descriptor get() const { return m_descriptor; }
  const std::string& name() const { return m_name; }

  void set(std::int32_t attribute, const char* attribute_name, std::int32_t type, std::int64_t count,
           const void* values) {
    KSTUDY_CUDNN_CALL(cudnn().backend_set(m_descriptor, attribute, type, count, values), m_name + "." + attribute_name);
  }
  void set_descriptor(std::int32_t attribute, const char* attribute_name, const backend_descriptor& value) {
    cudnn9::descriptor d = value.get();
    set(attribute, attribute_name, cudnn9::type::backend_descriptor, 1, &d);
  }
  void set_int64(std::int32_t attribute, const char* attribute_name, std::int64_t value) {
    set(attribute, attribute_name, cudnn9::type::int64, 1, &value);
  }
  void set_data_type(std::int32_t attribute, const char* attribute_name, std::int32_t value) {
    set(attribute, attribute_name, cudnn9::type::data_type, 1, &value);
  }
  // Reads an attribute; returns how many elements cuDNN wrote.
  std::int64_t get(std::int32_t attribute, const char* attribute_name, std::int32_t type, std::int64_t count,
                   void* values) const {
    std::int64_t returned = 0;
    KSTUDY_CUDNN_CALL(cudnn().backend_get(m_descriptor, attribute, type, count, &returned, values),
                      m_name + "." + attribute_name);
    return returned;
  }
  // The descriptors an attribute holds (engine configurations, knob choices), each created as `kind` first.
  std::vector<std::unique_ptr<backend_descriptor>> get_descriptors(std::int32_t attribute, const char* attribute_name,
                                                                   std::int32_t kind,
                                                                   const std::string& kind_name) const {
    const std::int64_t count = get(attribute, attribute_name, cudnn9::type::backend_descriptor, 0, nullptr);
    std::vector<std::unique_ptr<backend_descriptor>> out;
    std::vector<cudnn9::descriptor> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      out.push_back(std::make_unique<backend_descriptor>(kind, kind_name + " " + std::to_string(i)));
      raw.push_back(out.back()->get());
    }
    const std::int64_t returned =
        count > 0 ? get(attribute, attribute_name, cudnn9::type::backend_descriptor, count, raw.data()) : 0;
    out.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, std::min(returned, count))));
    return out;
  }
  // The status, for callers that treat a refusal differently from a failure.
  cudnn9::status try_finalize() {
    log_step("finalize " + m_name);
    return cudnn().backend_finalize(m_descriptor);
  }
  void finalize() { KSTUDY_CUDNN_CALL(try_finalize(), "finalize " + m_name); }

 private:
  cudnn9::descriptor m_descriptor = nullptr;
  std::string m_name;
};
#define KSTUDY_CUDNN_SET(d, attribute, ...) (d).set(cudnn9::attr::attribute, #attribute, __VA_ARGS__)
#define KSTUDY_CUDNN_SET_DESCRIPTOR(d, attribute, value) (d).set_descriptor(cudnn9::attr::attribute, #attribute, value)

using descriptor_ptr = std::unique_ptr<backend_descriptor>;

// The operation graph of one problem shape, its plan and the variant pack over the variant's buffers.
class sdpa_graph {
 public:
  struct shape {
    std::int64_t heads = 0, tokens = 0, head_dim = 0;  // head_dim: the padded one the tensors have
    std::int32_t io_type = cudnn9::data::bfloat16;
    bool causal = false;
  };
  struct buffers {
    void *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
    const float* scale = nullptr;         // host memory, read at each execute
    const float* negative_inf = nullptr;  // likewise
  };

  // Builds the graph and its plan, once per object; throws variant_unavailable where cuDNN refuses every engine.
  void build(cudnn9::handle handle, const shape& s) {
    if (m_graph) throw std::logic_error("attention_cudnn: a graph is built once");
    m_handle = handle;
    const std::int64_t h = s.heads, t = s.tokens, d = s.head_dim;
    log_step("graph: heads " + std::to_string(h) + ", tokens " + std::to_string(t) + ", head_dim " + std::to_string(d) +
             (s.causal ? ", causal" : ", no mask") + (s.io_type == cudnn9::data::bfloat16 ? ", bf16" : ", fp16"));
    const std::vector<std::int64_t> qkv_dims{1, h, t, d}, qkv_strides{h * t * d, t * d, d, 1};
    const std::vector<std::int64_t> kt_dims{1, h, d, t}, kt_strides{h * t * d, t * d, 1, d};
    const std::vector<std::int64_t> score_dims{1, h, t, t}, score_strides{h * t * t, t * t, t, 1};
    const std::vector<std::int64_t> row_dims{1, h, t, 1}, row_strides{h * t, t, 1, 1};
    const std::vector<std::int64_t> scalar{1, 1, 1, 1};
    const auto f32 = cudnn9::data::float32;

    const auto& q = tensor("Q", uid_q, s.io_type, qkv_dims, qkv_strides);
    const auto& kt = tensor("K^T", uid_k, s.io_type, kt_dims, kt_strides);
    const auto& v = tensor("V", uid_v, s.io_type, qkv_dims, qkv_strides);
    const auto& o = tensor("O", uid_o, s.io_type, qkv_dims, qkv_strides);
    const auto& scale = tensor("scale", uid_scale, f32, scalar, scalar, false, true);

    const auto& scores = virtual_tensor("S", f32, score_dims, score_strides);
    matmul("bmm1", q, kt, scores);
    const backend_descriptor* scaled = &virtual_tensor("S*scale", f32, score_dims, score_strides);
    pointwise("attn_scale", cudnn9::pointwise::mul, f32, scores, &scale, nullptr, *scaled);
    if (s.causal) {
      const auto& negative_inf = tensor("-inf", uid_negative_inf, f32, scalar, scalar, false, true);
      const auto& row = virtual_tensor("row_index", cudnn9::data::int32, score_dims, score_strides);
      const auto& col = virtual_tensor("col_index", cudnn9::data::int32, score_dims, score_strides);
      pointwise("gen_row_index", cudnn9::pointwise::gen_index, f32, *scaled, nullptr, nullptr, row, 2);
      pointwise("gen_col_index", cudnn9::pointwise::gen_index, f32, *scaled, nullptr, nullptr, col, 3);
      const auto& keep = virtual_tensor("row>=col", cudnn9::data::boolean, score_dims, score_strides);
      pointwise("row>=col", cudnn9::pointwise::cmp_ge, cudnn9::data::boolean, row, &col, nullptr, keep);
      const auto& masked = virtual_tensor("S masked", f32, score_dims, score_strides);
      pointwise("binary_select", cudnn9::pointwise::binary_select, f32, *scaled, &negative_inf, &keep, masked);
      scaled = &masked;
    }
    const auto& max = virtual_tensor("max", f32, row_dims, row_strides);
    reduction("max", cudnn9::reduce::max, *scaled, max);
    const auto& centred = virtual_tensor("S-max", f32, score_dims, score_strides);
    pointwise("sub", cudnn9::pointwise::sub, f32, *scaled, &max, nullptr, centred);
    const auto& exps = virtual_tensor("exp", f32, score_dims, score_strides);
    pointwise("exp", cudnn9::pointwise::exp, f32, centred, nullptr, nullptr, exps);
    const auto& sum = virtual_tensor("sum_exp", f32, row_dims, row_strides);
    reduction("sum", cudnn9::reduce::add, exps, sum);
    if (std::getenv("KSTUDY_CUDNN_NO_STATS") == nullptr) {  // a diagnosis switch: the graph without the stats
      const auto& log_sum = virtual_tensor("log(sum_exp)", f32, row_dims, row_strides);
      pointwise("log", cudnn9::pointwise::log, f32, sum, nullptr, nullptr, log_sum);
      const auto& stats = virtual_tensor("stats", f32, row_dims, row_strides);
      pointwise("stats", cudnn9::pointwise::add, f32, max, &log_sum, nullptr, stats);
    }
    const auto& probabilities = virtual_tensor("P", s.io_type, score_dims, score_strides);
    pointwise("div", cudnn9::pointwise::div, f32, exps, &sum, nullptr, probabilities);
    matmul("bmm2", probabilities, v, o);

    m_graph = std::make_unique<backend_descriptor>(cudnn9::kind::operation_graph, "operation graph");
    KSTUDY_CUDNN_SET(*m_graph, operationgraph_handle, cudnn9::type::handle, 1, &m_handle);
    std::vector<cudnn9::descriptor> ops;
    for (const auto& op : m_ops) ops.push_back(op->get());
    KSTUDY_CUDNN_SET(*m_graph, operationgraph_ops, cudnn9::type::backend_descriptor,
                     static_cast<std::int64_t>(ops.size()), ops.data());
    const auto status = m_graph->try_finalize();
    if (not_supported(status))
      throw variant_unavailable("no cuDNN engine supports the attention graph: finalizing the operation graph (" +
                                std::to_string(ops.size()) + " operations) returned " + describe(status));
    check(status, "cudnnBackendFinalize", "operation graph");
    make_plan();
  }

  // The variant pack over the device buffers (fixed for the prepared problem) and the workspace.
  void bind(const buffers& b, void* workspace, bool causal) {
    std::vector<std::int64_t> uids{uid_q, uid_k, uid_v, uid_o, uid_scale};
    std::vector<void*> pointers{b.q, b.k, b.v, b.o, const_cast<float*>(b.scale)};
    if (causal) {
      uids.push_back(uid_negative_inf);
      pointers.push_back(const_cast<float*>(b.negative_inf));
    }
    m_pack = std::make_unique<backend_descriptor>(cudnn9::kind::variant_pack, "variant pack");
    KSTUDY_CUDNN_SET(*m_pack, variant_pack_unique_ids, cudnn9::type::int64, static_cast<std::int64_t>(uids.size()),
                     uids.data());
    KSTUDY_CUDNN_SET(*m_pack, variant_pack_data_pointers, cudnn9::type::void_ptr,
                     static_cast<std::int64_t>(pointers.size()), pointers.data());
    KSTUDY_CUDNN_SET(*m_pack, variant_pack_workspace, cudnn9::type::void_ptr, 1, &workspace);
    m_pack->finalize();
  }

  void execute() const {
    KSTUDY_CUDNN_CALL(cudnn().backend_execute(m_handle, m_plan->get(), m_pack->get()),
                      "execution plan of engine " + std::to_string(m_engine));
  }

  std::int64_t workspace_bytes() const { return m_workspace; }
  // The chosen engine: its global index, its rank in its heuristic's list, the mode, and its knobs.
  std::vector<std::pair<std::string, std::int64_t>> choice() const { return m_choice; }

 private:
  static constexpr std::int64_t uid_q = 1, uid_k = 2, uid_v = 3, uid_o = 4, uid_scale = 5, uid_negative_inf = 6;

  const backend_descriptor& tensor(const std::string& name, std::int64_t uid, std::int32_t type,
                                   const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& strides,
                                   bool is_virtual = false, bool by_value = false) {
    auto t = std::make_unique<backend_descriptor>(cudnn9::kind::tensor, "tensor " + name);
    KSTUDY_CUDNN_SET(*t, tensor_unique_id, cudnn9::type::int64, 1, &uid);
    KSTUDY_CUDNN_SET(*t, tensor_data_type, cudnn9::type::data_type, 1, &type);
    KSTUDY_CUDNN_SET(*t, tensor_dimensions, cudnn9::type::int64, static_cast<std::int64_t>(dims.size()), dims.data());
    KSTUDY_CUDNN_SET(*t, tensor_strides, cudnn9::type::int64, static_cast<std::int64_t>(strides.size()),
                     strides.data());
    const std::int64_t alignment = 16;
    KSTUDY_CUDNN_SET(*t, tensor_byte_alignment, cudnn9::type::int64, 1, &alignment);
    const bool virtual_flag = is_virtual;
    KSTUDY_CUDNN_SET(*t, tensor_is_virtual, cudnn9::type::boolean, 1, &virtual_flag);
    if (by_value) {
      const bool by_value_flag = true;
      KSTUDY_CUDNN_SET(*t, tensor_is_by_value, cudnn9::type::boolean, 1, &by_value_flag);
    }
    t->finalize();
    m_tensors.push_back(std::move(t));
    return *m_tensors.back();
  }
  const backend_descriptor& virtual_tensor(const std::string& name, std::int32_t type,
                                           const std::vector<std::int64_t>& dims,
                                           const std::vector<std::int64_t>& strides) {
    return tensor(name, m_next_virtual++, type, dims, strides, true);
  }

  // An operation's own descriptor (what it computes, already finalized) and the operation node, kept alive with
  // the graph; the node is finalized here.
  void add(descriptor_ptr what, descriptor_ptr op) {
    op->finalize();
    m_tensors.push_back(std::move(what));
    m_ops.push_back(std::move(op));
  }

  void matmul(const std::string& name, const backend_descriptor& a, const backend_descriptor& b,
              const backend_descriptor& c) {
    auto desc = std::make_unique<backend_descriptor>(cudnn9::kind::matmul, name + " matmul descriptor");
    desc->set_data_type(cudnn9::attr::matmul_comp_type, "matmul_comp_type", cudnn9::data::float32);
    desc->finalize();
    auto op = std::make_unique<backend_descriptor>(cudnn9::kind::operation_matmul, "operation " + name);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_matmul_adesc, a);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_matmul_bdesc, b);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_matmul_cdesc, c);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_matmul_desc, *desc);
    add(std::move(desc), std::move(op));
  }

  // y = mode(x[, b[, t]]); axis >= 0 for GEN_INDEX.
  void pointwise(const std::string& name, std::int32_t mode, std::int32_t math_type, const backend_descriptor& x,
                 const backend_descriptor* b, const backend_descriptor* t, const backend_descriptor& y,
                 std::int64_t axis = -1) {
    auto desc = std::make_unique<backend_descriptor>(cudnn9::kind::pointwise, name + " pointwise descriptor");
    KSTUDY_CUDNN_SET(*desc, pointwise_mode, cudnn9::type::pointwise_mode, 1, &mode);
    desc->set_data_type(cudnn9::attr::pointwise_math_prec, "pointwise_math_prec", math_type);
    if (axis >= 0) desc->set_int64(cudnn9::attr::pointwise_axis, "pointwise_axis", axis);
    desc->finalize();
    auto op = std::make_unique<backend_descriptor>(cudnn9::kind::operation_pointwise, "operation " + name);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_pointwise_pw_descriptor, *desc);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_pointwise_xdesc, x);
    if (b != nullptr) KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_pointwise_bdesc, *b);
    if (t != nullptr) KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_pointwise_tdesc, *t);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_pointwise_ydesc, y);
    add(std::move(desc), std::move(op));
  }

  void reduction(const std::string& name, std::int32_t reduce_op, const backend_descriptor& x,
                 const backend_descriptor& y) {
    auto desc = std::make_unique<backend_descriptor>(cudnn9::kind::reduction, name + " reduction descriptor");
    KSTUDY_CUDNN_SET(*desc, reduction_operator, cudnn9::type::reduction_operator, 1, &reduce_op);
    desc->set_data_type(cudnn9::attr::reduction_comp_type, "reduction_comp_type", cudnn9::data::float32);
    desc->finalize();
    auto op = std::make_unique<backend_descriptor>(cudnn9::kind::operation_reduction, "operation " + name);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_reduction_xdesc, x);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_reduction_ydesc, y);
    KSTUDY_CUDNN_SET_DESCRIPTOR(*op, operation_reduction_desc, *desc);
    add(std::move(desc), std::move(op));
  }

  // The engine configurations a heuristic mode proposes, best first (none where it refuses the graph).
  std::vector<descriptor_ptr> engine_configs(std::int32_t mode, const char* mode_name, std::string& why) {
    backend_descriptor heuristics(cudnn9::kind::engine_heuristics, std::string("heuristics ") + mode_name);
    KSTUDY_CUDNN_SET_DESCRIPTOR(heuristics, engineheur_operation_graph, *m_graph);
    KSTUDY_CUDNN_SET(heuristics, engineheur_mode, cudnn9::type::heur_mode, 1, &mode);
    const auto status = heuristics.try_finalize();
    if (status != cudnn9::success) {
      if (!not_supported(status)) check(status, "cudnnBackendFinalize", heuristics.name());
      why += std::string(why.empty() ? "" : "; ") + "heuristics " + mode_name + ": " + describe(status);
      return {};
    }
    auto configs = heuristics.get_descriptors(cudnn9::attr::engineheur_results, "engineheur_results",
                                              cudnn9::kind::engine_config, "engine config");
    log_step(std::string("heuristics ") + mode_name + ": " + std::to_string(configs.size()) + " engine configurations");
    if (configs.empty()) why += std::string(why.empty() ? "" : "; ") + "heuristics " + mode_name + ": no engine";
    return configs;
  }

  // The first configuration (mode A, then FALLBACK) whose execution plan finalizes.
  void make_plan() {
    std::string why;
    const std::pair<std::int32_t, const char*> modes[] = {{cudnn9::heur::mode_a, "A"},
                                                          {cudnn9::heur::fallback, "FALLBACK"}};
    for (const auto& [mode, mode_name] : modes) {
      auto configs = engine_configs(mode, mode_name, why);
      for (std::size_t i = 0; i < configs.size(); ++i) {
        auto plan = std::make_unique<backend_descriptor>(cudnn9::kind::execution_plan,
                                                         std::string("plan ") + mode_name + "#" + std::to_string(i));
        KSTUDY_CUDNN_SET(*plan, execution_plan_handle, cudnn9::type::handle, 1, &m_handle);
        KSTUDY_CUDNN_SET_DESCRIPTOR(*plan, execution_plan_engine_config, *configs[i]);
        const auto status = plan->try_finalize();
        if (status != cudnn9::success) {
          why += std::string(why.empty() ? "" : "; ") + plan->name() + ": " + describe(status);
          log_step(plan->name() + " refused: " + describe(status));
          continue;
        }
        plan->get(cudnn9::attr::execution_plan_workspace_size, "execution_plan_workspace_size", cudnn9::type::int64, 1,
                  &m_workspace);
        m_plan = std::move(plan);
        m_config = std::move(configs[i]);  // kept with the plan that was built from it
        record_choice(*m_config, mode, static_cast<std::int64_t>(i));
        log_step("plan: engine " + std::to_string(m_engine) + ", workspace " + std::to_string(m_workspace) + " bytes");
        return;
      }
    }
    throw variant_unavailable("no cuDNN engine supports the attention graph (" + why + ")");
  }

  // Engine index and knobs, for tuned_parameters(); what cannot be read is left out (logged).
  void record_choice(const backend_descriptor& config, std::int32_t mode, std::int64_t rank) {
    m_choice = {{"cudnn_version", static_cast<std::int64_t>(cudnn().version)},
                {"heuristic_mode", mode},
                {"heuristic_rank", rank},
                {"workspace_bytes", m_workspace}};
    try {
      backend_descriptor engine(cudnn9::kind::engine, "engine");
      cudnn9::descriptor raw = engine.get();
      config.get(cudnn9::attr::enginecfg_engine, "enginecfg_engine", cudnn9::type::backend_descriptor, 1, &raw);
      engine.get(cudnn9::attr::engine_global_index, "engine_global_index", cudnn9::type::int64, 1, &m_engine);
      m_choice.emplace_back("engine", m_engine);
      for (const auto& choice : config.get_descriptors(cudnn9::attr::enginecfg_knob_choices, "enginecfg_knob_choices",
                                                       cudnn9::kind::knob_choice, "knob choice")) {
        std::int32_t knob_type = 0;
        std::int64_t value = 0;
        choice->get(cudnn9::attr::knob_choice_knob_type, "knob_choice_knob_type", cudnn9::type::knob_type, 1,
                    &knob_type);
        choice->get(cudnn9::attr::knob_choice_knob_value, "knob_choice_knob_value", cudnn9::type::int64, 1, &value);
        m_choice.emplace_back("knob_" + std::to_string(knob_type), value);
      }
    } catch (const std::exception& e) {
      log_step(std::string("engine details not read: ") + e.what());
    }
  }

  cudnn9::handle m_handle = nullptr;
  std::vector<descriptor_ptr> m_tensors;  // tensors and the operations' own descriptors, alive with the plan
  std::vector<descriptor_ptr> m_ops;
  descriptor_ptr m_graph, m_config, m_plan, m_pack;
  std::int64_t m_next_virtual = 100;
  std::int64_t m_workspace = 0;
  std::int64_t m_engine = -1;
  std::vector<std::pair<std::string, std::int64_t>> m_choice;
};

// cuDNN's flash-attention engines take head_dim up to 256, a multiple of 8 (smaller ones are padded to one).
constexpr std::int64_t max_head_dim = 256;
constexpr std::int64_t head_dim_multiple = 8;

template <attention_precision P, attention_mask M>
class attention_cudnn final : public kstudy::cuda_stream_variant<> {
  static_assert(P != attention_precision::fp32, "cuDNN's flash attention takes bf16 or fp16");

 public:
  ~attention_cudnn() override {
    if (m_stream != nullptr) cudaStreamSynchronize(m_stream);
    m_graph.reset();  // its descriptors before the handle
    release();
    if (m_handle != nullptr) cudnn().destroy(m_handle);
  }

  void prepare(const problem_data& problem, const run_options& options) override {
    const auto& data = attention_problem(problem, P, M);
    if (options.block_size < 0) throw std::invalid_argument("block_size must be positive");
    check_shape(data.heads(), data.tokens(), data.head_dim());
    const auto& api = cudnn();  // variant_unavailable where cuDNN cannot be used
    m_graph.reset();
    release();
    create_stream();
    if (m_handle == nullptr) {
      log_step("cudnnCreate");
      const auto status = api.create(&m_handle);
      if (status != cudnn9::success) {
        m_handle = nullptr;
        throw variant_unavailable("cudnnCreate failed: " + describe(status));
      }
    }
    KSTUDY_CUDNN_CALL(api.set_stream(m_handle, m_stream), "handle");
    m_heads = data.heads();
    m_tokens = data.tokens();
    m_head_dim = data.head_dim();
    m_padded = (m_head_dim + head_dim_multiple - 1) / head_dim_multiple * head_dim_multiple;
    m_scale = data.scale();
    const std::int64_t padded_elements = m_heads * m_tokens * m_padded;
    device_alloc(m_q, padded_elements);
    device_alloc(m_k, padded_elements);
    device_alloc(m_v, padded_elements);
    device_alloc(m_o, padded_elements);
    if (m_padded != m_head_dim)  // the padding columns stay zero: uploads write only the head_dim columns
      for (auto* p : {m_q, m_k, m_v}) KSTUDY_CUDA_CHECK(cudaMemsetAsync(p, 0, padded_bytes(), m_stream));

    sdpa_graph::shape s;
    s.heads = m_heads;
    s.tokens = m_tokens;
    s.head_dim = m_padded;
    s.io_type = P == attention_precision::bf16 ? cudnn9::data::bfloat16 : cudnn9::data::half;
    s.causal = M == attention_mask::causal;
    m_graph = std::make_unique<sdpa_graph>();
    m_graph->build(m_handle, s);
    if (m_graph->workspace_bytes() > 0) {
      KSTUDY_CUDA_CHECK(cudaMalloc(&m_workspace, static_cast<std::size_t>(m_graph->workspace_bytes())));
    }
    m_graph->bind({m_q, m_k, m_v, m_o, &m_scale, &m_negative_inf}, m_workspace, s.causal);
    upload(data.streamed_inputs());
  }

  void poison() override {
    KSTUDY_CUDA_CHECK(cudaMemsetAsync(m_o, 0xFF, padded_bytes(), m_stream));  // all-ones: NaN in bf16 and fp16
    wait();
  }
  void enqueue_run() override { m_graph->execute(); }
  void enqueue_upload(const std::vector<host_span>& inputs) override {
    if (inputs.size() != 3) throw std::invalid_argument("attention: expected the three inputs Q, K, V");
    std::uint16_t* targets[3] = {m_q, m_k, m_v};
    for (int i = 0; i < 3; ++i)
      KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(targets[i], row_bytes(m_padded), inputs[i].data, row_bytes(m_head_dim),
                                          row_bytes(m_head_dim), static_cast<std::size_t>(m_heads * m_tokens),
                                          cudaMemcpyHostToDevice, m_stream));
  }
  void enqueue_download(const std::vector<host_span>& outputs) override {
    KSTUDY_CUDA_CHECK(cudaMemcpy2DAsync(o_output(outputs), row_bytes(m_head_dim), m_o, row_bytes(m_padded),
                                        row_bytes(m_head_dim), static_cast<std::size_t>(m_heads * m_tokens),
                                        cudaMemcpyDeviceToHost, m_stream));
  }

  // The cuDNN version, the engine cuDNN's heuristics chose (global index, rank, mode, knobs by knob type) and
  // the padded head_dim the graph was built for.
  std::vector<std::pair<std::string, std::int64_t>> tuned_parameters() const override {
    if (!m_graph) return {};
    auto out = m_graph->choice();
    out.emplace_back("graph_head_dim", m_padded);
    return out;
  }

 private:
  static void check_shape(std::int64_t heads, std::int64_t tokens, std::int64_t head_dim) {
    if (heads < 1 || tokens < 1 || head_dim < 1)
      throw std::invalid_argument("attention: heads, tokens and head_dim must be positive");
    if (head_dim > max_head_dim)
      throw std::invalid_argument("attention_cudnn: head_dim " + std::to_string(head_dim) +
                                  " is over cuDNN flash attention's limit of " + std::to_string(max_head_dim));
  }

  std::size_t row_bytes(std::int64_t dim) const { return static_cast<std::size_t>(dim) * sizeof(std::uint16_t); }
  std::size_t padded_bytes() const { return static_cast<std::size_t>(m_heads * m_tokens) * row_bytes(m_padded); }

  void release() {
    device_free(m_q);
    device_free(m_k);
    device_free(m_v);
    device_free(m_o);
    if (m_workspace != nullptr) cudaFree(m_workspace);
    m_workspace = nullptr;
  }

  cudnn9::handle m_handle = nullptr;
  std::unique_ptr<sdpa_graph> m_graph;
  std::int64_t m_heads = 0, m_tokens = 0, m_head_dim = 0, m_padded = 0;
  float m_scale = 1.0f;
  float m_negative_inf = -std::numeric_limits<float>::infinity();  // cuDNN 9.10+ masks with -inf (frontend)
  std::uint16_t *m_q = nullptr, *m_k = nullptr, *m_v = nullptr, *m_o = nullptr;
  void* m_workspace = nullptr;
};

template <attention_precision P, attention_mask M>
void bind_cudnn() {
  variant_binding<attention_cudnn<P, M>>{std::string(operation_name(P, M)) + "_cudnn@cuda"};
}

// Declared with their fields in attention_cudnn_info.cpp, which every build compiles.
[[maybe_unused]] const int registered = [] {
  bind_cudnn<attention_precision::bf16, attention_mask::none>();
  bind_cudnn<attention_precision::fp16, attention_mask::none>();
  bind_cudnn<attention_precision::bf16, attention_mask::causal>();
  bind_cudnn<attention_precision::fp16, attention_mask::causal>();
  return 0;
}();

}  // namespace
}  // namespace kstudy::attention
