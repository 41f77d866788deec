#pragma once
#include "kstudy/records.hpp"

namespace kstudy {
// Root attributes (schema/kstudy version, git commit + dirty flag, UTC time, command line, host) and
// the /environment table (Kokkos version and configuration, backends, compiler, CUDA runtime and
// driver, GPU, CPU, OpenMP threads and binding). Kokkos must be initialised.
run_metadata collect_metadata(int argc, char** argv);
// Human-readable summary of the same, for `kstudy info`.
std::string describe_environment(const run_metadata& metadata);
}  // namespace kstudy
