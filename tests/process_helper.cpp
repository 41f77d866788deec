// The middle process of the die-with-parent test (tests/test_process.cpp): records its pid, then runs
// `sh -c 'echo $$ > GRANDCHILD_PIDFILE; exec sleep 60'` through platform::run_process, with
// die_with_parent ("die") or without ("keep", the control), and waits for it. The test kills this
// process and looks whether the grandchild went with it.
// Usage: kstudy_process_helper die|keep PIDFILE GRANDCHILD_PIDFILE
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "kstudy/platform/process.hpp"

int main(int argc, char** argv) {
  if (argc != 4 || (std::string(argv[1]) != "die" && std::string(argv[1]) != "keep")) {
    std::fprintf(stderr, "usage: %s die|keep PIDFILE GRANDCHILD_PIDFILE\n", argv[0]);
    return 2;
  }
  {
    std::ofstream pid_file(argv[2]);
    pid_file << ::getpid() << "\n";
    if (!pid_file.flush()) {
      std::fprintf(stderr, "cannot write %s\n", argv[2]);
      return 1;
    }
  }
  kstudy::platform::spawn_options options;
  options.argv = {"/bin/sh", "-c", "echo $$ > \"$0\"; exec sleep 60", argv[3]};
  options.die_with_parent = std::string(argv[1]) == "die";
  try {
    return kstudy::platform::run_process(options).status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kstudy_process_helper: %s\n", e.what());
    return 1;
  }
}
