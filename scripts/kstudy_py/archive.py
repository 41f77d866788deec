"""Loading kstudy archives (schema 1 to 14) into pandas, and the statistics every table shares."""
import hashlib
import json
import os
import pickle
import signal
import struct
from pathlib import Path

import h5py
import numpy as np
import pandas as pd

# 2 added occupancy to samples and summary, 3 the health table, 4 the verdict samples.gate (for the bool
# gate_passed) and the variants table, 5 operations: the sweep kind (was "scoring"), the definition's
# "operation" list and axis keys, and the variants table's `axes` column, 6 the variants table's `rung`, 7 a
# third axis (`depth` in every table keyed by a point), compute roofs (ceilings.flops, flops_per_second) and
# the variants table's compute_ceiling, peak_device_bytes and tuned_parameters, 8 ceilings.clock (the clock
# that timed a roof: device_events or host_wall; before 8 every roof was timed on the host clock), 9 what the GPU
# did during each timed region (samples.energy_joules, power_watts, min_sm_clock_mhz, throttle_reasons), the
# cache mode (samples.cache, flush_bytes, flush_seconds; summary.cache) and the health table's in-point readings,
# 10 renamed the gate counts, 11 added the profile's counters of a roofline from counters (PROFILE_SCHEMA11),
# 12 the GPU of every sample (samples.device_uuid, device_pci_bus_id, device_model; "" before: one unnamed device),
# 13 adaptive sampling's record in the summary (interval_low, interval_high, stopped), 14 the health table's wall
# time of each phase of a point run (PHASES: inputs_seconds, reference_seconds, ...)
# The tables, their columns and the columns' former names as the C++ record tables declare them, once:
# archive_schema.json is `kstudy schema`'s output, and ctest archive_schema fails when it is not current.
SCHEMA = json.loads(Path(__file__).with_name("archive_schema.json").read_text())
SCHEMA_VERSIONS = {str(v) for v in range(1, int(SCHEMA["schema_version"]) + 1)}
# Versions whose samples, gates and variants tables are an earlier version's (only other tables changed): their
# timings compare with that version's without --force. 11 only added profile counters, 12 the samples' device,
# 13 the summary's interval and stop reason, 14 the health table's phases.
SAMPLES_SCHEMA = {"11": "10", "12": "10", "13": "10", "14": "10"}
# Executed floating-point operations from the profile's schema 11 counters (kstudy::profile_record, filled from
# the ncu metrics of src/profile/ncu.cpp): column -> (precision, flops per counted unit). The one formula: an FMA
# is 2 flops; a half-precision instruction is counted as a half2's two lanes, as Nsight Compute's roofline
# sections count it (hadd, hmul x2, hfma x4), so scalar half arithmetic reads twice its flops; the tensor path's
# math ops are flops already (ncu counts a multiply-add as 2).
FLOP_WEIGHTS = {"fp32_ffma_inst": ("fp32", 2), "fp32_fadd_inst": ("fp32", 1), "fp32_fmul_inst": ("fp32", 1),
                "fp64_dfma_inst": ("fp64", 2), "fp64_dadd_inst": ("fp64", 1), "fp64_dmul_inst": ("fp64", 1),
                "fp16_hfma_inst": ("fp16", 4), "fp16_hadd_inst": ("fp16", 2), "fp16_hmul_inst": ("fp16", 2),
                "tensor_fp16_ops": ("tensor_fp16", 1), "tensor_bf16_ops": ("tensor_bf16", 1),
                "tensor_tf32_ops": ("tensor_tf32", 1), "tensor_fp64_ops": ("tensor_fp64", 1),
                "tensor_fp8_ops": ("tensor_fp8", 1)}
PRECISIONS = tuple(dict.fromkeys(p for p, _ in FLOP_WEIGHTS.values()))
# Warp stall reasons the profile stores, as warp cycles per issued instruction (stall_<reason>).
STALL_REASONS = ("long_scoreboard", "short_scoreboard", "mio_throttle", "lg_throttle", "wait", "math_pipe_throttle",
                 "barrier", "not_selected", "selected", "no_instruction", "dispatch_stall", "tex_throttle", "gmma")
PIPES = ("fma_pipe_pct", "tensor_pipe_pct", "lsu_pipe_pct")
PROFILE_SCHEMA11 = (list(FLOP_WEIGHTS) + ["tensor_hmma_inst", "tensor_gmma_inst"] + list(PIPES) + ["ipc"]
                    + [f"stall_{r}" for r in STALL_REASONS] + ["local_load_bytes", "local_store_bytes"])
