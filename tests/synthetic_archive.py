"""Small kstudy archives with chosen samples, for the compare --gate and history tests.

Only what the Python reader needs (kstudy_py/archive.py): root attributes (schema, commit, host, creation time),
an environment group and one experiment group whose samples table holds the given seconds, all accepted (status
ok, gate passed, trials 0..n-1). No digest attributes: the reader checks digests only where a writer left one.
"""
import json

import h5py
import numpy as np

STRING = h5py.string_dtype("utf-8")
SAMPLE_FIELDS = [("experiment", STRING), ("variant", STRING), ("layout", STRING), ("memory_kind", STRING),
                 ("direction", STRING), ("rows", "<i8"), ("features", "<i8"), ("depth", "<i8"), ("pitch", "<i8"),
                 ("block_size", "<i8"), ("bytes", "<i8"), ("point", "<i8"), ("replication", "<i4"),
                 ("trial", "<i4"), ("timer", STRING), ("seconds", "<f8"), ("gate", STRING), ("throttled", "u1"),
                 ("status", STRING), ("occupancy", "<f8")]
DEFINITION = {"kind": "sweep", "operation": "scoring", "rows": [4096], "features": [16]}


def write(path, series, commit="0" * 40, dirty=False, host="ci-host", gpu="", created="2026-12-01T00:00:00Z",
          experiment="synthetic", kokkos="4.6.1"):
    """series: {(variant, rows, features, timer): seconds}, seconds one array (one replication) or a list of
    arrays (one per replication). Returns path."""
    rows = []
    for point, ((variant, r, f, timer), seconds) in enumerate(sorted(series.items())):
        replications = seconds if isinstance(seconds, list) else [seconds]
        for replication, values in enumerate(replications):
            for trial, s in enumerate(np.asarray(values, dtype=float)):
                rows.append((experiment, variant, "row_major", "host", "", r, f, 1, f, 0, r * f * 4, point,
                             replication, trial, timer, float(s), "passed", 0, "ok", 0.0))
    table = np.array(rows, dtype=SAMPLE_FIELDS)
    with h5py.File(path, "w") as h5:
        h5.attrs.update(schema_version="8", git_commit=commit, git_dirty="true" if dirty else "false", host=host,
                        created_utc=created, flavour="cpu", kstudy_version="0.1.0", command_line="synthetic")
        env = h5.create_group("environment")
        env.attrs.update(kokkos_version=kokkos, cpu_model="synthetic CPU", backends="serial openmp")
        if gpu:
            env.attrs["gpu_name"] = gpu
        group = h5.create_group("experiments").create_group(experiment)
        group.attrs.update(definition=json.dumps(DEFINITION), protocol="{}", fingerprint="synthetic0001")
        group.create_dataset("samples", data=table)
    return path


def lognormal(median, spread, n, seed):
    """n samples around `median` whose relative IQR is about 1.35 * spread."""
    rng = np.random.default_rng(seed)
    return median * np.exp(rng.normal(0.0, spread, n))
