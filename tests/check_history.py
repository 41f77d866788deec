#!/usr/bin/python3
"""`kstudy history` through the kstudy binary, on synthetic archives (tests/synthetic_archive.py):

  concurrency  four processes add different archives at once while a fifth adds one of theirs again: every
               process succeeds (no "database is locked"), every archive is recorded exactly once
  idempotence  adding an archive again records nothing; a moved archive is found at its new path; a rewritten
               one is listed as changed
  show         per commit in git log order (a throwaway repository whose commits the archives name, created in
               the opposite order), or in creation order without a repository; a 30% step is marked at the
               commit that made it and nowhere else; --plot writes a PNG; bad requests fail in one line

usage: check_history.py KSTUDY
Exit 77 (ctest: skipped) when this python lacks h5py, numpy, pandas or scipy.
"""
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import h5py
    import numpy as np  # noqa: F401
    import pandas  # noqa: F401
    import scipy  # noqa: F401
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_archive as S  # noqa: E402

VARIANT = "fused@openmp"
POINT = (VARIANT, 4096, 16, "host_wall")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def kstudy(*args, cwd=None, env=None, quiet=False):
    run = subprocess.run([KSTUDY, "history", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)
    if not quiet:
        print(f"$ kstudy history {' '.join(map(str, args))} -> {run.returncode}\n"
              f"{run.stdout[-2500:]}{run.stderr[-1500:]}")
    check("Traceback" not in run.stderr, "a Python traceback reached the user")
    return run


def one_line_error(run, code, text):
    lines = run.stderr.strip().splitlines()
    check(run.returncode == code and len(lines) == 1 and text in lines[0],
          f"expected exit {code} and one line naming '{text}', got {run.returncode}: {run.stderr!r}")


def counts(store):
    with sqlite3.connect(store) as db:
        archives = db.execute("SELECT COUNT(*), COUNT(DISTINCT sha256) FROM archives").fetchone()
        points = db.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    return archives[0], archives[1], points


def check_concurrent_writers(tmp):
    store = tmp / "concurrent.sqlite"
    batches = []
    for w in range(4):
        batch = []
        for i in range(3):
            commit = f"{w:02d}{i:02d}".ljust(40, "a")
            batch.append(S.write(tmp / f"c{w}_{i}.h5", {POINT: S.lognormal(1e-3, 0.02, 8, 10 * w + i)},
                                 commit=commit, created=f"2026-12-0{w + 1}T0{i}:00:00Z"))
        batches.append(batch)
    duplicate = batches[0][1]
    writers = [subprocess.Popen([KSTUDY, "history", "add", *map(str, b), "--store", str(store)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for b in batches + [[duplicate]]]
    results = [(p.wait(timeout=120), *p.communicate()) for p in writers]
    for rc, out, err in results:
        print(f"writer -> {rc}: {out.strip()} {err.strip()}")
        check(rc == 0, f"a concurrent writer failed: {err}")
        check("locked" not in err, "a concurrent writer met 'database is locked'")
    archives, distinct, points = counts(store)
    check(archives == 12 and distinct == 12 and points == 12,
          f"expected 12 archives recorded once each with one series each, got {archives}, {distinct}, {points}")
    with sqlite3.connect(store) as db:
        check(db.execute("PRAGMA journal_mode").fetchone()[0] == "wal", "the store is not in WAL mode")


def check_idempotence(tmp):
    store = tmp / "idem.sqlite"
    a = S.write(tmp / "idem.h5", {POINT: S.lognormal(1e-3, 0.02, 8, 1)}, commit="b" * 40)
    check(kstudy("add", a, "--store", store).returncode == 0, "add failed")
    again = kstudy("add", a, "--store", store)
    check(again.returncode == 0 and "already recorded" in again.stdout, "a second add was not recognised")
    check(counts(store)[:2] == (1, 1), "the same archive was recorded twice")
    moved = tmp / "moved" / "idem.h5"
    moved.parent.mkdir()
    shutil.move(a, moved)
    listed = kstudy("list", "--store", store)
    check(listed.returncode == 0 and "missing" in listed.stdout, "a moved archive is not listed as missing")
    again = kstudy("add", moved, "--store", store)
    check("moved from" in again.stdout and counts(store)[0] == 1, "the moved archive was not found again")
    listed = kstudy("list", "--store", store)
    check(" ok " in listed.stdout and str(moved) in listed.stdout, "the moved archive's new path is not listed")
    with h5py.File(moved, "r+") as f:
        f.attrs["note"] = "rewritten after it was recorded"
    check("changed" in kstudy("list", "--store", store).stdout, "a rewritten archive is not listed as changed")


def make_repo(tmp, n):
    repo = tmp / "repo"
    repo.mkdir()
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    commits = []
    for i in range(n):
        (repo / "f").write_text(str(i))
        subprocess.run(["git", "-C", str(repo), "add", "f"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", f"c{i}"], check=True, env=env)
        commits.append(subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, env=env,
                                      capture_output=True, text=True).stdout.strip())
    return repo, commits


def check_show(tmp):
    store = tmp / "show.sqlite"
    repo, commits = make_repo(tmp, 5)
    medians = [1.00e-3, 1.01e-3, 1.00e-3, 1.30e-3, 1.31e-3]  # a step at the fourth commit
    archives = []
    for i, (commit, median) in enumerate(zip(commits, medians)):
        # Created in the opposite order of the commits: only git order puts them right.
        archives.append(S.write(tmp / f"s{i}.h5", {POINT: [S.lognormal(median, 0.01, 8, 100 + i),
                                                           S.lognormal(median, 0.01, 8, 200 + i)],
                                                   ("other@openmp", 4096, 16, "host_wall"):
                                                       S.lognormal(2e-3, 0.01, 8, i)},
                                commit=commit, created=f"2026-12-0{9 - i}T00:00:00Z", gpu="NVIDIA H200"))
    # A dirty build of the last commit, on another machine: a series of its own.
    archives.append(S.write(tmp / "s_other_machine.h5", {POINT: S.lognormal(5e-3, 0.01, 8, 7)},
                            commit=commits[-1], dirty=True, host="laptop"))
    check(kstudy("add", *archives, "--repo", repo, "--store", store).returncode == 0, "add failed")
    run = kstudy("show", "--variant", "fused", "--machine", "h200", "--store", store, "--plot", tmp / "h.png")
    check(run.returncode == 0, "show failed")
    check("git log of" in run.stdout, "show did not use the recorded repository's commit order")
    lines = [line for line in run.stdout.splitlines() if line.strip()[:10] in {c[:10] for c in commits}]
    check([line.split()[0] for line in lines] == [c[:10] for c in commits], f"not in git order: {lines}")
    steps = [i for i, l in enumerate(lines) if "STEP" in l]
    check(steps == [3] and "STEP SLOWER" in lines[3], f"expected one SLOWER step at the fourth commit: {lines}")
    check("laptop" not in run.stdout, "--machine did not filter")
    check((tmp / "h.png").stat().st_size > 1000, "--plot wrote no figure")
    # Without the repository: creation order, said so.
    run = kstudy("show", "--variant", VARIANT, "--machine", "h200", "--store", store, "--repo", tmp / "nowhere")
    check(run.returncode == 0 and "creation time" in run.stdout, "no fallback to creation order")
    # The environment variable names the store.
    run = kstudy("list", env=dict(os.environ, KSTUDY_HISTORY=str(store)))
    check(run.returncode == 0 and "6 archives" in run.stdout and "laptop" in run.stdout, "KSTUDY_HISTORY ignored")
    one_line_error(kstudy("show", "--variant", "nonexistent", "--store", store), 2, "nothing recorded")
    one_line_error(kstudy("show", "--variant", VARIANT, "--threshold", "five", "--store", store), 2, "--threshold")
    one_line_error(kstudy("list", "--store", tmp / "absent.sqlite"), 2, "no history store")
    one_line_error(kstudy("add", tmp / "absent.h5", "--store", store), 2, "no such file")
    (tmp / "not_hdf5.h5").write_text("text")
    one_line_error(kstudy("add", tmp / "not_hdf5.h5", "--store", store), 2, "cannot be opened as HDF5")
    (tmp / "junk.sqlite").write_text("not a database" * 100)
    one_line_error(kstudy("list", "--store", tmp / "junk.sqlite"), 2, "not usable")


def main():
    with tempfile.TemporaryDirectory(prefix="kstudy_history_") as d:
        tmp = Path(d)
        check_concurrent_writers(tmp)
        check_idempotence(tmp)
        check_show(tmp)
    print("history: ok")
    return 0


if __name__ == "__main__":
    KSTUDY = sys.argv[1]
    sys.exit(main())
