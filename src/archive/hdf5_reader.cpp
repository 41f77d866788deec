// The archive's read side: --resume and reports read what hdf5_sink wrote.
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <set>
#include <stdexcept>
#include <tuple>

#include "detail/hdf5_digest.hpp"
#include "detail/hdf5_global_heap.hpp"
#include "detail/hdf5_util.hpp"
#include "kstudy/runner/archive.hpp"

namespace kstudy {

using namespace archive_detail;

namespace {

herr_t collect_link_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

std::string without_prefix(std::string text) {
  if (text.rfind("kstudy: ", 0) == 0) text.erase(0, 8);
  return text;
}

[[noreturn]] void throw_damaged(const std::string& path, const std::string& what) {
  throw archive_damaged("kstudy: archive '" + path + "' is damaged: " + what + "; `kstudy salvage " + path +
                        " --out NEW.h5` copies the finished points it can still read into a new archive (that "
                        "`kstudy run ... --resume --out NEW.h5` completes)");
}

h5_handle open_file_checked(const std::string& path) {
  try {
    return open_file(path, false);
  } catch (const archive_in_use&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw_damaged(path, "HDF5 cannot open it (" + without_prefix(e.what()) + ")");
  }
}

// The files this process verified, as (size, modification time) when it did: every reader calls
// open_archive many times, and the whole-file check is paid once per content.
using file_state = std::tuple<std::string, long long, long long, long long>;
file_state state_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {path, -1, -1, -1};
  return {path, static_cast<long long>(st.st_size), static_cast<long long>(st.st_mtim.tv_sec),
          static_cast<long long>(st.st_mtim.tv_nsec)};
}
std::mutex verified_mutex;
std::set<file_state> verified;
// Set in verify_in_child's child, which is the verification: its reads go straight to the file.
bool in_verifying_child = false;

// HDF5 keeps state across files (its type-conversion cache holds copies of the datatypes read, its free
// lists the blocks freed): what one damaged file leaves there can crash the process later, at another file
// or at exit (the archive fuzzer found such a crash, in H5T_top_term_package at exit, after a run of damaged
// archives without checksums). Every public reader therefore ends by shutting the library down (H5close)
// when no HDF5 object of this process is open any more (a sink writing, a reader further up the stack), so
// that each file is read from a library in its initial state: the state verify_in_child's child reads it in.
// How many identifiers of these types the process holds; -1 when HDF5 cannot say (then nothing is reset).
long long identifiers_of(std::initializer_list<H5I_type_t> types) {
  long long total = 0;
  for (const H5I_type_t type : types) {
    hsize_t count = 0;
    if (H5Inmembers(type, &count) < 0) return -1;
    total += static_cast<long long>(count);
  }
  return total;
}

class library_reset {
 public:
  library_reset() = default;
  library_reset(const library_reset&) = delete;
  library_reset& operator=(const library_reset&) = delete;
  ~library_reset() {
    if (identifiers_of({H5I_FILE, H5I_GROUP, H5I_DATASET, H5I_ATTR, H5I_DATASPACE}) == 0) H5close();
  }
};

void rehearse_every_read(const std::string& path);

void verify_open_file(hid_t file, const std::string& path) {
  std::vector<std::string> damaged;
  try {
    damaged = damaged_objects(file, path);
  } catch (const archive_damaged&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw_damaged(path, "part of it cannot be read (" + without_prefix(e.what()) + ")");
  }
  if (!damaged.empty()) {
    std::string names;
    for (const auto& d : damaged) names += (names.empty() ? "" : ", ") + d;
    throw_damaged(path, "the content of " + names + " no longer matches the checksum stored when it was written");
  }
}

// The whole-file check runs in a child process: HDF5 1.10 itself crashes on some corrupt files (found by
// tests/fuzz/archive_fuzzer.cpp: H5HG_read copies a global-heap object whose length field was damaged past its
// collection, reading out of bounds: a library bug, not a misuse). A crash there becomes this archive's error;
// the parent reads the file only after the child has read all of it the same way.
void verify_in_child(const std::string& path) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    h5_handle file = open_file_checked(path);
    verify_open_file(file.get(), path);
    return;
  }
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    // It dies with its reader: a run killed while verifying must not leave it holding the archive's lock
    // (the parent's deadline, which would end it, died with the parent).
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
    // The child's crash is the finding: the parent's crash handlers (a fuzz driver's, a run's) stay out of it.
    for (const int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, SIG_DFL);
    ::close(pipe_fds[0]);
    std::string message;
    try {
      h5_handle file = open_file_checked(path);
      verify_open_file(file.get(), path);
    } catch (const std::exception& e) {
      message = e.what();
    }
    if (message.empty()) {
      // The parent's own reads, with its memory types and conversions, then the library's teardown: what
      // the parent will do with this file, done here first, where a crash only refuses the file.
      in_verifying_child = true;
      rehearse_every_read(path);
      H5close();
    }
    if (!message.empty()) {
      ssize_t ignored = ::write(pipe_fds[1], message.data(), message.size());
      (void)ignored;
    }
    ::_exit(message.empty() ? 0 : 1);
  }
  ::close(pipe_fds[1]);
  if (child < 0) {
    ::close(pipe_fds[0]);
    h5_handle file = open_file_checked(path);
    verify_open_file(file.get(), path);
    return;
  }
  // HDF5 can also loop for ever on a corrupt file (a B-tree whose node points back at itself): the child gets
  // a deadline far beyond any real archive's read.
  int status = 0;
  const char* limit = std::getenv("KSTUDY_ARCHIVE_READ_SECONDS");  // the archive fuzzer's is short
  const int seconds = limit && std::atoi(limit) > 0 ? std::atoi(limit) : 120;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child || (done < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      ::close(pipe_fds[0]);
      throw_damaged(path, "HDF5 did not finish reading it in " + std::to_string(seconds) +
                              " s (a loop in its damaged structure)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  std::string message;  // the child has exited: its message (well under a pipe's buffer) is all there
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    message.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  if (WIFSIGNALED(status))
    throw_damaged(path, std::string("HDF5 crashed reading it (") + strsignal(WTERMSIG(status)) +
                            ": the HDF5 library fails so on some corrupt files)");
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    if (message.find(" is open in another process") != std::string::npos) throw archive_in_use(without_prefix(message));
    throw archive_damaged(message.empty() ? "kstudy: archive '" + path + "' could not be verified" : message);
  }
}