# Columns schema 7 added, with the value an older archive's rows mean: one-, two-axis points have depth 1.
# Schema 9's columns read as "not measured" (NaN, -1) and as the warm caches every earlier run timed in.
SCHEMA9_SAMPLES = {"energy_joules": np.nan, "power_watts": np.nan, "min_sm_clock_mhz": -1, "throttle_reasons": -1,
                   "cache": "warm", "flush_bytes": 0, "flush_seconds": 0.0,
                   "device_uuid": "", "device_pci_bus_id": "", "device_model": ""}  # the device: schema 12
# The phases of a point run (`kstudy schema`'s point_phases, from KSTUDY_POINT_PHASES): name -> its health column and
# description. NaN before schema 14 and where a kind does not time them.
PHASES = {p["name"]: p for p in SCHEMA["point_phases"]}
SCHEMA9_HEALTH = {"energy_joules": np.nan, "sampled_readings": 0, "sampled_min_sm_clock_mhz": -1,
                  "sampled_mean_power_mw": np.nan, "sampled_throttle_reasons": -1,
                  **{p["column"]: np.nan for p in PHASES.values()}}  # the phases: schema 14
SCHEMA7_DEFAULTS = {
    "samples": {"depth": 1, **SCHEMA9_SAMPLES}, "gate": {"depth": 1},
    "summary": {"depth": 1, "cache": "warm", "interval_low": np.nan, "interval_high": np.nan, "stopped": ""},  # 13
    "attribution": {"depth": 1}, "health": {"depth": 1, **SCHEMA9_HEALTH},
    "profile": {"depth": 1, **{c: np.nan for c in PROFILE_SCHEMA11}},  # not recorded before schema 11
    "ceilings": {"flops": 0, "flops_per_second": 0.0, "clock": "host_wall"},  # clock: schema 8
    "variants": {"depth": 1, "compute_ceiling": "", "peak_device_bytes": -1, "tuned_parameters": ""},
}
LEGACY_NOT_STEADY_STATE = ("cold_compile",)  # the experiments' steady_state, for archives that do not store it
TABLES = tuple(t["table"] for t in SCHEMA["tables"])  # the profile: written by kstudy profile only ("optional")
COLUMNS = {t["table"]: [f["name"] for f in t["fields"]] for t in SCHEMA["tables"]}
# The columns that say which problem point a row measured, beside its experiment, variant and timer (`kstudy
# schema`'s point_key, from src/archive/archive_schema.cpp): every join, grouping and de-duplication of points reads
# its columns from here, so that no reader forgets one (issue 42: GEMM points differing only in k, `depth`, were
# joined together). A table stores a subset of them (point_key(table)).
POINT_KEY = tuple(SCHEMA["point_key"])
# The point key's problem extents, first axis first (an operation's axes in order: rows x features, GEMM's m x n x
# k, attention's heads x tokens x head_dim; schema 7 added the third); the other point columns say how the point
# was measured (layout, host memory, copy direction, threads per block, cache mode).
EXTENTS = ("rows", "features", "depth")
# A host<->device copy (timer `transfer`: no extents, layout or block size) is told apart by its size (`bytes`) and
# these point-key columns, in the order the transfer tables show them.
COPY_KEY = ("direction", "memory_kind")
if not set(EXTENTS + COPY_KEY) <= set(POINT_KEY):
    raise ImportError(f"archive_schema.json's point_key {POINT_KEY} lacks a column of {EXTENTS} or {COPY_KEY}")


def point_key(table=None, without=()):
    """The point key's columns (POINT_KEY, in its order) that `table` stores (every one without a table), less
    `without`: e.g. point_key("variants") for the variant's modelled point, point_key("profile") for a profiled call.
    """
    stored = COLUMNS[table] if table else POINT_KEY
    return [c for c in POINT_KEY if c in stored and c not in without]


# Columns renamed since (schema 10: the gate table's counts, as kstudy::gate_result names them): former -> current.
RENAMED_COLUMNS = {t["table"]: {f["former_name"]: f["name"] for f in t["fields"] if f.get("former_name")}
                   for t in SCHEMA["tables"]}
GATE_VERDICTS = ("passed", "failed", "not_gated")  # samples.gate (kstudy::gate_verdict)
# NVML clocks-event reasons that flag a sample as throttled (kstudy/gpu_health.hpp): SW power cap, HW slowdown,
# SW thermal, HW thermal, HW power brake; not GPU idle (0x1) or application clocks (0x2).
SLOWDOWN_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
# SLOWDOWN_MASK's bits as kstudy/gpu_health.hpp names them (the health table's `reasons` text uses the same names).
SLOWDOWN_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                    0x80: "hw_power_brake"}


