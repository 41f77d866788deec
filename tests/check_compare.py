#!/usr/bin/python3
"""`kstudy compare` through the kstudy binary on the committed CPU fixture: an archive against itself gives
ratio 1 and no significant difference; a different experiment fingerprint or schema version is refused with
exit code 2 unless --force; --by backend states its efficiency definition; --by kokkos orders Kokkos versions
numerically and gives each variant's ratio between them and its multiple of the CUDA escape path's time;
a missing python is named.

usage: check_compare.py KSTUDY FIXTURE.h5
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or scipy.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import h5py
    import numpy as np
    import pandas as pd
    import scipy  # noqa: F401  (compare needs it)
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def kstudy(*args, env=None):
    run = subprocess.run([KSTUDY, "compare", *map(str, args)], capture_output=True, text=True, env=env)
    print(f"$ kstudy compare {' '.join(map(str, args))} -> {run.returncode}\n{run.stdout[-1500:]}{run.stderr[-1500:]}")
    return run


def relabel(path, kokkos_version, scale, escape_stand_in):
    """A copy of the fixture as if built against another Kokkos: its version, every time times `scale`, and
    cpu_reference renamed as a handwritten CUDA variant so the x_cuda column has a reference."""
    with h5py.File(path, "r+") as f:
        f["environment"].attrs["kokkos_version"] = kokkos_version
        for name in f["experiments"]:
            samples = f["experiments"][name]["samples"]
            if samples.shape[0] == 0:
                continue
            rows = samples[:]
            rows["seconds"] *= scale
            rows["variant"] = [escape_stand_in if v == b"cpu_reference@openmp" else v for v in rows["variant"]]
            samples[...] = rows


def check_by_kokkos(fixture, tmp):
    old, new = tmp / "kokkos_old.h5", tmp / "kokkos_new.h5"
    shutil.copy(fixture, old)
    shutil.copy(fixture, new)
    escape = b"fused_cuda_feature_major@cuda"
    # "10.0.0" sorts after "9.1.0" only numerically: the newer version must be the second column.
    relabel(old, "9.1.0", 1.0, escape)
    relabel(new, "10.0.0", 0.5, escape)
    out = tmp / "kokkos.csv"
    run = kstudy(new, old, "--by", "kokkos", "--out", out)
    check(run.returncode == 0 and "x_cuda" in run.stdout, "--by kokkos failed")
    df = pd.read_csv(out)
    check(list(c for c in df.columns if c.startswith("median[")) == ["median[9.1.0]", "median[10.0.0]"],
          f"versions not in numeric order: {list(df.columns)}")
    check(np.allclose(df.ratio_new_over_old, 0.5), "ratio newest/oldest is not the 0.5 the copy was scaled by")
    kokkos_rows = df[df.variant != escape.decode()]
    escape_rows = df[df.variant == escape.decode()]
    check(len(kokkos_rows) and len(escape_rows), "fixture lost its variants")
    check(escape_rows["x_cuda[9.1.0]"].isna().all(), "the escape path has an x_cuda of its own")
    point = ["experiment", "rows", "features", "timer"]
    merged = kokkos_rows.merge(escape_rows[point + ["median[9.1.0]"]], on=point, suffixes=("", "_cuda"))
    check(len(merged) and np.allclose(merged["x_cuda[9.1.0]"], merged["median[9.1.0]"] / merged["median[9.1.0]_cuda"]),
          "x_cuda is not the variant's median over the escape path's at that point")
    run = kstudy(old, old, "--by", "kokkos")
    check(run.returncode == 1 and "at least two Kokkos versions" in run.stderr, "one Kokkos version accepted")


def main():
    global KSTUDY
    KSTUDY, fixture = sys.argv[1], Path(sys.argv[2])
    with tempfile.TemporaryDirectory(prefix="kstudy_compare_") as tmp:
        tmp = Path(tmp)
        # Identical archives: every aligned point has ratio 1 and is not significant (or too few samples).
        csv = tmp / "same.csv"
        run = kstudy(fixture, fixture, "--out", csv)
        check(run.returncode == 0, "compare of an archive with itself failed")
        df = pd.read_csv(csv)
        check(len(df) > 0 and np.allclose(df.ratio_B_over_A, 1.0, rtol=0, atol=1e-12), "ratio != 1")
        enough = (df.n_A >= 5) & (df.n_B >= 5)
        check(enough.any(), "fixture has no point with 5 samples per side")
        check((df[enough].significance == "not significant").all(), df[enough].significance.unique())
        check((df[~enough].significance == "too few samples").all(), df[~enough].significance.unique())
        check("not significant" in run.stdout and "ratio_B_over_A" in run.stdout, "table not printed")
        # Samples that failed (transfer calibration on a CPU build) never enter the comparison.
        check("transfer_calibration" not in set(df.experiment), "failed samples compared")

        # Same experiment name, different definition: refused (2) unless --force.
        other = tmp / "other_fingerprint.h5"
        shutil.copy(fixture, other)
        with h5py.File(other, "r+") as f:
            f["/experiments/quick"].attrs["fingerprint"] = "0123456789abcdef"
        run = kstudy(fixture, other)
        check(run.returncode == 2, f"different fingerprint: exit {run.returncode}, want 2")
        check("quick" in run.stderr and "--force" in run.stderr and "0123456789abcdef" in run.stderr, run.stderr)
        run = kstudy(fixture, other, "--force")
        check(run.returncode == 0 and "warning" in run.stderr, "--force did not compare")

        # Different schema versions: refused too.
        newer = tmp / "schema2.h5"
        shutil.copy(fixture, newer)
        with h5py.File(newer, "r+") as f:
            f.attrs["schema_version"] = "99"
        run = kstudy(fixture, newer)
        check(run.returncode == 2 and "schema" in run.stderr, f"schema mismatch: exit {run.returncode}")
        # ... except versions whose samples are the same (11 added profile counters only to 10).
        with h5py.File(fixture, "r") as f:
            current = f.attrs["schema_version"]
            current = current.decode() if isinstance(current, bytes) else str(current)
        if current in ("10", "11"):
            older = tmp / "schema10.h5"
            shutil.copy(fixture, older)
            with h5py.File(older, "r+") as f:
                f.attrs["schema_version"] = "10" if current == "11" else "11"
            run = kstudy(fixture, older)
            check(run.returncode == 0 and "schema" not in run.stderr,
                  f"schema 10 against 11 compares: exit {run.returncode} {run.stderr}")

        # Portability across backends (one archive): efficiency defined in the output, best family = 1,
        # PP within [0, 1].
        pp = tmp / "pp.csv"
        run = kstudy(fixture, "--by", "backend", "--out", pp)
        check(run.returncode == 0 and "eff = t_best / t_variant" in run.stdout, "--by backend")
        df = pd.read_csv(pp)
        effs = [c for c in df.columns if c.startswith("eff[")]
        check(effs and ((df.PP >= 0) & (df.PP <= 1 + 1e-12)).all(), "PP out of range")
        point = [c for c in ("archive", "experiment", "rows", "features", "block_size", "regime") if c in df.columns]
        for c in effs:
            check(np.allclose(df.groupby(point)[c].max(), 1.0), f"no family with efficiency 1 on {c}")

        check_by_kokkos(fixture, tmp)

        # No python where KSTUDY_PYTHON points: a clear error naming the Debian packages, non-zero exit.
        env = dict(os.environ, KSTUDY_PYTHON=str(tmp / "no-such-python"))
        run = kstudy(fixture, fixture, env=env)
        check(run.returncode == 127 and "python3-h5py" in run.stderr, (run.returncode, run.stderr))
    print("compare checks passed")


if __name__ == "__main__":
    main()