h5_handle open_archive(const std::string& path) {
  silence_hdf5_errors();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw std::runtime_error("kstudy: no archive at '" + path + "'");
  if (!has_hdf5_signature(path)) throw std::runtime_error("kstudy: '" + path + "' is not an HDF5 file");
  // Verified before this process reads a byte of it: HDF5's crashes on corrupt files happen in the child.
  if (!in_verifying_child) {
    const auto state = state_of(path);
    std::lock_guard<std::mutex> lock(verified_mutex);
    if (!verified.count(state)) {
      // A damaged global heap, or a string's reference into one, is refused from its bytes: HDF5 follows
      // both unchecked, and whether that overruns into a crash depends on the reading process's heap, so the
      // child's verdict cannot stand for this process (the archive fuzzer crashed here after the child had
      // passed the file).
      if (const auto problem = damaged_global_heap(path); !problem.empty()) throw_damaged(path, problem);
      verify_in_child(path);
      verified.insert(state);
    }
  }
  h5_handle file = open_file_checked(path);
  if (!check_tri(H5Aexists(file.get(), "schema_version"), "H5Aexists(schema_version)", path))
    throw std::runtime_error("kstudy: '" + path + "' is an HDF5 file but not a kstudy archive (no schema_version)");
  const std::string version = read_string_attribute(file.get(), "schema_version", path);
  if (!archive_schema_readable(version))
    throw std::runtime_error("kstudy: archive '" + path + "' has schema_version " + version +
                             "; this kstudy reads 1 to " + archive_schema_version);
  return file;
}

h5_handle open_experiment(hid_t file, const std::string& path, const std::string& experiment) {
  check_experiment_name(experiment);
  const bool found = link_exists(file, "experiments", path) &&
                     link_exists(open_group(file, "experiments", path).get(), experiment, path);
  if (!found) throw std::runtime_error("kstudy: archive '" + path + "' has no experiment '" + experiment + "'");
  return open_group(file, "experiments/" + experiment, path);
}

template <class R>
std::vector<R> read_table(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  return read_records<R>(group.get(), path);
}

// A table not every archive has (health before version 3, variants before 4, profile outside kstudy
// profile): no rows where the dataset is absent.
template <class R>
std::vector<R> read_optional_table(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  if (!link_exists(group.get(), record_table<R>::dataset, path)) return {};
  return read_records<R>(group.get(), path);
}