def slowdown_reasons(bits):
    """The names of the slowdown reasons set in one NVML clocks-event bitmask (samples.throttle_reasons; -1, no
    reading, names none)."""
    bits = int(bits)
    return [name for bit, name in SLOWDOWN_REASONS.items() if bits > 0 and bits & bit]


REFERENCE = "cpu_reference"


# A gated number above a roof of its own run and clock: the roof is understated, and the share means nothing.
ROOF_EXCEEDED = "roof exceeded (the roof is understated)"


# A roof is the median of a few runs; a variant running the roof's own code lands on either side of it by that
# noise. Above the roof by more than this fraction the share reads ROOF_EXCEEDED; within it, the whole roof
# (kstudy::roof_tolerance in src/include/kstudy/ceilings.hpp: the console and kstudy_bench apply the same rule).
ROOF_TOLERANCE = 0.01


# A host cache level's roof is measured at this share of the level's capacity and bounds the points whose working
# set fits the whole level (kstudy::host_cache_fill in src/include/kstudy/ceilings.hpp; Archive.host_roof).
HOST_CACHE_FILL = 0.5


def is_host_roof(name):
    """host_read and its cache levels' roofs (host_read_l1, ...): bandwidths of the host."""
    return isinstance(name, str) and (name == "host_read" or name.startswith("host_read_l"))


def roof_share(percent, spec=".0f"):
    """A share of a roof for report.md: '' when unknown, ROOF_EXCEEDED above 100% + ROOF_TOLERANCE, else the
    percentage (at most 100)."""
    if percent is None or not np.isfinite(percent):
        return ""
    if percent > 100 * (1 + ROOF_TOLERANCE):
        return ROOF_EXCEEDED
    return f"{min(percent, 100.0):{spec}}%"


# The timers as kstudy declares them (KSTUDY_TIMER_KINDS, exported by `kstudy schema`): name -> clock, scope and
# description. Archives before schema 10 named layout_conversion's timer `transpose`.
TIMERS = {t["name"]: t for t in SCHEMA["timers"]}
LEGACY_TIMERS = {"transpose": "layout_conversion"}
# Timers from host input to host-visible output, transfers included (scope host_in_host_out).
HOST_IN_HOST_OUT = tuple(name for name, t in TIMERS.items() if t["scope"] == "host_in_host_out")


def timer_info(timer):
    return TIMERS[LEGACY_TIMERS.get(timer, timer)]


def clock_of(timer):
    """The clock a timer reads (kstudy::clock_of, the declared clock): CUDA events for device_events, the host clock
    for the others. A number is divided only by a roof timed on its own clock (ceilings.clock, schema 8)."""
    return timer_info(timer)["clock"]


# Schemas 1 to 4 knew one operation: their sweeps (kind "scoring") and cold starts time it over rows x features.
LEGACY_OPERATION = "scoring"
LEGACY_AXES = ("rows", "features")
# The sweep kind was named after its only operation (before schema 5); the layout conversion kind was named
# `transpose` (before schema 10), which is an operation now.
LEGACY_KIND_NAMES = {"scoring": "sweep", "transpose": "layout_conversion"}
# Kinds whose experiments time an operation's variants; the others (transfer, launch, transpose) time none.
OPERATION_KINDS = ("sweep", "cold_compile")
# Definition keys holding integer lists that are not problem axes (the fallback reading of axis names).
NON_AXIS_KEYS = {"block_sizes", "sizes_bytes", "row_padding"}
FLOPS_PER_ELEMENT = 5  # sub, mul, 2 compares (clip), fma (weight + row sum)
FLOAT_BYTES = 4
OUTPUT_BYTES_PER_ROW = 4 + 1  # float score + uint8 flag


class ArchiveError(Exception):
    """An archive that cannot be read as a kstudy archive; exit code 2."""


# Every group and dataset a kstudy writer closed carries the SHA-256 of what is read from it (see
# src/archive/detail/hdf5_digest.hpp for why, and for the canonical stream computed here byte for byte):
# HDF5 does not check attributes, names or variable-length strings, so without it a flipped bit there
# would read back as a plausible wrong value.
DIGEST_ATTRIBUTE = "kstudy_sha256"


def _u64(n):
    return struct.pack("<Q", n)


def _attribute_bytes(value):
    if isinstance(value, bytes):
        return value.split(b"\0", 1)[0]
    if isinstance(value, np.bytes_):
        return bytes(value).split(b"\0", 1)[0]
    return value.encode("utf-8")


