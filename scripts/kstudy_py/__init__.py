"""kstudy's analysis side: `kstudy report` and `kstudy compare` (entry point: scripts/kstudy_report.py).

Reads kstudy HDF5 archives (docs/archive_schema.md) with Debian's python3-h5py / pandas / numpy; plots with
python3-matplotlib; significance with python3-scipy. Every number is computed from the archive's samples.
"""
