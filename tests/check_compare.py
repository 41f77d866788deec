#!/usr/bin/python3
"""`kstudy compare` through the kstudy binary on the committed CPU fixture: an archive against itself gives
ratio 1 and no significant difference; a different experiment fingerprint or schema version is refused with
exit code 2 unless --force; --by backend states its efficiency definition; a missing python is named.

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

        # No python where KSTUDY_PYTHON points: a clear error naming the Debian packages, non-zero exit.
        env = dict(os.environ, KSTUDY_PYTHON=str(tmp / "no-such-python"))
        run = kstudy(fixture, fixture, env=env)
        check(run.returncode == 127 and "python3-h5py" in run.stderr, (run.returncode, run.stderr))
    print("compare checks passed")


if __name__ == "__main__":
    main()
