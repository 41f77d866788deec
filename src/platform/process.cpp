#include "kstudy/platform/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kstudy/platform/stop_signal.hpp"

extern char** environ;

namespace kstudy::platform {
namespace {

// Owns one file descriptor. A failed close is not reported: the parent's copies of the child's output
// descriptors and of the pipes only read or are handed over, the child's copies do the writing.
class fd_guard {
 public:
  fd_guard() = default;
  explicit fd_guard(int fd) : m_fd(fd) {}
  fd_guard(fd_guard&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
  fd_guard& operator=(fd_guard&& other) noexcept {
    if (this != &other) {
      reset();
      m_fd = std::exchange(other.m_fd, -1);
    }
    return *this;
  }
  ~fd_guard() { reset(); }
  int get() const { return m_fd; }
  int release() { return std::exchange(m_fd, -1); }  // the caller owns it now
  void reset() {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
  }

 private:
  int m_fd = -1;
};

struct pipe_pair {
  fd_guard read, write;
};

void open_pipe(pipe_pair& p, const std::string& program) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error("cannot start " + program + ": pipe2 failed: " + std::strerror(errno));
  p.read = fd_guard(fds[0]);
  p.write = fd_guard(fds[1]);
}

// What the child could not do before exec, sent back through a close-on-exec pipe: end of file on it
// means the exec succeeded.
enum class child_step : int { pdeathsig, affinity, redirect_stdin, redirect_stdout, redirect_stderr, exec };

const char* describe(child_step step) {
  switch (step) {
    case child_step::pdeathsig:
      return "prctl(PR_SET_PDEATHSIG)";
    case child_step::affinity:
      return "sched_setaffinity (resetting the CPU affinity)";
    case child_step::redirect_stdin:
      return "dup2 of stdin";
    case child_step::redirect_stdout:
      return "dup2 of stdout";
    case child_step::redirect_stderr:
      return "dup2 of stderr";
    case child_step::exec:
      return "execve";
  }
  return "an unknown step";
}

struct child_failure {
  child_step step;
  int error;
};

// In the forked child only async-signal-safe calls: the parent has other threads (OpenMP's, Kokkos')
// whose locks the child inherits held.
[[noreturn]] void child_fail(int report_fd, child_step step) {
  const child_failure failure{step, errno};
  // Nothing to do if the report cannot be written: the parent then sees exit status 127.
  [[maybe_unused]] const ssize_t written = ::write(report_fd, &failure, sizeof failure);
  ::_exit(127);
}

// dup2 onto an equal descriptor keeps its close-on-exec flag; clear it instead.
bool redirect(int from, int to) {
  if (from != to) return ::dup2(from, to) == to;
  const int flags = ::fcntl(to, F_GETFD);
  return flags >= 0 && ::fcntl(to, F_SETFD, flags & ~FD_CLOEXEC) == 0;
}

std::vector<std::string> child_environment(const spawn_options& options) {
  for (const auto& [name, value] : options.env)
    if (name.empty() || name.find('=') != std::string::npos)
      throw std::invalid_argument("run_process: environment variable name '" + name + "' is empty or contains '='");
  std::vector<std::string> entries;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& override_entry : options.env) overridden = overridden || override_entry.first == name;
    if (!overridden) entries.emplace_back(entry);
  }
  for (const auto& [name, value] : options.env) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Passes a stop request on to the child (called when a wait was interrupted by a signal).
void pass_on_stop(pid_t pid, const std::string& program) {
  const int sig = stop_requested();
  if (sig != 0 && ::kill(pid, sig) != 0 && errno != ESRCH)
    throw std::runtime_error("cannot pass signal " + std::to_string(sig) + " on to " + program + ": " +
                             std::strerror(errno));
}

// Every CPU of the machine, for a child that must not inherit the caller's pinning.
cpu_set_t every_cpu(const std::string& program) {
  cpu_set_t all_cpus;
  CPU_ZERO(&all_cpus);
  const long cpus = ::sysconf(_SC_NPROCESSORS_CONF);
  if (cpus < 1)
    throw std::runtime_error("cannot start " + program +
                             ": sysconf(_SC_NPROCESSORS_CONF) failed: " + std::strerror(errno));
  for (long i = 0; i < cpus && i < CPU_SETSIZE; ++i) CPU_SET(static_cast<int>(i), &all_cpus);
  return all_cpus;
}

// Where the child's stdout and stderr go: files opened here, a pipe when the parent captures, or inherited.
struct child_streams {
  fd_guard stdout_file, stderr_file;
  pipe_pair output;
  bool capturing = false;
  int child_stdin = -1, child_stdout = -1, child_stderr = -1;  // -1: inherited
};

void open_streams(const spawn_options& options, const std::string& program, child_streams& streams) {
  const auto check_target = [&](stream_target target, const std::string& path, const char* stream) {
    if (target == stream_target::file && path.empty())
      throw std::invalid_argument(std::string("run_process: ") + stream + " of " + program +
                                  " goes to a file without a path");
  };
  check_target(options.stdout_target, options.stdout_path, "stdout");
  check_target(options.stderr_target, options.stderr_path, "stderr");
  const auto open_output = [&](const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      throw std::runtime_error("cannot open " + path + " for the output of " + program + ": " + std::strerror(errno));
    return fd;
  };
  if (options.stdout_target == stream_target::file) streams.stdout_file = fd_guard(open_output(options.stdout_path));
  if (options.stderr_target == stream_target::file &&
      !(options.stdout_target == stream_target::file && options.stderr_path == options.stdout_path))
    streams.stderr_file = fd_guard(open_output(options.stderr_path));
  streams.capturing =
      options.stdout_target == stream_target::capture || options.stderr_target == stream_target::capture;
  if (streams.capturing) open_pipe(streams.output, program);
  const auto target_fd = [&](stream_target target, const fd_guard& file) {
    if (target == stream_target::capture) return streams.output.write.get();
    if (target == stream_target::file) return file.get() >= 0 ? file.get() : streams.stdout_file.get();
    return -1;
  };
  streams.child_stdout = target_fd(options.stdout_target, streams.stdout_file);
  streams.child_stderr = target_fd(options.stderr_target, streams.stderr_file);
}

// The forked child: die with the parent, reset the affinity, redirect, exec; a failed step is reported
// through report_fd. Only async-signal-safe calls (see child_fail).
[[noreturn]] void exec_child(const spawn_options& options, pid_t parent, const cpu_set_t& all_cpus,
                             const child_streams& streams, int report_fd, const std::vector<char*>& argv,
                             const std::vector<char*>& envp) {
  if (options.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(report_fd, child_step::pdeathsig);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl: nobody is left to run for
  }
  if (options.reset_affinity && ::sched_setaffinity(0, sizeof all_cpus, &all_cpus) != 0)
    child_fail(report_fd, child_step::affinity);
  if (streams.child_stdin >= 0 && !redirect(streams.child_stdin, STDIN_FILENO))
    child_fail(report_fd, child_step::redirect_stdin);
  if (streams.child_stdout >= 0 && !redirect(streams.child_stdout, STDOUT_FILENO))
    child_fail(report_fd, child_step::redirect_stdout);
  if (streams.child_stderr >= 0 && !redirect(streams.child_stderr, STDERR_FILENO))
    child_fail(report_fd, child_step::redirect_stderr);
  ::execve(argv.front(), argv.data(), envp.data());
  child_fail(report_fd, child_step::exec);
}

// Waits for the child, passing a stop request on while waiting; returns its wait status.
int reap(pid_t pid, const std::string& program) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid for " + program + " failed: " + std::strerror(errno));
    pass_on_stop(pid, program);
  }
  return status;
}

