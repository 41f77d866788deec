#pragma once
// Python rungs: variants written in Python (NumPy today; scripts/kstudy_py/rungs is their side), registered with
// the variant registry beside the C++ ones and driven by the same protocol and gates. Each rung is a module
// <operation>/python_<framework>.py under a variants folder (kstudy/resources.hpp, resource_kind::variants)
// that registers itself with a decorator; kstudy asks one Python process for the list
// (`python -m kstudy_py.rungs describe`), and each prepared rung runs in a worker process of its own, which gets
// the operation's generated inputs (operation::external_inputs) through shared memory, times each call on its
// own clocks (variant::times_itself) and hands its outputs back for the operation's gate.
//
// The interpreter: $KSTUDY_RUNG_PYTHON, else $KSTUDY_PYTHON, else the python3 first on PATH (the user's, with
// their frameworks); KSTUDY_RUNG_PYTHON=none registers no Python rung. $KSTUDY_RUNG_TIMEOUT (seconds, default 600)
// bounds every request to a worker: one that does not answer in time is killed and its rung fails at that point.
#include <string>
#include <vector>

namespace kstudy {

struct python_rungs_summary {
  std::string python;               // the interpreter, as found; empty when none was
  std::string python_version;       // as it reported itself
  std::string problem;              // why no rung was registered, or ""
  std::vector<std::string> errors;  // rung modules that failed to import, rungs that cannot be registered
  int registered = 0;
};

// Registers the Python rungs once per process; later calls return the first call's summary. Never throws for a
// missing interpreter or a broken rung module: those are the summary's problem and errors, which `kstudy list`
// prints; a study that did not ask for a Python rung never sees them. The first process asks Python and hands
// what it found to its children (environment variable KSTUDY_RUNGS_FOUND), which ask no one.
const python_rungs_summary& register_python_rungs();

// The environment variable of that hand-down. A child that may run on another machine (a Slurm job submitted from
// here) must get it empty, so that it asks its own Python.
inline constexpr const char* python_rungs_handoff_variable = "KSTUDY_RUNGS_FOUND";

}  // namespace kstudy
