#!/usr/bin/env python3
"""scripts/device_rung_ncu.py refuses what it cannot profile before it imports a framework (the device run would
otherwise spend its ncu time on a traceback): an unknown rung, a rung that is not PyTorch-based, a malformed point.
Each names the problem and exits non-zero. Runs on the host: no GPU, no PyTorch needed."""

import os
import subprocess
import sys

root = sys.argv[1]
script = os.path.join(root, "scripts", "device_rung_ncu.py")
cases = [
    (["nosuch@python_cuda:1x2"], "no rung 'nosuch@python_cuda'"),
    (["softmax_numpy@python:4x4"], "is a numpy rung; only PyTorch-based ones here"),
    (["softmax_triton@python_cuda:4xq"], "the point must be extents joined by x"),
]
failures = 0
for args, expected in cases:
    run = subprocess.run([sys.executable, script] + args, capture_output=True, text=True, timeout=60)
    if run.returncode == 0 or expected not in run.stderr:
        failures += 1
        print(f"FAIL {args}: exit {run.returncode}, stderr: {run.stderr.strip()[-300:]}")
    else:
        print(f"ok   {args}: {run.stderr.strip().splitlines()[-1][:120]}")
sys.exit(1 if failures else 0)