// What the child reported before exec, if anything (end of file: the exec succeeded).
bool read_child_failure(int report_fd, child_failure& failure) {
  std::size_t got = 0;
  while (got < sizeof failure) {
    const ssize_t n = ::read(report_fd, reinterpret_cast<char*>(&failure) + got, sizeof failure - got);
    if (n > 0)
      got += static_cast<std::size_t>(n);
    else if (n == 0 || errno != EINTR)
      break;
  }
  return got == sizeof failure;
}

// Reads the captured output to its end; returns errno of a failed read, or 0.
int capture_output(int fd, pid_t pid, const std::string& program, std::string& output) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0)
      output.append(buffer, static_cast<std::size_t>(n));
    else if (n == 0)
      return 0;
    else if (errno == EINTR)
      pass_on_stop(pid, program);
    else
      return errno;
  }
}

// The numeric entries of a /proc directory (processes, or descriptors); empty when it cannot be read
// (another user's process, or one that just ended).
std::vector<int> numeric_entries(const std::string& dir) {
  std::vector<int> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char* end = nullptr;
    const long n = std::strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && n >= 0) out.push_back(static_cast<int>(n));
  }
  ::closedir(d);
  return out;
}

std::string read_link(const std::string& path) {
  char buffer[4096];
  const ssize_t n = ::readlink(path.c_str(), buffer, sizeof buffer);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
}

