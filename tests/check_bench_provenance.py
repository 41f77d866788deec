"""kstudy_bench's JSON names the build it came from: `context` carries kstudy_version, flavour, git_commit,
git_dirty and, for a dirty tree, git_diff_sha256 (as an archive's root attributes do), and
scripts/data_provenance.py reads them.

    check_bench_provenance.py KSTUDY_BENCH SOURCE_DIR      (exit 0 passed, 1 failed, 77 h5py missing)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from check_support import Cases

bench, source = sys.argv[1], Path(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "bench.json"
    env = dict(os.environ, KSTUDY_CEILING_BYTES="1048576", OMP_PROC_BIND="false", OMP_NUM_THREADS="2")
    run = subprocess.run([bench, "--operations=stream_copy", "--shapes=4099", "--benchmark_filter=@serial/",
                          "--benchmark_min_time=0.01", f"--benchmark_out={out}", "--benchmark_out_format=json"],
                         env=env, capture_output=True, text=True, timeout=600)
    if run.returncode != 0 or not out.exists():
        print(run.stdout, run.stderr)
        sys.exit(f"FAIL: kstudy_bench exit {run.returncode}")
    document = json.loads(out.read_text())
    context = document["context"]
    cases = Cases()
    cases.check(bool(document.get("benchmarks")), "a benchmark ran")
    commit, dirty, diff = context.get("git_commit"), context.get("git_dirty"), context.get("git_diff_sha256")
    cases.check(commit == "unknown" or (isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit)),
                f"git_commit {commit!r}")
    cases.check(dirty in ("true", "false", "unknown"), f"git_dirty {dirty!r}")
    cases.check(dirty != "true" or (isinstance(diff, str) and re.fullmatch(r"[0-9a-f]{64}", diff)),
                f"a dirty build carries the sha256 of its diff: {diff!r}")
    cases.check(dirty == "true" or diff is None, f"git_diff_sha256 {diff!r} with git_dirty {dirty!r}")
    for key in ("kstudy_version", "flavour"):
        cases.check(bool(context.get(key)), f"{key} in the context")
    # The reader of the data READMEs sees the same.
    sys.path.insert(0, str(source / "scripts"))
    import data_provenance  # noqa: E402 (exits 77 without h5py)
    described = data_provenance.read_provenance(out).describe()
    cases.check(dirty not in ("true", "false") or commit[:7] in described, f"data_provenance.py reads {described!r}")
    print("context:", {k: v for k, v in context.items() if k.startswith("git") or k in ("kstudy_version", "flavour")})
    cases.finish("check_bench_provenance.py: every case passed")
