#pragma once
// Starting a child process and waiting for it: the one fork/exec/waitpid of kstudy (the replication
// children of `kstudy run`, the ncu child of `kstudy profile`, sbatch and squeue of `kstudy submit`).
// Linux: CPU affinity and the parent-death signal are Linux interfaces.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kstudy::platform {

// Where one of the child's output streams goes.
enum class stream_target {
  inherit,  // ours
  capture,  // into process_result::output (stdout and stderr both captured: interleaved as written)
  file,     // the file at the options' path, created or truncated
};

struct spawn_options {
  std::vector<std::string> argv;  // argv[0] is the program's path: executed as given, no PATH search
  std::vector<std::pair<std::string, std::string>> env;  // set in the child's environment (others inherited)
  stream_target stdout_target = stream_target::inherit;
  std::string stdout_path;  // for stream_target::file
  stream_target stderr_target = stream_target::inherit;
  std::string stderr_path;  // for stream_target::file; the same path as stdout_path shares one file
  // The child starts from every CPU instead of the calling thread's affinity: a forked process inherits
  // the mask of the thread that forked, which OpenMP's binding pinned to one core, and OpenMP sizes its
  // places from that mask when the new image loads (seen on the H200 machine: a 16-thread CPU baseline
  // confined to one core ran 10x slow).
  bool reset_affinity = false;
  // The child is sent SIGKILL when this process dies (PR_SET_PDEATHSIG), so a kill -9 of kstudy does
  // not leave a child computing and holding the archive open. The kernel sends it when the thread that
  // forked exits; run_process waits in that thread, so that is when this process ends.
  bool die_with_parent = false;
  // Called with the child's pid once it runs (its exec succeeded), in the calling thread: for a caller that
  // waits for several children in threads of its own and passes a stop request on to all of them.
  std::function<void(int pid)> on_start;
};

struct process_result {
  int exit_code = 0;   // when the child exited
  int signal = 0;      // the signal that ended it, else 0
  std::string output;  // the captured stream(s)
  // The shell's convention: the exit code, or 128 + the signal.
  int status() const { return signal != 0 ? 128 + signal : exit_code; }
};

// Runs the child to its end. While waiting, a stop request (stop_signal.hpp) is passed on to the child,
// which finishes its unit of work and exits. Throws std::runtime_error naming the program and the cause
// when the child cannot be started (an output file that cannot be opened, a failed exec, ...), and
// std::invalid_argument for an empty argv or a file target without a path.
process_result run_process(const spawn_options& options);

// A child to talk to in lines (a Python rung's worker): its stdin and stdout are one end of a socket pair whose
// other end is ours; its stderr is ours. The options' argv, env, die_with_parent and reset_affinity are honoured;
// their stream targets are not (stdout is the socket). Writing to a child that has gone raises no SIGPIPE.
// Destroying it closes our end and kills the child (SIGKILL) if it has not exited within a moment; the child is
// always reaped.
class line_child {
 public:
  // Throws std::runtime_error naming the program when it cannot be started (a failed exec included).
  explicit line_child(const spawn_options& options);
  ~line_child();
  line_child(const line_child&) = delete;
  line_child& operator=(const line_child&) = delete;

  // Sends one line (a newline is appended). Throws std::runtime_error when the child has gone.
  void send(const std::string& line);
  // The child's next line, without its newline, waiting at most `seconds`. Throws std::runtime_error when it
  // does not come in time (the child is then killed: what it was doing is lost), or the child ended first
  // (with its exit status).
  std::string receive(double seconds);
  bool running() const { return m_pid > 0; }

 private:
  void end(bool kill_first);  // kills (if asked) and reaps; returns the exit status text in m_ended
  std::string m_program;
  int m_fd = -1;
  int m_pid = -1;
  std::string m_buffer;  // received, not yet returned
  std::string m_ended;   // how the child ended, once it has
};

// A process of this user with a file open, found through /proc (Linux).
struct file_holder {
  int pid = 0;
  std::string exe;                // /proc/PID/exe, empty when unreadable
  std::vector<std::string> argv;  // /proc/PID/cmdline
  int parent_pid = 0;
  std::string parent_exe;  // empty when the parent is gone (a zombie) or unreadable
  // Killed or on its way out (PF_EXITING, or SIGKILL pending): its descriptors, and the locks on them,
  // go within moments without anyone's help.
  bool exiting = false;
  // Forked but not yet exec'd (PF_FORKNOEXEC): a child a spawner just forked, still holding its parent's
  // descriptors under its parent's name and command line until the exec (or its exit, the parent being gone).
  bool between_fork_and_exec = false;
};

// Every other process whose descriptors include the file at path (the same device and inode, whatever
// name it was opened by). Processes of other users cannot be inspected and are not listed. Empty when
// path does not exist.
std::vector<file_holder> processes_holding(const std::string& path);

// Keeps a file open, read-only and without a lock, for its lifetime: what processes_holding, called in
// another process, finds as the sign that this one is using the file (a kstudy run between two of its
// replication children, when nothing holds the archive's lock). Not inherited by children (close-on-exec).
// A file that cannot be opened is not held, silently: the sign is advisory.
class held_open {
 public:
  explicit held_open(const std::string& path);
  ~held_open();
  held_open(const held_open&) = delete;
  held_open& operator=(const held_open&) = delete;

  // Whether path still names the file opened (its folder not removed, the file not replaced or deleted).
  bool still_at_path() const;
  // Copies the file opened, through the descriptor (so also after its name went), to a new file at
  // destination; false, with errno set, when that fails.
  bool copy_to(const std::string& destination) const;

 private:
  std::string m_path;
  int m_fd = -1;
};

// Whether another open file description holds a flock on path (HDF5's file lock): probed with a
// non-blocking exclusive lock on a read-only descriptor that is closed again. False when path cannot be
// opened.
bool flock_held_elsewhere(const std::string& path);

}  // namespace kstudy::platform
