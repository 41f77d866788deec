#!/usr/bin/python3
"""scripts/reproduce.py on a scratch repository: plan reads the command a published archive records; the script it
writes re-measures the archive (a cpu kstudy), skips it once complete, says what waits when the time is short, and
exits 3 then; adopt copies the new archive into a dataset folder, points the marker at it and regenerates the block;
adopt of an incomplete folder exits 2 naming what is missing; reports regenerates a report folder from the command it
records (notes in full, a stale table removed) and refuses one whose command writes elsewhere.

    tests/check_reproduce.py KSTUDY REPO
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from check_support import Cases, require

require("h5py")
KSTUDY, REPO = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
SCRIPT = REPO / "scripts" / "reproduce.py"
EXPERIMENT = {"name": "tiny_cache", "kind": "sweep", "operation": "stream_copy", "n": [4099],
              "cache": ["warm", "cold"], "variants": ["copy_kokkos@serial"], "timers": ["host_wall"],
              "protocol": {"warmups": 1, "trials": 5, "replications": 1, "seed": 7, "threads": 1, "shuffle": False}}
cases = Cases()
check = cases.check


def reproduce(root, *args):
    p = subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch) / "repo"
    (root / "data" / "ds").mkdir(parents=True)
    experiment = Path(scratch) / "tiny_cache.json"
    experiment.write_text(json.dumps(EXPERIMENT))
    made = subprocess.run([str(KSTUDY), "run", str(experiment), "-q", "--out", str(root / "data/ds/tiny.h5")],
                          capture_output=True, text=True)
    check(made.returncode == 0, f"the published archive is made: {made.stderr}")
    (root / "README.md").write_text("# Page\n\n<!-- kstudy:results cache_modes archives=data/ds/tiny.h5 -->\n"
                                    "<!-- kstudy:end -->\n")

    code, out, err = reproduce(root, "plan")
    check(code == 0 and "data/ds/tiny.h5  (README.md)" in out and f"kstudy run {experiment}" in out
          and "--out" not in out and "-q" not in out.split(), f"plan names the archive and its command:\n{out}{err}")

    code, script, err = reproduce(root, "script")
    check(code == 0 and "step ds/tiny.h5 " in script, f"script: {code} {err}")
    sh = Path(scratch) / "reproduce.sh"
    sh.write_text(script)
    out_dir = Path(scratch) / "out"
    env = dict(os.environ, KSTUDY=str(KSTUDY), OUT=str(out_dir), SECONDS_LEFT="5")
    p = subprocess.run(["bash", str(sh)], env=env, capture_output=True, text=True)
    check(p.returncode == 3 and "no time left for" in p.stdout and not (out_dir / "ds/tiny.h5").exists(),
          f"too little time: nothing started, exit 3: {p.returncode} {p.stdout}")
    code, _, err = reproduce(root, "adopt", str(out_dir), "--dataset", "data/new")
    check(code == 2 and "ds/tiny.h5: missing or incomplete" in err, f"adopt of an incomplete folder: {code} {err}")

    env["SECONDS_LEFT"] = "200"
    p = subprocess.run(["bash", str(sh)], env=env, capture_output=True, text=True)
    check(p.returncode == 0 and (out_dir / "ds/tiny.h5").exists() and (out_dir / "ds/tiny.h5.done").exists(),
          f"the script re-measures the archive: {p.returncode} {p.stdout} {p.stderr}")
    p = subprocess.run(["bash", str(sh)], env=env, capture_output=True, text=True)
    check(p.returncode == 0 and "complete: " in p.stdout, f"a complete archive is skipped: {p.stdout}")

    code, out, err = reproduce(root, "adopt", str(out_dir), "--dataset", "data/new")
    page = (root / "README.md").read_text()
    check(code == 0 and (root / "data/new/ds__tiny.h5").exists()
          and "archives=data/new/ds__tiny.h5 -->" in page and "| `copy_kokkos` | 4,099×1 |" in page
          and "host clock (host variants)" in page and "| 32 KiB |" in page,
          f"adopt copies, points the marker at the copy and regenerates the block: {code} {out} {err}\n{page}")
    readme = (root / "data/new/README.md").read_text() if (root / "data/new/README.md").exists() else ""
    check("| `ds__tiny.h5` | `data/ds/tiny.h5` |" in readme and "- `ds__tiny.h5`: " in readme,
          f"adopt writes the dataset's README with its provenance block:\n{readme}")
    code, _, err = reproduce(root, "adopt", str(out_dir), "--dataset", "/tmp/elsewhere")
    check(code == 2 and "a folder under data/" in err, f"adopt refuses a dataset outside data/: {code} {err}")

    # reports: a report folder records its whole command (notes included) and is regenerated from it alone.
    code, _, err = reproduce(root, "reports")
    check(code == 2 and "no docs/*/report_command.json" in err, f"reports with no report: {code} {err}")
    note = "a note's full text, kept"
    made = subprocess.run([str(KSTUDY), "report", "data/new/ds__tiny.h5", "--out", "docs/rep", "--note", note],
                          cwd=root, capture_output=True, text=True)
    recorded = root / "docs/rep/report_command.json"
    check(made.returncode == 0 and recorded.exists()
          and json.loads(recorded.read_text())["argv"] == ["data/new/ds__tiny.h5", "--out", "docs/rep", "--note", note],
          f"kstudy report records its argv: {made.stderr}")
    first = (root / "docs/rep/report.md").read_text() if made.returncode == 0 else ""
    (root / "docs/rep/report.md").unlink(missing_ok=True)
    (root / "docs/rep/stale.csv").write_text("a table no section writes any more\n")
    code, out, err = reproduce(root, "reports")
    again = (root / "docs/rep/report.md").read_text() if (root / "docs/rep/report.md").exists() else ""
    check(code == 0 and again == first and note in again and not (root / "docs/rep/stale.csv").exists()
          and "docs/rep: kstudy report" in out, f"reports regenerates the report from its command: {code} {out} {err}")
    recorded.write_text(json.dumps({"argv": ["data/new/ds__tiny.h5", "--out", "docs/elsewhere"]}))
    code, _, err = reproduce(root, "reports")
    check(code == 2 and "not to the folder that records it" in err, f"a command writing elsewhere: {code} {err}")

cases.finish("check_reproduce.py: every case passed")
