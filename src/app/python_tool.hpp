#pragma once
// `kstudy report` and `kstudy compare` are Python (scripts/kstudy_report.py, Debian's python3-h5py, pandas,
// numpy, matplotlib, scipy). exec_python_tool finds the script and replaces this process with
//   /usr/bin/python3 <script> argv[1] argv[2] ...
// so the tool's output and exit code are the command's. It returns only on failure (with a message).
namespace kstudy {
int exec_python_tool(int argc, char** argv);
}
