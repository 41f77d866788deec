#!/usr/bin/python3
"""kstudy_py reads every archive in a forked child (archive._in_child): a read that kills its process (HDF5 following
a damaged heap reference past its buffers) refuses the file in one line naming it and the signal, and the reading
process goes on; a read that refuses the file passes its message on; a read that works hands its result back, and an
Archive read so holds what the file holds.

    tests/check_archive_child.py REPO
Exit 77 (ctest: skipped) when this python lacks h5py, pandas or numpy.
"""
import os
import signal
import sys
from pathlib import Path

from check_support import Cases, require

REPO = Path(sys.argv[1]).resolve()
sys.path.insert(0, str(REPO / "scripts"))
sys.dont_write_bytecode = True
A = require("kstudy_py.archive")  # exit 77 where h5py, pandas or numpy is missing
cases = Cases()
check = cases.check


def dies(path):
    os.kill(os.getpid(), signal.SIGSEGV)


def refuses(path):
    raise A.ArchiveError(f"{path}: refused")


try:
    A._in_child(dies, "damaged.h5")
    check(False, "a read that dies is refused")
except A.ArchiveError as error:
    check("damaged.h5" in str(error) and "SIGSEGV" in str(error) and "kstudy salvage" in str(error),
          f"a read that dies names the file, the signal and salvage: {error}")
try:
    A._in_child(refuses, "refused.h5")
    check(False, "a refusal is passed on")
except A.ArchiveError as error:
    check(str(error) == "refused.h5: refused", f"a refusal is passed on as it was: {error}")
check(A._in_child(lambda path: {"read": path}, "good.h5") == {"read": "good.h5"}, "a result comes back")

archive = A.Archive(REPO / "tests/fixtures/cpu_small.h5")
experiment = next(iter(archive.experiments.values()))
check(archive.schema_version and experiment.archive is archive and len(experiment.samples) > 0
      and set(experiment.samples.archive) == {archive.label},
      "an Archive read in a child holds the file's experiments, each pointing back at it")
cases.finish("check_archive_child.py: every case passed")
