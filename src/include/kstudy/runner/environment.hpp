#pragma once
#include <string>
#include <vector>

#include "kstudy/records.hpp"

namespace kstudy {
// What says which build measured an archive: root attributes (the schema and kstudy versions, the commit, the
// dirty flag and the diff's hash, the flavour) and environment keys (the Kokkos version and GPU architecture,
// kstudy's CUDA target, the backends, the compiler, the build type). Samples of two builds are not one run:
// `kstudy merge` refuses shards that differ in any of them, `kstudy run --resume` an archive another build wrote.
struct build_key {
  const char* name;
  bool environment;  // in run_metadata::environment, else in run_metadata::root
};
const std::vector<build_key>& build_keys();
// This binary's values of build_keys(), as collect_metadata writes them; needs no initialised Kokkos.
run_metadata this_build();
// "" where the archive's metadata names this build, else each key that differs: "KEY: ARCHIVE there, THIS in this
// build" (a key the archive lacks reads "(none)").
std::string build_difference(const run_metadata& archive);

// Root attributes (schema/kstudy version, git commit + dirty flag, UTC time, command line, host) and
// the /environment table (Kokkos version and configuration, backends, compiler, CUDA runtime and
// driver, GPU, CPU, OpenMP threads and binding). Kokkos must be initialised.
run_metadata collect_metadata(int argc, char** argv);
// Human-readable summary of the same, for `kstudy info`.
std::string describe_environment(const run_metadata& metadata);
}  // namespace kstudy
