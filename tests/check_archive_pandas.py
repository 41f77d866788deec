#!/usr/bin/python3
"""Loads a kstudy archive the way an analysis notebook would: h5py + pandas, no kstudy code.

usage: check_archive_pandas.py ARCHIVE EXPERIMENT EXPECTED_SAMPLE_ROWS
Exit 77 (ctest: skipped) when this python lacks h5py or pandas.
"""
import sys

try:
    import h5py
    import pandas
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

TIMERS = {"host_wall", "resident_wall", "device_events", "one_shot", "one_shot_alloc", "pipelined", "cold", "pin",
          "compile", "launch", "transfer", "layout_conversion"}
COLUMNS = {
    "samples": ["experiment", "variant", "layout", "memory_kind", "direction", "rows", "features", "depth", "pitch",
                "block_size", "bytes", "point", "replication", "trial", "timer", "seconds", "gate",
                "throttled", "status", "occupancy", "energy_joules", "power_watts", "min_sm_clock_mhz",
                "throttle_reasons", "cache", "flush_bytes", "flush_seconds", "device_uuid", "device_pci_bus_id",
                "device_model"],
    "gate": ["experiment", "variant", "layout", "rows", "features", "depth", "block_size", "passed", "max_abs_error",
             "max_relative_error", "rtol", "atol", "value_failures", "discrete_mismatches", "ambiguous", "message"],
    "ceilings": ["name", "bytes", "seconds", "bytes_per_second", "flops", "flops_per_second", "clock"],
    "summary": ["experiment", "variant", "layout", "memory_kind", "direction", "rows", "features", "depth",
                "block_size", "timer", "cache", "samples", "median", "min", "max", "q1", "q3", "bytes_per_second",
                "fraction_of_roof", "occupancy", "interval_low", "interval_high", "stopped"],
    "attribution": ["experiment", "variant", "rows", "features", "depth", "kernel", "calls", "seconds"],
    "health": ["experiment", "point", "replication", "rows", "features", "depth", "block_size", "bytes", "memory_kind",
               "direction", "device", "available", "before_sm_clock_mhz", "before_memory_clock_mhz",
               "before_temperature_c", "before_power_mw", "before_throttle_reasons", "after_sm_clock_mhz",
               "after_memory_clock_mhz", "after_temperature_c", "after_power_mw", "after_throttle_reasons",
               "seconds", "throttled", "reasons", "energy_joules", "sampled_readings", "sampled_min_sm_clock_mhz",
               "sampled_mean_power_mw", "sampled_throttle_reasons", "inputs_seconds", "reference_seconds",
               "prepare_seconds", "warm_up_seconds", "trials_seconds", "recheck_seconds", "attribution_seconds"],
    "variants": ["variant", "operation", "compute_ceiling", "axes", "family", "fusion_level", "implementation",
                 "layout", "backend", "on_device", "kernels_launched", "rung", "rows", "features", "depth",
                 "block_size", "modelled_bytes_read", "modelled_bytes_written", "essential_bytes", "essential_flops",
                 "peak_device_bytes", "tuned_parameters"],
}
GATE_VERDICTS = {"passed", "failed", "not_gated"}


def text(value):
    # h5py 3 returns variable-length strings inside compound rows as bytes, attributes as str.
    return value.decode("utf-8") if isinstance(value, bytes) else value


def main():
    path, experiment, expected_rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with h5py.File(path, "r") as f:
        assert text(f.attrs["schema_version"]) == "14", dict(f.attrs)
        assert "environment" in f, list(f)
        group = f[f"/experiments/{experiment}"]
        for name in ("definition", "protocol", "fingerprint"):
            assert name in group.attrs, (name, list(group.attrs))
        frames = {}
        for table, columns in COLUMNS.items():
            dataset = group[table]
            assert dataset.chunks is not None and dataset.maxshape == (None,), (table, dataset.chunks, dataset.maxshape)
            assert "units" in dataset.attrs, table
            frame = pandas.DataFrame(dataset[:])  # the point of the schema: no custom code
            assert list(frame.columns) == columns, (table, list(frame.columns))
            frames[table] = frame
    samples = frames["samples"]
    assert len(samples) == expected_rows, (len(samples), expected_rows)
    timers = set(samples["timer"].map(text))
    assert timers <= TIMERS and timers, timers
    verdicts = set(samples["gate"].map(text))
    assert verdicts == GATE_VERDICTS, verdicts  # the fixture writes each of them
    assert samples["bytes"].dtype == "int64", samples["bytes"].dtype
    assert samples["seconds"].dtype == "float64", samples["seconds"].dtype
    assert samples["status"].map(text).str.startswith(("ok", "rejected")).all()
    health = frames["health"]
    assert len(health) > 0 and health["before_throttle_reasons"].dtype == "int64", health.dtypes
    assert health["throttled"].dtype == "uint8", health["throttled"].dtype
    variants = frames["variants"]
    assert len(variants) > 0, "no variants rows"
    assert variants["on_device"].dtype == "uint8" and variants["kernels_launched"].dtype == "int32", variants.dtypes
    for column in COLUMNS["variants"][COLUMNS["variants"].index("rows"):COLUMNS["variants"].index("tuned_parameters")]:
        assert variants[column].dtype == "int64", (column, variants[column].dtype)
    assert variants["tuned_parameters"].dtype == object, variants["tuned_parameters"].dtype  # a string
    print(f"{path}: {len(samples)} sample rows, timers {sorted(timers)}, gate verdicts {sorted(verdicts)}; "
          f"{len(health)} health rows; {len(variants)} variants rows")
    print(samples.head(3).to_string())


if __name__ == "__main__":
    main()
