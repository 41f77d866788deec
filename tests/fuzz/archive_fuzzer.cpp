// Fuzz target for the archive reader that merge and --resume use: any byte string, written to a file and read
// as an archive, must read or be refused with a std::runtime_error (kstudy's one-line archive errors:
// archive_damaged, not an HDF5 file, not a kstudy archive) or std::invalid_argument (a bad experiment name);
// never crash, leak, hang, or throw anything else.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kstudy/runner/archive.hpp"

namespace {

// A new name per input: the reader verifies a file once per (path, size, modification time), and two inputs of
// one size written within a clock tick would otherwise share that check.
std::string scratch_path() {
  static unsigned long long count = 0;
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir && *dir ? dir : "/tmp") + "/kstudy-archive-fuzz-" + std::to_string(::getpid()) + "-" +
         std::to_string(count++) + ".h5";
}

void read_everything(const std::string& path) {
  kstudy::read_metadata(path);
  kstudy::read_shards(path);
  for (const auto& name : kstudy::list_experiments(path)) {
    kstudy::read_experiment(path, name);
    kstudy::read_samples(path, name);
    kstudy::read_gates(path, name);
    kstudy::read_ceilings(path, name);
    kstudy::read_summaries(path, name);
    kstudy::read_attribution(path, name);
    kstudy::read_health(path, name);
    kstudy::read_variants(path, name);
    kstudy::read_profile(path, name);
    kstudy::read_profile_attributes(path, name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int deadline = setenv("KSTUDY_ARCHIVE_READ_SECONDS", "5", 0);  // a looping input fails fast
  (void)deadline;
  const std::string path = scratch_path();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    read_everything(path);
  } catch (const std::runtime_error&) {
  } catch (const std::invalid_argument&) {
  }
  // The first input initialised HDF5 (its predefined types); from then on every input leaves the count alone.
  static const std::size_t baseline = kstudy::hdf5_identifiers_open();
  if (const auto now = kstudy::hdf5_identifiers_open(); now != baseline) {
    std::fprintf(stderr, "archive fuzzer: %zu HDF5 identifiers open after reading %s, %zu before\n", now, path.c_str(),
                 baseline);
    std::abort();
  }
  std::remove(path.c_str());
  return 0;
}