def object_digest(obj):
    """The SHA-256 (hex) of one group's or dataset's canonical stream, as the C++ writer computes it."""
    h = hashlib.sha256(b"kstudy-digest-1\0")
    names = sorted(obj.attrs.keys(), key=lambda n: n.encode("utf-8"))
    for name in names:
        if name == DIGEST_ATTRIBUTE:
            continue
        value = obj.attrs[name]
        if not isinstance(value, (str, bytes, np.bytes_)):
            continue  # the schema writes only strings; another tool's numbers are not ours to vouch for
        data = _attribute_bytes(value)
        h.update(name.encode("utf-8") + b"\0" + _u64(len(data)) + data)
    if isinstance(obj, h5py.Dataset):
        h.update(b"rows\0" + _u64(obj.size))
        if obj.dtype.names and obj.size:
            rows = obj[()]
            for name in obj.dtype.names:
                h.update(name.encode("utf-8") + b"\0")
                column = rows[name]
                if column.dtype == object:
                    for v in column:
                        data = _attribute_bytes(v) if v is not None else b""
                        h.update(_u64(len(data)) + data)
                else:
                    h.update(np.ascontiguousarray(column, dtype=column.dtype.newbyteorder("<")).tobytes())
    else:
        h.update(b"links\0")
        for name in sorted((n.encode("utf-8") for n in obj.keys())):
            h.update(name + b"\0")
    return h.hexdigest()


def damaged_objects(f):
    """Names of the objects whose stored digest no longer matches their content (reads every dataset)."""
    damaged = []

    def check(name, obj):
        if DIGEST_ATTRIBUTE in obj.attrs and text(obj.attrs[DIGEST_ATTRIBUTE]) != object_digest(obj):
            damaged.append("/" + name)

    check("", f)
    f.visititems(check)
    return damaged


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def frame(dataset):
    """A compound dataset as a DataFrame; h5py 3 returns variable-length strings in compound rows as bytes."""
    df = pd.DataFrame(dataset[:])
    for column in df.columns:
        if df[column].dtype == object:
            df[column] = df[column].map(text)
    return df


def with_gate_verdict(samples):
    """Samples with both gate columns whatever the schema: `gate` (passed, failed or not_gated; versions 1 to 3
    stored gate_passed, read as passed / failed) and `gate_passed` (1 unless the gate failed: what versions 1
    to 3 stored, calibration samples included, kept for readers written before schema 4)."""
    if "gate" not in samples.columns and "gate_passed" in samples.columns:
        samples["gate"] = np.where(samples.gate_passed == 1, "passed", "failed")
    elif "gate" in samples.columns and "gate_passed" not in samples.columns:
        samples["gate_passed"] = (samples.gate != "failed").astype(np.uint8)
    return samples


def kind_of(definition):
    """The experiment kind under its current name (LEGACY_KIND_NAMES)."""
    kind = definition.get("kind", "")
    return LEGACY_KIND_NAMES.get(kind, kind)


def operations_of(definition):
    """The operations an experiment times: the definition's "operation" (a name or a list; schema 5), the
    legacy scoring operation for a schema 1 to 4 sweep or cold start, none for the other kinds."""
    named = definition.get("operation")
    if isinstance(named, str):
        return [named]
    if isinstance(named, list):
        return [str(n) for n in named]
    return [LEGACY_OPERATION] if kind_of(definition) in OPERATION_KINDS else []


def axes_of(definition, operations, variants):
    """The experiment's axis names, first extent first. The variants table's `axes` column says it where the
    archive has one (the definition's keys are stored sorted, so their order is not the axes'); a legacy
    experiment's are rows, features; otherwise the definition's integer-list keys that are no known setting."""
    if "axes" in variants.columns and len(variants):
        return variants["axes"].iloc[0].split(",")
    if operations == [LEGACY_OPERATION]:
        return list(LEGACY_AXES)
    if not operations:
        return []
    keys = [k for k, v in definition.items() if k not in NON_AXIS_KEYS and isinstance(v, list) and v
            and all(isinstance(x, int) for x in v)]
    first = {axis: i for i, axis in enumerate(LEGACY_AXES)}  # rows before features; any other by name
    return sorted(keys, key=lambda k: (first.get(k, len(first)), k))


def with_axes_column(variants):
    """A variants table with its `axes` column; schema 4 tables predate it and describe scoring variants."""
    if len(variants.columns) and "axes" not in variants.columns:
        variants.insert(variants.columns.get_loc("operation") + 1, "axes", ",".join(LEGACY_AXES))
    return variants