std::string read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool holds(int pid, dev_t device, ino_t inode) {
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const int fd : numeric_entries(fd_dir)) {
    struct stat st {};
    if (::stat((fd_dir + "/" + std::to_string(fd)).c_str(), &st) == 0 && st.st_dev == device && st.st_ino == inode)
      return true;
  }
  return false;
}

// /proc/PID/stat's flags (include/linux/sched.h): PF_EXITING, do_exit has begun; PF_FORKNOEXEC, forked but
// not yet exec'd.
constexpr unsigned long pf_exiting = 0x4;
constexpr unsigned long pf_forknoexec = 0x40;

file_holder describe_holder(int pid) {
  file_holder h;
  h.pid = pid;
  const std::string dir = "/proc/" + std::to_string(pid);
  h.exe = read_link(dir + "/exe");
  const std::string cmdline = read_whole(dir + "/cmdline");
  for (std::size_t at = 0; at < cmdline.size();) {
    const auto end = cmdline.find('\0', at);
    h.argv.push_back(cmdline.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? cmdline.size() : end + 1;
  }
  // "pid (comm) state ppid pgrp session tty_nr tpgid flags ...": comm may hold spaces and parentheses.
  const std::string stat = read_whole(dir + "/stat");
  const auto close = stat.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(stat.substr(close + 1));
    char state = '?';
    long skip = 0;
    unsigned long flags = 0;
    fields >> state >> h.parent_pid >> skip >> skip >> skip >> skip >> flags;
    h.exiting = (fields && (flags & pf_exiting) != 0) || state == 'Z' || state == 'X';
    h.between_fork_and_exec = fields && (flags & pf_forknoexec) != 0;
  }
  // A SIGKILL not yet delivered (SigPnd: this thread's, ShdPnd: the process'): bit 9 - 1 of the masks.
  std::istringstream status(read_whole(dir + "/status"));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
      h.exiting = h.exiting || (std::strtoull(line.c_str() + 7, nullptr, 16) & (1ull << (SIGKILL - 1))) != 0;
  if (h.parent_pid > 0) h.parent_exe = read_link("/proc/" + std::to_string(h.parent_pid) + "/exe");
  return h;
}

}  // namespace

std::vector<file_holder> processes_holding(const std::string& path) {
  struct stat target {};
  if (::stat(path.c_str(), &target) != 0) return {};
  std::vector<file_holder> out;
  const int self = static_cast<int>(::getpid());
  for (const int pid : numeric_entries("/proc"))
    if (pid != self && holds(pid, target.st_dev, target.st_ino)) out.push_back(describe_holder(pid));
  return out;
}

held_open::held_open(const std::string& path) : m_path(path), m_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}

bool held_open::still_at_path() const {
  struct stat opened {
  }, named{};
  if (m_fd < 0 || ::fstat(m_fd, &opened) != 0) return true;  // nothing held: nothing to tell
  return ::stat(m_path.c_str(), &named) == 0 && named.st_dev == opened.st_dev && named.st_ino == opened.st_ino;
}

bool held_open::copy_to(const std::string& destination) const {
  if (m_fd < 0) return false;
  const int out = ::open(destination.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) return false;
  char buffer[1 << 16];
  off_t at = 0;
  bool ok = true;
  for (;;) {
    const ssize_t n = ::pread(m_fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out, buffer + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok = false;
        break;
      }
      done += w;
    }
    if (!ok) break;
    at += n;
  }
  const int saved = errno;
  if (::fsync(out) != 0) ok = false;
  ::close(out);
  if (!ok) {
    ::unlink(destination.c_str());
    errno = saved;
  }
  return ok;
}

held_open::~held_open() {
  if (m_fd >= 0) ::close(m_fd);
}

bool flock_held_elsewhere(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool held = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // releases the probe's lock if it took one
  return held;
}

