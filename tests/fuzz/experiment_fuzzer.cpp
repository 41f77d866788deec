// libFuzzer target for the experiment parser: any byte string must either parse or be refused with an
// experiment_error; never crash, hang, overflow or throw anything else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kstudy/experiment.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto e = kstudy::parse_experiment(text, "fuzz.json");
    // What parses must round-trip through its own normalised definition.
    if (kstudy::parse_experiment(e.definition_json, "again").fingerprint() != e.fingerprint()) std::abort();
  } catch (const kstudy::experiment_error&) {
  }
  return 0;
}
