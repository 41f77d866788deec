#pragma once
// Opening cuDNN at run time, shared by the variants that call it (softmax_cudnn, attention_*_cudnn): the library
// is not linked, so kstudy starts on a machine without it and only those variants say why they cannot run.
// Candidates in order: $KSTUDY_CUDNN_LIBRARY, libcudnn.so.9 on the loader's path, then the library CMake found at
// configure time (if any). The first that has every entry point a variant needs stays open for the process.
#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace kstudy::detail {

// `name` from `library` into `f`; appended to `missing` (comma-separated) when the library lacks it.
template <class F>
void resolve_symbol(void* library, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(library, name));
  if (f == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

// The entry points every cuDNN variant calls (version, error strings, the handle and its stream), into any struct
// that names them get_version, error_string, create, destroy and set_stream, whatever their declared types.
template <class Api>
void resolve_cudnn_handle_api(void* library, Api& api, std::string& missing) {
  resolve_symbol(library, "cudnnGetVersion", api.get_version, missing);
  resolve_symbol(library, "cudnnGetErrorString", api.error_string, missing);
  resolve_symbol(library, "cudnnCreate", api.create, missing);
  resolve_symbol(library, "cudnnDestroy", api.destroy, missing);
  resolve_symbol(library, "cudnnSetStream", api.set_stream, missing);
}

// Opens the first candidate whose `bind(library)` resolves everything it needs (it returns what is missing, ""
// when nothing is); `log` hears each attempt. Returns the path opened, or "" with `why` naming what each
// candidate lacked or why it did not open.
inline std::string open_cudnn(const std::function<std::string(void*)>& bind, const std::string& configured,
                              std::string& why, const std::function<void(const std::string&)>& log = {}) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("KSTUDY_CUDNN_LIBRARY"); env != nullptr && *env != '\0') candidates.push_back(env);
  candidates.push_back("libcudnn.so.9");
  if (!configured.empty()) candidates.push_back(configured);
  why.clear();
  for (const auto& path : candidates) {
    if (log) log("dlopen " + path);
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* error = dlerror();
      why += (why.empty() ? "" : "; ") + (error != nullptr ? std::string(error) : path);
      continue;
    }
    const std::string missing = bind(library);
    if (!missing.empty()) {
      why += (why.empty() ? "" : "; ") + path + " lacks " + missing;
      dlclose(library);
      continue;
    }
    why.clear();  // what earlier candidates lacked no longer matters
    return path;  // kept open for the process's lifetime
  }
  why = "cuDNN could not be loaded (" + why +
        "): point LD_LIBRARY_PATH at the directory holding libcudnn.so.9 (e.g. the nvidia-cudnn Python wheel's "
        "nvidia/cudnn/lib) or KSTUDY_CUDNN_LIBRARY at the library";
  return "";
}

}  // namespace kstudy::detail