namespace {

// prepare (arguments, environment, affinity: nothing is allocated after fork) -> fork -> the child redirects its
// streams and execs -> the parent learns whether the exec happened: a failure is thrown, naming the step, once the
// child is reaped; otherwise on_start is called with the running child's pid. The parent still holds its copies of
// the child's stream ends (the caller closes them).
pid_t start_child(const spawn_options& options, const child_streams& streams) {
  const std::string& program = options.argv.front();
  std::vector<std::string> argv_strings = options.argv;
  std::vector<std::string> env_strings = child_environment(options);
  const auto argv = pointers(argv_strings);
  const auto envp = pointers(env_strings);
  cpu_set_t all_cpus;
  CPU_ZERO(&all_cpus);
  if (options.reset_affinity) all_cpus = every_cpu(program);
  pipe_pair report;
  open_pipe(report, program);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("cannot start " + program + ": fork failed: " + std::strerror(errno));
  if (pid == 0) exec_child(options, parent, all_cpus, streams, report.write.get(), argv, envp);

  report.write.reset();  // end of file on the report then comes with the child's exec
  child_failure failure{};
  if (read_child_failure(report.read.get(), failure)) {
    reap(pid, program);
    throw std::runtime_error("cannot start " + program + ": " + describe(failure.step) +
                             " failed: " + std::strerror(failure.error));
  }
  if (options.on_start) options.on_start(static_cast<int>(pid));
  return pid;
}

}  // namespace

process_result run_process(const spawn_options& options) {
  if (options.argv.empty()) throw std::invalid_argument("run_process: empty argv");
  const std::string& program = options.argv.front();
  child_streams streams;
  open_streams(options, program, streams);
  const pid_t pid = start_child(options, streams);
  // The parent keeps only the read end: end of file then comes when the child is done with its output.
  streams.output.write.reset();
  streams.stdout_file.reset();
  streams.stderr_file.reset();
  process_result result;
  int read_error = 0;
  if (streams.capturing) {
    read_error = capture_output(streams.output.read.get(), pid, program, result.output);
    streams.output.read.reset();  // a child still writing gets EPIPE instead of blocking forever
  }
  const int status = reap(pid, program);
  if (read_error != 0)
    throw std::runtime_error("reading the output of " + program + " failed: " + std::strerror(read_error));
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

line_child::line_child(const spawn_options& options) {
  if (options.argv.empty()) throw std::invalid_argument("line_child: empty argv");
  m_program = options.argv.front();
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0)
    throw std::runtime_error("cannot start " + m_program + ": socketpair failed: " + std::strerror(errno));
  fd_guard ours(ends[0]), theirs(ends[1]);
  child_streams streams;
  streams.child_stdin = theirs.get();
  streams.child_stdout = theirs.get();
  m_pid = static_cast<int>(start_child(options, streams));
  m_fd = ours.release();
  // theirs closes here: end of file comes to us when the child is done with its end.
}

line_child::~line_child() {
  try {
    end(false);
  } catch (...) {  // nothing to be done about a failed reap in a destructor
  }
}

void line_child::end(bool kill_first) {
  if (m_fd >= 0) ::close(m_fd);  // the child reads end of file: a worker's cue to exit
  m_fd = -1;
  if (m_pid <= 0) return;
  const pid_t pid = static_cast<pid_t>(m_pid);
  m_pid = -1;
  int status = 0;
  bool reaped = false;
  if (!kill_first) {  // a moment to exit on its own
    for (int i = 0; i < 50 && !reaped; ++i) {
      reaped = ::waitpid(pid, &status, WNOHANG) == pid;
      if (!reaped) ::usleep(10000);
    }
  }
  if (!reaped) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (WIFEXITED(status))
    m_ended = "exited with status " + std::to_string(WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    m_ended = "was killed by signal " + std::to_string(WTERMSIG(status));
}

void line_child::send(const std::string& line) {
  if (m_fd < 0) throw std::runtime_error(m_program + " is not running (it " + m_ended + ")");
  const std::string text = line + "\n";
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(m_fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      end(false);
      throw std::runtime_error("cannot write to " + m_program + ": " + std::strerror(error) + " (it " + m_ended + ")");
    }
    done += static_cast<std::size_t>(n);
  }
}

std::string line_child::receive(double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const auto newline = m_buffer.find('\n');
    if (newline != std::string::npos) {
      std::string line = m_buffer.substr(0, newline);
      m_buffer.erase(0, newline + 1);
      return line;
    }
    if (m_fd < 0) throw std::runtime_error(m_program + " is not running (it " + m_ended + ")");
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      end(true);
      std::ostringstream text;
      text << m_program << " gave no answer within " << seconds << " s and was killed";
      throw std::runtime_error(text.str());
    }
    pollfd p{m_fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 1000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll failed: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(m_fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      m_buffer.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      end(false);
      throw std::runtime_error(m_program + " ended before answering (it " + m_ended + ")");
    }
  }
}

}  // namespace kstudy::platform