// One uint8 field of every row of a compound dataset (HDF5 converts only the member named).
std::vector<std::uint8_t> read_uint8_field(hid_t group, const char* dataset, const char* field,
                                           const std::string& path) {
  h5_handle type = type_handle(H5Tcreate(H5T_COMPOUND, sizeof(std::uint8_t)), "H5Tcreate(memory compound)", path);
  check(H5Tinsert(type.get(), field, 0, H5T_NATIVE_UINT8), std::string("H5Tinsert(") + field + ")", path);
  std::vector<unsigned char> rows;
  read_row_buffer(group, dataset, type.get(), rows, sizeof(std::uint8_t), path);
  return {rows.begin(), rows.end()};
}

// Versions before 9 have no in-point GPU readings: zeros there would read as measured values.
bool without_in_point_readings(const std::string& version) {
  try {
    return std::stoi(version) < 9;
  } catch (const std::exception&) {
    return false;
  }
}

// The members an older schema did not record read as the record's own "not measured", not as the zero HDF5
// leaves in a member the file lacks.
template <class R, class... T>
void read_as_unmeasured(std::vector<R>& records, T R::*... members) {
  const R unmeasured;
  for (auto& r : records) ((r.*members = unmeasured.*members), ...);
}

}  // namespace

void verify_archive(const std::string& path) {
  const library_reset reset;
  open_archive(path);
}

std::size_t hdf5_identifiers_open() {
  const long long count =
      identifiers_of({H5I_FILE, H5I_GROUP, H5I_DATATYPE, H5I_DATASPACE, H5I_DATASET, H5I_ATTR, H5I_GENPROP_LST});
  return count < 0 ? 0 : static_cast<std::size_t>(count);
}

bool archive_schema_readable(const std::string& version) {
  // Every version from 1 to the one written, as the writer spells them (no sign, no leading zero).
  if (version.empty() || version.size() > 4 || version[0] == '0' ||
      version.find_first_not_of("0123456789") != std::string::npos)
    return false;
  return std::stoi(version) <= std::stoi(archive_schema_version);
}

std::vector<std::string> list_experiments(const std::string& path) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  std::vector<std::string> names;
  if (!link_exists(file.get(), "experiments", path)) return names;
  h5_handle group = open_group(file.get(), "experiments", path);
  hsize_t index = 0;
  check(H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_link_name, &names),
        "H5Literate(experiments)", path);
  return names;
}

run_metadata read_metadata(const std::string& path) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  run_metadata metadata;
  metadata.root = read_string_attributes(file.get(), path);
  if (link_exists(file.get(), "environment", path))
    metadata.environment = read_string_attributes(open_group(file.get(), "environment", path).get(), path);
  metadata.root.erase(digest_attribute);
  metadata.environment.erase(digest_attribute);
  return metadata;
}

experiment_record read_experiment(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  experiment_record record;
  record.name = experiment;
  record.definition_json = read_string_attribute(group.get(), "definition", path);
  record.protocol_json = read_string_attribute(group.get(), "protocol", path);
  record.fingerprint = read_string_attribute(group.get(), "fingerprint", path);
  return record;
}

std::vector<sample_record> read_samples(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  auto samples = read_records<sample_record>(group.get(), path);
  // Versions 1 to 3 stored a bool, gate_passed, with calibration samples as passed: read as passed / failed.
  const auto version = read_string_attribute(file.get(), "schema_version", path);
  if (version == "1" || version == "2" || version == "3") {
    const auto passed = read_uint8_field(group.get(), record_table<sample_record>::dataset, "gate_passed", path);
    for (std::size_t i = 0; i < samples.size(); ++i)
      samples[i].gate = passed[i] ? gate_verdict::passed : gate_verdict::failed;
  }
  if (without_in_point_readings(version))
    read_as_unmeasured(samples, &sample_record::energy_joules, &sample_record::power_watts,
                       &sample_record::min_sm_clock_mhz, &sample_record::throttle_reasons);
  return samples;
}
std::vector<gate_record> read_gates(const std::string& path, const std::string& experiment) {
  return read_table<gate_record>(path, experiment);
}
std::vector<ceiling_record> read_ceilings(const std::string& path, const std::string& experiment) {
  return read_table<ceiling_record>(path, experiment);
}
std::vector<summary_record> read_summaries(const std::string& path, const std::string& experiment) {
  return read_table<summary_record>(path, experiment);
}
std::vector<attribution_record> read_attribution(const std::string& path, const std::string& experiment) {
  return read_table<attribution_record>(path, experiment);
}