def with_schema7_columns(table_name, table):
    """A table with the columns schema 7 added (SCHEMA7_DEFAULTS), filled where an older archive lacks them, and
    the columns schema 10 renamed under their current names."""
    if len(table.columns):
        table = table.rename(columns=RENAMED_COLUMNS.get(table_name, {}))
        for column, default in SCHEMA7_DEFAULTS.get(table_name, {}).items():
            if column not in table.columns:
                table[column] = default
    return table


def with_rung_column(variants):
    """A variants table with its `rung` column (the variant's position on its operation's kernel ladder, 0 =
    not a rung); schema 4 and 5 tables predate it: every variant reads as 0."""
    if len(variants.columns) and "rung" not in variants.columns:
        at = variants.columns.get_loc("kernels_launched") + 1 if "kernels_launched" in variants.columns else len(
            variants.columns)
        variants.insert(at, "rung", np.zeros(len(variants), dtype=np.int32))
    return variants


class Experiment:
    def __init__(self, archive, name, contents):
        self.archive = archive
        self.name = name
        attributes = contents["attributes"]
        self.definition_text = attributes.get("definition", "{}")
        self.protocol_text = attributes.get("protocol", "{}")
        self.fingerprint = attributes.get("fingerprint", "")
        try:
            self.definition = json.loads(self.definition_text)
        except ValueError:
            self.definition = {}
        self.kind = kind_of(self.definition)
        # What the writer's registries knew (kstudy/runner/experiment_facts.hpp); archives written before store neither,
        # and there the one kind that times first calls in fresh processes was cold_compile.
        steady = attributes.get("steady_state", "")
        self.steady_state = steady == "true" if steady else self.kind not in LEGACY_NOT_STEADY_STATE
        self.headline_points = {op: tuple(int(x) for x in (list(p) + [1, 1, 1])[:3])
                                for op, p in json.loads(attributes.get("headline_points", "{}")).items()}
        tables = contents["tables"]
        self.samples = with_gate_verdict(tables["samples"])
        if len(self.samples) and "timer" in self.samples:  # the layout conversion's timer before schema 10
            self.samples["timer"] = self.samples["timer"].replace({"transpose": "layout_conversion"})
        self.gate = tables["gate"]
        self.ceilings = tables["ceilings"]
        self.summary = tables["summary"]
        self.attribution = tables["attribution"]
        self.health = tables["health"]  # empty before schema 3
        self.has_health_table = contents["has_health_table"]
        # One row per (variant, rows, features, block_size) measured: family, layout, fusion level, traffic
        # and flop models as the C++ code knows them; empty before schema 4.
        self.variants = with_rung_column(with_axes_column(tables["variants"]))
        self.operations = operations_of(self.definition)
        self.axes = axes_of(self.definition, self.operations, self.variants)
        self.profile = tables["profile"]
        self.profile_attrs = contents["profile_attributes"]
        if not self.samples.empty:
            self.samples.insert(0, "archive", archive.label)

    @staticmethod
    def contents(group):
        """What an experiment's group holds, read whole (Archive reads a file in a child process and takes
        this back): its attributes as text, its tables as frames, the profile's attributes."""
        names = ("definition", "protocol", "fingerprint", "steady_state", "headline_points")
        attributes = {k: text(group.attrs[k]) for k in names if k in group.attrs}
        tables = {t: with_schema7_columns(t, frame(group[t]) if t in group else pd.DataFrame()) for t in TABLES}
        profile_attributes = ({k: text(v) for k, v in group["profile"].attrs.items() if k != DIGEST_ATTRIBUTE}
                              if "profile" in group else {})
        return {"attributes": attributes, "tables": tables, "has_health_table": "health" in group,
                "profile_attributes": profile_attributes}

    @property
    def openmp_threads(self):
        """The OpenMP threads the experiment's samples were timed with, or None where its protocol does not say.
        `kstudy run` times each replication in a fresh process started with the protocol's threads, at most the
        machine's cores (run_replications, src/study/study.cpp: min(protocol.threads, hardware concurrency), which
        the environment records as cpu_cores); the environment's openmp_threads is the parent process's, which
        times nothing."""
        try:
            threads = int(json.loads(self.protocol_text).get("threads"))
        except (TypeError, ValueError, AttributeError):
            return None
        cores = str(self.archive.environment.get("cpu_cores", ""))
        return min(threads, int(cores)) if cores.isdigit() and int(cores) > 0 else threads

    def variant_operations(self):
        """variant -> (operation, axes) for every variant the experiment names: the variants table's columns
        where the archive has one, else the experiment's own operation (a legacy experiment times one)."""
        if len(self.variants):
            return {v: (op, axes) for v, op, axes in
                    zip(self.variants.variant, self.variants.operation, self.variants["axes"])}
        names = self.samples.variant.unique() if len(self.samples) else []
        default = (self.operations[0] if self.operations else "", ",".join(self.axes))
        return {v: default for v in names}

    def accepted(self):
        """Samples that count, as the C++ summary takes them (kstudy::summarised): status ok, a measured trial
        (trial < 0 would be a warm-up), output not rejected by the gate (passed, or a calibration sample with
        nothing to gate)."""
        s = self.samples
        if s.empty:
            return s
        return s[(s.gate != "failed") & (s.status == "ok") & (s.trial >= 0)]


