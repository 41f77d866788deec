#pragma once
// What a variant's prepare() throws when this machine cannot run it at all, as opposed to a variant that
// fails: code built for one GPU architecture only (sm_90a's wgmma on anything but compute capability 9.0),
// a driver entry point that is missing. The study runner records the variant as skipped at the point
// ("skipped: <why>"), never failed, and the tests skip it with the same words.
#include <stdexcept>

namespace kstudy {

class variant_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kstudy
