// The process helper (kstudy/platform/process.hpp): exit codes and signals as the shell reports them,
// captured and redirected output, environment overrides, the affinity reset, failures to start that name
// the program, and children that die with their parent. None of this needs Kokkos.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "kstudy/platform/process.hpp"
#include "scratch_dir.hpp"
#include "kstudy_test_paths.hpp"  // KSTUDY_SOURCE_DIR and the build's executables (tests/CMakeLists.txt)

namespace {

using namespace kstudy::platform;

spawn_options shell(const std::string& script) {
  spawn_options options;
  options.argv = {"/bin/sh", "-c", script};
  return options;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A pid written as one line by another process; 0 until the whole line is there.
pid_t read_pid(const std::string& path) {
  const auto text = read_file(path);
  if (text.empty() || text.back() != '\n') return 0;
  return static_cast<pid_t>(std::atol(text.c_str()));
}

pid_t wait_for_pid(const std::string& path) {
  for (int i = 0; i < 200; ++i) {
    if (const pid_t pid = read_pid(path)) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return 0;
}

// Running or stopped, not gone and not a zombie (an orphan's zombie may wait for a reaper that never
// comes in a container whose pid 1 does not reap).
bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (alive(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(Process, ReportsExitCodes) {
  for (const int code : {0, 1, 3, 75, 127}) {
    const auto r = run_process(shell("exit " + std::to_string(code)));
    EXPECT_EQ(r.exit_code, code);
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.status(), code);
  }
}

TEST(Process, ReportsTheSignalThatEndedTheChild) {
  for (const int sig : {SIGTERM, SIGKILL, SIGUSR1}) {
    const auto r = run_process(shell("kill -" + std::to_string(sig) + " $$"));
    EXPECT_EQ(r.signal, sig);
    EXPECT_EQ(r.status(), 128 + sig);
  }
}

TEST(Process, CapturesStdoutAloneOrWithStderr) {
  auto options = shell("echo out; echo err >&2; echo more");
  options.stdout_target = stream_target::capture;
  EXPECT_EQ(run_process(options).output, "out\nmore\n");  // stderr went to ours
  options.stderr_target = stream_target::capture;
  EXPECT_EQ(run_process(options).output, "out\nerr\nmore\n");
  options = shell("printf x");  // nothing captured unless asked
  EXPECT_EQ(run_process(options).output, "");
}

TEST(Process, CapturesMoreThanAPipeHolds) {
  auto options = shell("head -c 1000000 /dev/zero");
  options.stdout_target = stream_target::capture;
  const auto r = run_process(options);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output.size(), 1000000u);
}

TEST(Process, WritesOutputToFiles) {
  kstudy::test::scratch_dir dir("process");
  const auto log = dir.file("both.log"), out = dir.file("out.log"), err = dir.file("err.log");
  { std::ofstream(log) << "stale contents that must go\n"; }
  auto options = shell("echo one; echo two >&2; echo three");
  options.stdout_target = options.stderr_target = stream_target::file;
  options.stdout_path = options.stderr_path = log;
  EXPECT_EQ(run_process(options).exit_code, 0);
  EXPECT_EQ(read_file(log), "one\ntwo\nthree\n");  // one file, in order, truncated first
  options.stdout_path = out;
  options.stderr_path = err;
  EXPECT_EQ(run_process(options).exit_code, 0);
  EXPECT_EQ(read_file(out), "one\nthree\n");
  EXPECT_EQ(read_file(err), "two\n");
}

TEST(Process, OverridesTheEnvironmentAndInheritsTheRest) {
  ASSERT_EQ(::setenv("KSTUDY_PROCESS_TEST_INHERITED", "kept", 1), 0);
  ASSERT_EQ(::setenv("KSTUDY_PROCESS_TEST_REPLACED", "ours", 1), 0);
  auto options =
      shell("echo \"$KSTUDY_PROCESS_TEST_REPLACED $KSTUDY_PROCESS_TEST_INHERITED $KSTUDY_PROCESS_TEST_NEW\"");
  options.env = {{"KSTUDY_PROCESS_TEST_REPLACED", "C"}, {"KSTUDY_PROCESS_TEST_NEW", "new"}};
  options.stdout_target = stream_target::capture;
  EXPECT_EQ(run_process(options).output, "C kept new\n");
  ::unsetenv("KSTUDY_PROCESS_TEST_INHERITED");
  ::unsetenv("KSTUDY_PROCESS_TEST_REPLACED");
  options.env = {{"A=B", "x"}};
  EXPECT_THROW(run_process(options), std::invalid_argument);
}

TEST(Process, FailuresToStartNameTheProgramAndTheCause) {
  spawn_options missing;
  missing.argv = {"/nonexistent/kstudy-no-such-program"};
  try {
    run_process(missing);
    FAIL() << "a missing program started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kstudy-no-such-program"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  auto unwritable = shell("true");
  unwritable.stdout_target = stream_target::file;
  unwritable.stdout_path = "/nonexistent/dir/out.log";
  try {
    run_process(unwritable);
    FAIL() << "an unopenable output file was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/out.log"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_process(spawn_options{}), std::invalid_argument);
  auto no_path = shell("true");
  no_path.stderr_target = stream_target::file;
  EXPECT_THROW(run_process(no_path), std::invalid_argument);
}

// A thread pinned to one CPU (as OpenMP's binding pins the main thread) starts a child from every CPU
// only when asked to.
TEST(Process, ResetsTheAffinityWhenAsked) {
  cpu_set_t allowed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  if (CPU_COUNT(&allowed) < 2) GTEST_SKIP() << "one CPU: nothing to reset";
  std::string pinned_child, reset_child;
  std::thread pinned([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &allowed)) {
        CPU_SET(cpu, &one);
        break;
      }
    if (::sched_setaffinity(0, sizeof one, &one) != 0) return;
    auto options = shell("grep Cpus_allowed_list /proc/self/status");
    options.stdout_target = stream_target::capture;
    pinned_child = run_process(options).output;
    options.reset_affinity = true;
    reset_child = run_process(options).output;
  });
  pinned.join();
  ASSERT_FALSE(pinned_child.empty()) << "could not pin the test thread";
  const auto cpus = [](const std::string& line) { return line.substr(line.find(':') + 1); };
  EXPECT_EQ(cpus(pinned_child).find_first_of(",-"), std::string::npos) << pinned_child;  // one CPU
  EXPECT_NE(cpus(reset_child).find_first_of(",-"), std::string::npos) << reset_child;    // several
}

// kill -9 of a process that started a child with die_with_parent takes the child with it; without it,
// the child lives on (the control: the check can fail).
struct orphan_outcome {
  bool grandchild_gone = false;
  int middle_signal = 0;
};

// The helper program beside this test binary (a GPU bundle carries it there), else where the build put it.
std::string process_helper() {
  std::error_code ec;
  const auto beside = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "kstudy_process_helper";
  return !ec && std::filesystem::exists(beside, ec) ? beside.string() : std::string(KSTUDY_PROCESS_HELPER);
}

orphan_outcome kill_middle_process(const std::string& mode, const kstudy::test::scratch_dir& dir) {
  const auto middle_pid_file = dir.file(mode + ".pid"), grandchild_pid_file = dir.file(mode + ".grandchild.pid");
  spawn_options options;
  options.argv = {process_helper(), mode, middle_pid_file, grandchild_pid_file};
  process_result middle;
  std::string start_error;
  // An exception escaping a thread terminates the whole suite: a helper that cannot start is a failure.
  std::thread waiter([&] {
    try {
      middle = run_process(options);
    } catch (const std::exception& error) {
      start_error = error.what();
    }
  });
  const pid_t middle_pid = wait_for_pid(middle_pid_file), grandchild = wait_for_pid(grandchild_pid_file);
  orphan_outcome outcome;
  if (middle_pid > 0 && grandchild > 0) {
    EXPECT_TRUE(alive(grandchild));
    EXPECT_EQ(::kill(middle_pid, SIGKILL), 0);
  } else {
    ADD_FAILURE() << "the helper did not start its grandchild";
    if (middle_pid > 0) ::kill(middle_pid, SIGKILL);
  }
  waiter.join();
  EXPECT_EQ(start_error, "");
  outcome.middle_signal = middle.signal;
  if (grandchild > 0) {
    outcome.grandchild_gone = gone_within(grandchild, std::chrono::milliseconds(2000));
    if (!outcome.grandchild_gone) ::kill(grandchild, SIGKILL);
  }
  return outcome;
}

TEST(Process, ChildDiesWithItsParent) {
  kstudy::test::scratch_dir dir("process");
  const auto dies = kill_middle_process("die", dir);
  EXPECT_EQ(dies.middle_signal, SIGKILL);
  EXPECT_TRUE(dies.grandchild_gone) << "the grandchild outlived its parent despite die_with_parent";
  const auto kept = kill_middle_process("keep", dir);
  EXPECT_EQ(kept.middle_signal, SIGKILL);
  EXPECT_FALSE(kept.grandchild_gone) << "without die_with_parent the grandchild died too: the test proves nothing";
}

// line_child: the pipe a Python rung's worker talks through.

TEST(LineChild, AnswersLineByLine) {
  spawn_options options;
  options.argv = {"/bin/sh", "-c", "while read -r line; do echo \"got $line\"; done"};
  line_child child(options);
  child.send("one");
  child.send("two");
  EXPECT_EQ(child.receive(5), "got one");
  EXPECT_EQ(child.receive(5), "got two");
}

TEST(LineChild, ATimeoutKillsTheChildAndSaysHowLong) {
  spawn_options options;
  options.argv = {"/bin/sh", "-c", "read -r line; exec sleep 60"};
  line_child child(options);
  child.send("go");
  const auto start = std::chrono::steady_clock::now();
  try {
    child.receive(0.3);
    FAIL() << "no timeout";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("gave no answer within 0.3 s and was killed"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(child.running());
  EXPECT_THROW(child.send("again"), std::runtime_error);
}

TEST(LineChild, AChildThatEndsBeforeAnsweringIsReportedWithItsStatus) {
  spawn_options options;
  options.argv = {"/bin/sh", "-c", "read -r line; exit 3"};
  line_child child(options);
  child.send("go");
  try {
    child.receive(5);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ended before answering (it exited with status 3)"), std::string::npos)
        << e.what();
  }
  // Writing to it afterwards is an error, not a SIGPIPE that ends this process.
  EXPECT_THROW(child.send("more"), std::runtime_error);
}

TEST(LineChild, AProgramThatCannotStartIsNamed) {
  spawn_options options;
  options.argv = {"/nonexistent/kstudy-python"};
  try {
    line_child child(options);
    FAIL() << "started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kstudy-python"), std::string::npos) << e.what();
  }
}

}  // namespace