def _in_child(read, path):
    """read(path) run in a forked child, its result pickled back. HDF5 follows some damaged structures past its
    buffers (a string's global heap reference, src/archive/detail/hdf5_global_heap.hpp), and whether that crashes
    depends on the reading process's heap: a file read in this process could kill it, or leave HDF5's shared state
    damaged for the next file. A child that dies refuses the file; this process never opens it."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one read, its answer, and out without running any teardown
        status = 0
        try:
            os.close(reader)
            try:
                payload = pickle.dumps(("ok", read(path)))
            except ArchiveError as error:
                payload = pickle.dumps(("error", str(error)))
            with os.fdopen(writer, "wb") as out:
                out.write(payload)
        except BaseException:  # nothing may escape a forked child: it must not run the parent's code
            status = 1
        finally:
            os._exit(status)
    os.close(writer)
    with os.fdopen(reader, "rb") as answer:
        payload = answer.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not payload:
        how = f"exit status {os.waitstatus_to_exitcode(status)}"
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            how = f"signal {signal.Signals(number).name if number in signal.valid_signals() else number}"
        raise ArchiveError(f"{path}: damaged or unreadable (HDF5 died reading it: {how}); `kstudy salvage {path} "
                           "--out NEW.h5` copies the finished points it can still read into a new archive")
    verdict, value = pickle.loads(payload)
    if verdict == "error":
        raise ArchiveError(value)
    return value


def _read_archive(path):
    """Everything an Archive holds, read from the file at `path` (in _in_child's child)."""
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise ArchiveError(f"{path}: cannot be opened as HDF5 ({error})")
    try:
        with f:
            return Archive._contents(f, path)
    except ArchiveError:
        raise
    except Exception as error:  # h5py, numpy and json errors of a damaged file: one line, never a traceback
        raise ArchiveError(f"{path}: damaged or unreadable ({type(error).__name__}: {error}); "
                           f"`kstudy salvage {path} --out NEW.h5` copies the finished points it can still "
                           "read into a new archive")


class Archive:
    def __init__(self, path, label=None):
        self.path = Path(path)
        self.label = label or self.path.stem
        self.attrs, self.environment, experiments = _in_child(_read_archive, self.path)
        self.schema_version = self.attrs.get("schema_version")
        self.experiments = {name: Experiment(self, name, tables) for name, tables in experiments.items()}

    @staticmethod
    def _contents(f, path):
        """(attributes, environment, {experiment: its group's contents}) of an open archive."""
        damaged = damaged_objects(f)
        if damaged:
            raise ArchiveError(f"{path}: damaged: the content of {', '.join(damaged)} no longer matches the "
                               f"checksum stored when it was written; `kstudy salvage {path} --out NEW.h5` "
                               "copies the finished points it can still read into a new archive")
        attrs = {k: text(v) for k, v in f.attrs.items() if k != DIGEST_ATTRIBUTE}
        if attrs.get("schema_version") is None:
            raise ArchiveError(f"{path}: not a kstudy archive (no schema_version attribute)")
        environment = ({k: text(v) for k, v in f["environment"].attrs.items() if k != DIGEST_ATTRIBUTE}
                       if "environment" in f else {})
        experiments = {name: Experiment.contents(group) for name, group in f["experiments"].items()} \
            if "experiments" in f else {}
        return attrs, environment, experiments

    def ceilings(self):
        """The archive's ceilings (every experiment carries the run's; the first non-empty one wins)."""
        for e in self.experiments.values():
            if not e.ceilings.empty:
                return e.ceilings
        return pd.DataFrame(columns=["name", "bytes", "seconds", "bytes_per_second", "flops", "flops_per_second",
                                     "clock"])

    def ceiling(self, name, clock=None):
        """A bandwidth roof in B/s, or None; with `clock` (a timer name: device_events, host_wall) only a roof
        timed on that clock (schema 8 records both for the device roofs; older roofs are host_wall)."""
        c = self.ceilings()
        hit = c[c.name == name]
        if clock is not None and len(hit):
            hit = hit[hit.clock == clock]
        return float(hit.bytes_per_second.iloc[0]) if len(hit) else None

    def host_roof(self, working_set, clock="host_wall"):
        """The name of the host roof a point moving `working_set` bytes a call is held against: the first cache
        level roof (host_read_l1, _l2, ...) whose level holds it (its measured working set / HOST_CACHE_FILL),
        else host_read (memory); archives from before the level roofs have host_read alone."""
        c = self.ceilings()
        levels = c[c.name.str.startswith("host_read_l") & (c.clock == clock) & (c.bytes > 0)] if len(c) else c
        if len(levels) and working_set == working_set:
            fits = levels[working_set <= levels.bytes / HOST_CACHE_FILL]
            if len(fits):
                return min(fits.name, key=lambda name: int(name[len("host_read_l"):]))
        return "host_read"

    def compute_ceiling(self, name, clock=None):
        """A compute roof (schema 7: device_fp32_fma, cublas_fp32_gemm, ...) in flop/s, or None; with `clock`,
        only one timed on that clock (as ceiling)."""
        c = self.ceilings()
        hit = c[(c.name == name) & (c.flops_per_second > 0)] if len(c) else c
        if clock is not None and len(hit):
            hit = hit[hit.clock == clock]
        return float(hit.flops_per_second.iloc[0]) if len(hit) else None

    def compute_ceilings(self):
        """Every compute roof of the run: name -> flop/s."""
        c = self.ceilings()
        if not len(c):
            return {}
        hit = c[c.flops_per_second > 0]
        return dict(zip(hit.name, hit.flops_per_second.astype(float)))

    def platform(self):
        env = self.environment
        gpu = env.get("gpu_name")
        cpu = env.get("cpu_model")
        return gpu if gpu else (cpu or self.attrs.get("host", self.label))


def load(paths, check_schema=True):
    archives = []
    labels = set()
    for p in paths:
        a = Archive(p)
        # Two archives with the same stem (run/a/study.h5, run/b/study.h5) need distinct labels.
        label, n = a.label, 2
        while label in labels:
            label = f"{a.label}#{n}"
            n += 1
        a.label = label
        for e in a.experiments.values():
            if not e.samples.empty:
                e.samples["archive"] = label
        labels.add(label)
        if check_schema and a.schema_version not in SCHEMA_VERSIONS:
            raise ArchiveError(f"{a.path}: schema_version {a.schema_version!r} is not one this reader knows "
                               f"({', '.join(sorted(SCHEMA_VERSIONS))})")
        archives.append(a)
    return archives


def executed_flops(counters):
    """Floating-point operations executed, from raw counts (profile rows, or their sums over a call's kernels):
    a frame of flops_<precision> per PRECISIONS and `flops`, their total; NaN where no flop counter was recorded
    (archives before schema 11, or ncu refused every flop metric). The weights are FLOP_WEIGHTS."""
    out = pd.DataFrame(index=counters.index)
    for precision in PRECISIONS:
        columns = [(c, w) for c, (p, w) in FLOP_WEIGHTS.items() if p == precision and c in counters.columns]
        if not columns:
            out[f"flops_{precision}"] = np.nan
            continue
        recorded = pd.concat([counters[c].notna() for c, _ in columns], axis=1).any(axis=1)  # any of its counters
        out[f"flops_{precision}"] = sum(counters[c].fillna(0) * w for c, w in columns).where(recorded)
    out["flops"] = out.sum(axis=1, min_count=1)
    return out


def with_derived_counters(calls):
    """Counters of whole calls (raw counts summed over their kernels, profiled_duration_s too) with what derives
    from them: executed flops per precision and in total (executed_flops), dram_bytes, achieved_flop_per_s =
    flops / profiled_duration_s (an instrumented duration: it puts the counters in proportion, never a timing),
    measured_intensity = flops / DRAM bytes, dominant_precision (the precision of most flops) and spill_bytes
    (local-memory loads + stores)."""
    out = pd.concat([calls, executed_flops(calls)], axis=1)
    out["dram_bytes"] = out.dram_bytes_read + out.dram_bytes_written
    out["achieved_flop_per_s"] = out.flops / out.profiled_duration_s.where(out.profiled_duration_s > 0)
    out["measured_intensity"] = out.flops / out.dram_bytes.where(out.dram_bytes > 0)
    per_precision = out[[f"flops_{p}" for p in PRECISIONS]].fillna(0)
    out["dominant_precision"] = np.where(out.flops > 0, per_precision.idxmax(axis=1).str[len("flops_"):], "")
    out["spill_bytes"] = out.local_load_bytes + out.local_store_bytes
    return out


def stats(samples, keys):
    """Median, quartiles (linear interpolation, as the C++ summary), min, max and count per group."""
    if samples.empty:
        return pd.DataFrame(columns=list(keys) + ["n", "median", "q1", "q3", "min", "max"])
    g = samples.groupby(list(keys), dropna=False).seconds
    out = pd.DataFrame({
        "n": g.size(),
        "median": g.median(),
        "q1": g.quantile(0.25),
        "q3": g.quantile(0.75),
        "min": g.min(),
        "max": g.max(),
    }).reset_index()
    return out


def family(variant):
    """Variant name without its @backend."""
    return variant.split("@", 1)[0]


def backend(variant):
    return variant.split("@", 1)[1] if "@" in variant else ""


LAYOUT_TOKENS = ("row_major", "feature_major", "padded")


def split_layout(variant):
    """fused_cuda_row_major_tiled@cuda -> ('fused_cuda', 'row_major', 'tiled', 'cuda')."""
    name, back = family(variant), backend(variant)
    for token in LAYOUT_TOKENS:
        marker = "_" + token
        i = name.find(marker)
        if i >= 0:
            rest = name[i + len(marker):].lstrip("_")
            return name[:i], token, rest, back
    return name, "", "", back


def is_reference(variant):
    return family(variant) == REFERENCE


def is_device_timer(timer):
    """A device variant's timing of its operation: resident, or host in, host out."""
    return timer_info(timer)["scope"] in ("resident", "host_in_host_out")


def boundary(timer, memory_kind):
    """A timing boundary label: the timer, plus the host memory kind for host-in/host-out timers."""
    if memory_kind in ("pageable", "pinned") and timer in HOST_IN_HOST_OUT:
        return f"{timer} {memory_kind}"
    return timer


def essential_bytes(rows, features):
    """x read once, the three feature vectors read once, score and flag written once (variant_registry.cpp)."""
    return rows * features * FLOAT_BYTES + 3 * features * FLOAT_BYTES + rows * OUTPUT_BYTES_PER_ROW


def flops(rows, features):
    """kstudy::essential_flops (variant.hpp); schema 4 archives also store it per row of the variants table."""
    return FLOPS_PER_ELEMENT * rows * features


def upload_bytes(rows, features, pitch):
    return rows * max(pitch, features) * FLOAT_BYTES + 3 * features * FLOAT_BYTES


def download_bytes(rows):
    return rows * OUTPUT_BYTES_PER_ROW


def fmt_seconds(s):
    if s is None or not np.isfinite(s):
        return "n/a"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_rows(n):
    return f"{int(n):,}"


def fmt_extent(n):
    """A one-axis extent: a power of two as 2^k (STREAM sizes), any other with thousands separators."""
    n = int(n)
    return f"2^{n.bit_length() - 1}" if n >= 1024 and n & (n - 1) == 0 else fmt_rows(n)


def point_label(rows, features, axes, depth=1):
    """A problem point as a reader knows it: n=2^20 for a one-axis operation, 1,048,576×16 for rows × features,
    4096×4096×4096 for three axes (gemm: m × n × k). `rows`, `features`, `depth`: the archive's extents in
    order; `axes`: the comma-separated axis names."""
    names = str(axes).split(",") if isinstance(axes, str) and axes else list(LEGACY_AXES)
    if len(names) == 1:
        return f"{names[0]}={fmt_extent(rows)}"
    if len(names) == 3:
        return f"{int(rows)}×{int(features)}×{int(depth)}"
    return f"{fmt_rows(rows)}×{int(features)}"


def ceiling_gbps(context, name, clock="device_events"):
    """A bandwidth roof from kstudy_bench's JSON context: keyed by name and clock since schema 8
    (ceiling_<name>_<clock>_GBps; the host roofs and transfers are on the host clock), by name alone before."""
    for key in (f"ceiling_{name}_{clock}_GBps", f"ceiling_{name}_host_wall_GBps", f"ceiling_{name}_GBps"):
        if key in context:
            return float(context[key])
    raise KeyError(f"kstudy_bench JSON has no ceiling {name}")