std::vector<shard_record> read_shards(const std::string& path) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  std::vector<shard_record> shards;
  if (!link_exists(file.get(), "shards", path)) return shards;
  h5_handle group = open_group(file.get(), "shards", path);
  std::vector<std::string> names;
  hsize_t index = 0;
  check(H5Literate(group.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_link_name, &names), "H5Literate(shards)",
        path);
  for (const auto& name : names) {
    h5_handle g = open_group(group.get(), name, path);
    shard_record shard;
    try {
      shard.index = std::stoll(name);
    } catch (const std::exception&) {
      throw std::runtime_error("kstudy: archive '" + path + "' has a shard group named '" + name + "', not a number");
    }
    shard.metadata.root = read_string_attributes(g.get(), path);
    shard.source = shard.metadata.root["source"];
    shard.metadata.root.erase("source");
    shard.metadata.root.erase(digest_attribute);
    if (link_exists(g.get(), "environment", path))
      shard.metadata.environment = read_string_attributes(open_group(g.get(), "environment", path).get(), path);
    shard.metadata.environment.erase(digest_attribute);
    shard.ceilings = read_records<ceiling_record>(g.get(), path);
    shards.push_back(std::move(shard));
  }
  std::sort(shards.begin(), shards.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  return shards;
}

std::vector<health_record> read_health(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  auto health = read_optional_table<health_record>(path, experiment);
  if (!health.empty() && without_in_point_readings(read_metadata(path).root["schema_version"]))
    read_as_unmeasured(health, &health_record::energy_joules, &health_record::sampled_min_sm_clock_mhz,
                       &health_record::sampled_mean_power_mw, &health_record::sampled_throttle_reasons);
  return health;
}

std::vector<variant_record> read_variants(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  auto variants = read_optional_table<variant_record>(path, experiment);
  // Before version 5 every variant was the scoring operation's, and the table had no axes column.
  for (auto& v : variants)
    if (v.axes.empty()) v.axes = "rows,features";
  return variants;
}

std::vector<profile_record> read_profile(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  const char* dataset = record_table<profile_record>::dataset;
  if (!link_exists(group.get(), dataset, path)) return {};
  // Counters an older schema did not record (schema 11's, say) read as "not reported" (read_records).
  return read_records<profile_record>(group.get(), path);
}

std::map<std::string, std::string> read_profile_attributes(const std::string& path, const std::string& experiment) {
  const library_reset reset;
  h5_handle file = open_archive(path);
  h5_handle group = open_experiment(file.get(), path, experiment);
  const char* name = record_table<profile_record>::dataset;
  if (!link_exists(group.get(), name, path)) return {};
  h5_handle dataset = dataset_handle(H5Dopen2(group.get(), name, H5P_DEFAULT), "H5Dopen2(profile)", path);
  auto attributes = read_string_attributes(dataset.get(), path);
  attributes.erase(digest_attribute);
  return attributes;
}

namespace {

// Every reader, as merge, --resume, salvage's caller and the report's callers use them; an error is the
// reader's own one-line refusal, which the parent will give too: only a crash matters here.
void rehearse_every_read(const std::string& path) {
  const auto quietly = [](auto&& read) {
    try {
      read();
    } catch (const std::exception&) {
    }
  };
  quietly([&] { read_metadata(path); });
  quietly([&] { read_shards(path); });
  std::vector<std::string> experiments;
  quietly([&] { experiments = list_experiments(path); });
  for (const auto& name : experiments) {
    quietly([&] { read_experiment(path, name); });
    quietly([&] { read_samples(path, name); });
    quietly([&] { read_gates(path, name); });
    quietly([&] { read_ceilings(path, name); });
    quietly([&] { read_summaries(path, name); });
    quietly([&] { read_attribution(path, name); });
    quietly([&] { read_health(path, name); });
    quietly([&] { read_variants(path, name); });
    quietly([&] { read_profile(path, name); });
    quietly([&] { read_profile_attributes(path, name); });
  }
}

}  // namespace

}  // namespace kstudy
