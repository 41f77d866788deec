#include "kstudy/platform/stop_signal.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

namespace kstudy::platform {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (const int sig : {SIGINT, SIGTERM})
    if (sigaction(sig, &sa, nullptr) != 0)
      throw std::runtime_error(std::string("cannot install the handler for ") + strsignal(sig) + ": " +
                               std::strerror(errno));
}

int stop_requested() { return g_stop_signal; }

}  // namespace kstudy::platform
