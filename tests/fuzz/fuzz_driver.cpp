// A plain stand-in for libFuzzer where there is none (GCC): the same LLVMFuzzerTestOneInput, fed every corpus
// file, then random mutations of them (byte flips, insertions, deletions, splices of two entries) for a bounded
// time. A failing input aborts or crashes the process, as under libFuzzer, and is written to ./crash-input first.
//   FUZZER [-max_total_time=SECONDS] [-seed=N] CORPUS_DIR_OR_FILE...   (no -seed: a random one, printed first)
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

// The input under test, for the crash handler (which may only make async-signal-safe calls).
const std::uint8_t* g_data = nullptr;
std::size_t g_size = 0;

void save_and_die(int sig) {
  const int fd = ::open("crash-input", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ssize_t ignored = ::write(fd, g_data, g_size);
    (void)ignored;
    ::close(fd);
  }
  const char note[] = "fuzz driver: the input that failed is in ./crash-input\n";
  ssize_t ignored = ::write(2, note, sizeof note - 1);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void run_one(const std::vector<std::uint8_t>& input) {
  g_data = input.data();
  g_size = input.size();
  LLVMFuzzerTestOneInput(input.data(), input.size());
}

std::vector<std::uint8_t> mutate(const std::vector<std::vector<std::uint8_t>>& corpus, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % (n ? n : 1)); };
  std::vector<std::uint8_t> out = corpus[pick(corpus.size())];
  const int edits = 1 + static_cast<int>(pick(8));
  for (int e = 0; e < edits; ++e) {
    switch (pick(5)) {
      case 0:  // flip bits of one byte
        if (!out.empty()) out[pick(out.size())] ^= static_cast<std::uint8_t>(1u << pick(8));
        break;
      case 1:  // replace a byte with a random one
        if (!out.empty()) out[pick(out.size())] = static_cast<std::uint8_t>(rng());
        break;
      case 2: {  // insert a few random bytes
        const std::size_t at = pick(out.size() + 1), n = 1 + pick(8);
        std::vector<std::uint8_t> bytes(n);
        for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), bytes.begin(), bytes.end());
        break;
      }
      case 3:  // delete a range (a cut-short copy when it reaches the end)
        if (!out.empty()) {
          const std::size_t at = pick(out.size()), n = 1 + pick(std::min<std::size_t>(out.size() - at, 64));
          out.erase(out.begin() + static_cast<std::ptrdiff_t>(at), out.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      default: {  // splice: this entry's head, another's tail
        const auto& other = corpus[pick(corpus.size())];
        const std::size_t cut = pick(out.size() + 1), from = pick(other.size() + 1);
        out.resize(cut);
        out.insert(out.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  std::uint64_t seed = std::random_device{}();
  std::vector<std::vector<std::uint8_t>> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("-max_total_time=", 0) == 0) {
      seconds = std::atof(arg.c_str() + 16);
    } else if (arg.rfind("-seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 6, nullptr, 10);
    } else if (arg[0] == '-') {
      // libFuzzer's other flags (-max_len, -timeout, ...) are accepted and ignored
    } else {
      std::vector<std::filesystem::path> files;
      if (std::filesystem::is_directory(arg)) {
        for (const auto& entry : std::filesystem::directory_iterator(arg))
          if (entry.is_regular_file()) files.push_back(entry.path());
      } else {
        files.emplace_back(arg);
      }
      for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  // Said first: a crash ends the process before the summary line, and the seed replays its mutations.
  std::fprintf(stderr, "fuzz driver: seed %llu\n", static_cast<unsigned long long>(seed));
  for (const int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, save_and_die);
  for (const auto& input : corpus) run_one(input);
  std::mt19937_64 rng(seed);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::uint64_t runs = corpus.size();
  while (std::chrono::steady_clock::now() < end) {
    run_one(mutate(corpus, rng));
    ++runs;
  }
  std::printf("fuzz driver: %zu corpus inputs, %llu runs in %.0f s (seed %llu), no failure\n", corpus.size(),
              static_cast<unsigned long long>(runs), seconds, static_cast<unsigned long long>(seed));
  return 0;
}
