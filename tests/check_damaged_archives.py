#!/usr/bin/env python3
"""Damaged archives never crash a reader; kstudy salvage recovers what is intact.

A real archive (tests/shard_tiny.json, shard 0/2, made here with this kstudy) is damaged the ways a copy or a
shared file system damages files: cut short at 10 points, bytes flipped in the superblock, inside a dataset's
raw chunk, in object headers, B-tree nodes, local and global heaps (found by signature and by h5py offsets),
in an attribute value and in a group member's name; a global heap object's stored length pushed past its
collection, a collection's size cut under HDF5's least, a string attribute's reference to a heap object that is
not there and one whose length is cut under its object's (HDF5 1.10 follows these without checking them, so they
are refused from the file's bytes before HDF5 reads them). Every reader is run on each: report, compare, merge (as a
shard), run --resume. Each must exit non-zero with stderr naming the file, or exit 0 with exactly the undamaged
file's output (damage in bytes nothing reads; for --resume, the undamaged file's finished units, since it salvages
what it can, keeps the damaged original beside it and measures the rest again); never a traceback, a signal death
or a hang. Silent wrong data is
what HDF5 alone lets through (attributes, names and variable-length strings carry no checksum in the file
format kstudy writes): the writer stores a SHA-256 per group and dataset and every reader checks it
(src/archive/detail/hdf5_digest.hpp), and the flips below into strings and names are the cases that prove it.
Then salvage on each: a clean error, or a new archive that report reads and run --resume completes to the
undamaged archive's units.
Usage: check_damaged_archives.py KSTUDY_EXE SOURCE_DIR   (exit 77: h5py missing)
KSTUDY_DAMAGE_READERS=merge,resume (a comma list) runs those readers alone, and salvage without its report: the
sanitized suite's setting: kstudy report and compare exec Python, so they add no sanitized code, only time (the
plain suite runs every reader)."""
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import h5py
except ImportError:
    print("skipped: h5py missing")
    sys.exit(77)

kstudy, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
tiny = os.path.join(src, "tests", "shard_tiny.json")
work = tempfile.mkdtemp(prefix="kstudy-damage-")
env = dict(os.environ, KSTUDY_CEILING_BYTES="33554432", OMP_NUM_THREADS="2", OMP_PROC_BIND="false",
           KSTUDY_QUIET="1", MPLBACKEND="Agg")
failures = []


def run(args, timeout=60):
    try:
        p = subprocess.run([kstudy] + args, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "timeout"


def units(path):
    with h5py.File(path, "r") as f:
        if "/experiments/shard_tiny/samples" not in f:
            return []
        s = f["/experiments/shard_tiny/samples"][()]
        return sorted(set(zip(s["point"].tolist(), s["replication"].tolist())))


def samples(path):
    # NaN stands for "not measured" (energy without NVML) and never equals itself: compared as a word instead.
    def comparable(row):
        return tuple("nan" if isinstance(x, float) and x != x else x for x in row)

    with h5py.File(path, "r") as f:
        return sorted(map(comparable, f["/experiments/shard_tiny/samples"][()].tolist()))


def csv_tables(directory):
    return {n: open(os.path.join(directory, n)).read() for n in sorted(os.listdir(directory)) if n.endswith(".csv")}


os.mkdir(os.path.join(work, "good"))
good = os.path.join(work, "good", "shard.h5")  # every archive is a shard.h5: reports label them by file name
rc, _, err = run(["run", tiny, "--shard", "0/2", "--out", good, "-q"])
if rc != 0:
    print(f"FAIL: making the archive: {err}")
    sys.exit(1)
data = open(good, "rb").read()


# Each reader: (name, command for an archive, what its successful output is, compared with the undamaged one's).
def report(path, tag):
    out = os.path.join(work, "report-" + tag)
    shutil.rmtree(out, ignore_errors=True)
    rc, o, e = run(["report", path, "--out", out])
    return rc, e, (csv_tables(out) if rc == 0 else None)


def compare(path, tag):
    rc, o, e = run(["compare", good, path])
    return rc, e, o if rc == 0 else None


def merge(path, tag):
    out = os.path.join(work, "merged-" + tag + ".h5")
    rc, o, e = run(["merge", "--partial", "--overwrite", out, path])
    return rc, e, (samples(out) if rc == 0 else None)


def resume(path, tag):
    # --resume completes a damaged archive from what salvage keeps, with the damaged original set aside unchanged:
    # its output is the finished units (the re-measured ones have new seconds), and it must say what it did.
    copy = os.path.join(work, "resume-" + tag + ".h5")
    shutil.copyfile(path, copy)
    rc, o, e = run(["run", tiny, "--shard", "0/2", "--resume", "--out", copy, "-q"])
    if rc == 0 and "the damaged file is now" in e:
        aside = copy + ".damaged"
        if not os.path.exists(aside) or open(aside, "rb").read() != open(path, "rb").read():
            return 1, f"{path}: --resume recovered it but did not keep the damaged original unchanged", None
        with h5py.File(copy, "r") as f:
            if f.attrs.get("complete") not in (True, "true", b"true"):
                return 1, f"{path}: --resume recovered it but the archive is not marked complete", None
    if rc != 0:
        return rc, e.replace(copy, path), None
    try:
        return rc, e.replace(copy, path), units(copy)
    except (OSError, RuntimeError) as error:  # exit 0 yet an archive that does not read: never acceptable
        return 1, f"{path}: --resume exited 0 but left an archive h5py cannot read ({error}); stderr: {e}", None


readers = {"report": report, "compare": compare, "merge": merge, "resume": resume}
chosen = [r for r in os.environ.get("KSTUDY_DAMAGE_READERS", ",".join(readers)).split(",") if r]
unknown = sorted(set(chosen) - set(readers))
if unknown:
    print(f"FAIL: KSTUDY_DAMAGE_READERS names no reader: {', '.join(unknown)} (readers: {', '.join(readers)})")
    sys.exit(1)
readers = {name: readers[name] for name in chosen}
baseline = {}
for name, reader in readers.items():
    rc, e, out = reader(good, "good")
    if rc != 0:
        print(f"FAIL: {name} of the undamaged archive: rc={rc}: {e}")
        sys.exit(1)
    baseline[name] = out


# --- the corpus ----------------------------------------------------------------------------------------------
def flip(offset, mask=0xFF):
    d = bytearray(data)
    d[offset] ^= mask
    return bytes(d)


corpus = {}
for i in range(1, 11):  # cut short at 10 points through the file
    corpus[f"cut-{i}0pct"] = data[: len(data) * i // 10 - (1 if i == 10 else 0)]
for off in (0, 8, 13, 40):  # superblock: signature, version, size of offsets, end-of-file address
    corpus[f"superblock-{off}"] = flip(off)
with h5py.File(good, "r") as f:
    samples_chunk = f["/experiments/shard_tiny/samples"].id.get_chunk_info(0)
    gate_chunk = f["/experiments/shard_tiny/gate"].id.get_chunk_info(0)
    headers = {n: h5py.h5o.get_info(f[n].id).addr for n in
               ("/experiments/shard_tiny/samples", "/experiments/shard_tiny", "/environment")}
    fingerprint = f["/experiments/shard_tiny"].attrs["fingerprint"]
corpus["raw-samples-chunk"] = flip(samples_chunk.byte_offset + samples_chunk.size // 2, 0x01)
corpus["raw-gate-chunk"] = flip(gate_chunk.byte_offset + 7, 0x10)
for name, addr in headers.items():  # v1 object headers: message table, then the messages themselves
    for delta in (2, 60):
        corpus[f"header-{name.replace('/', '_')}-{delta}"] = flip(addr + delta, 0x04)
for signature in (b"TREE", b"HEAP", b"SNOD", b"GCOL"):  # B-tree nodes, local heaps, symbol tables, global heaps
    at = data.find(signature)
    corpus[f"{signature.decode()}-signature"] = flip(at)
    corpus[f"{signature.decode()}-body"] = flip(at + 24, 0x01)
at = data.find(b"GCOL")  # a global heap collection: header (signature, version, size), then objects
length = int.from_bytes(data[at + 24:at + 32], "little")  # the first object's stored length
corpus["GCOL-object-length"] = data[:at + 24] + (length + 8192).to_bytes(8, "little") + data[at + 32:]
corpus["GCOL-collection-size"] = data[:at + 8] + (64).to_bytes(8, "little") + data[at + 16:]
# A string attribute's stored reference (length, collection address, object index) to an object of that
# collection: its index pointed past the collection's objects, and its length cut under the object's.
end, p, reference = at + int.from_bytes(data[at + 8:at + 16], "little"), at + 16, -1
while reference < 0 and p + 16 <= end:
    index, size = int.from_bytes(data[p:p + 2], "little"), int.from_bytes(data[p + 8:p + 16], "little")
    if index == 0:
        break  # free space: the collection's objects end here
    reference = data.find(size.to_bytes(4, "little") + at.to_bytes(8, "little") + index.to_bytes(4, "little"))
    p += 16 + (size + 7) // 8 * 8
assert reference >= 0, "no string attribute refers to the first global heap collection"
corpus["reference-index"] = data[:reference + 12] + (60000).to_bytes(4, "little") + data[reference + 16:]
corpus["reference-length"] = data[:reference] + (1).to_bytes(4, "little") + data[reference + 4:]
at = data.find(fingerprint.encode() if isinstance(fingerprint, str) else fingerprint)  # an attribute value
corpus["attribute-value"] = flip(at + 3, 0x01)
at = data.find(b"shard_tiny\0")  # a group member's name in a local heap
corpus["member-name"] = flip(at + 2, 0x01)
at = data.find(b"cpu_reference")  # a variable-length string inside a table's rows (global heap)
corpus["row-string"] = flip(at + 1, 0x01)


def check(tag, content):
    """Every reader and salvage on one damaged file: (lines to print, failures)."""
    lines, failures = [], []
    os.mkdir(os.path.join(work, tag))
    path = os.path.join(work, tag, "shard.h5")
    open(path, "wb").write(content)
    for name, reader in readers.items():
        rc, e, out = reader(path, tag)
        what = f"{name} of {tag}"
        if rc is None:
            failures.append(f"{what}: hung (timeout)")
        elif rc < 0 or rc >= 128:
            failures.append(f"{what}: died (rc={rc}): {e[-300:]}")
        elif "Traceback" in e:
            failures.append(f"{what}: a Python traceback: {e[-300:]}")
        elif rc == 0 and out != baseline[name]:
            failures.append(f"{what}: exit 0 with output other than the undamaged archive's (silent wrong data)")
        elif rc != 0 and path not in e:
            failures.append(f"{what}: rc={rc} but stderr does not name the file: {e.strip()[-300:]}")
        elif rc != 0 and len([line for line in e.strip().splitlines() if line.strip()]) > 3:
            failures.append(f"{what}: not a short error: {e.strip()[-300:]}")
        else:
            lines.append(f"ok: {what}: rc={rc}" + (f": {e.strip().splitlines()[-1][:160]}" if rc else " (same output)"))
    # salvage: a clean refusal, or an archive that report reads and --resume completes to the undamaged units.
    out = os.path.join(work, "salvaged-" + tag + ".h5")
    rc, o, e = run(["salvage", path, "--out", out])
    if rc is None or rc < 0 or rc >= 128 or (rc != 0 and path not in e):
        failures.append(f"salvage of {tag}: rc={rc}: {e.strip()[-300:]}")
        return lines, failures
    if rc != 0:
        lines.append(f"ok: salvage of {tag} refused: {e.strip().splitlines()[-1][:160]}")
        return lines, failures
    kept = len(units(out))
    r2, e2 = 0, ""
    if "report" in readers:
        r2, _, e2 = run(["report", out, "--out", os.path.join(work, "report-salvaged-" + tag)])
    r3, _, e3 = run(["run", tiny, "--shard", "0/2", "--resume", "--out", out, "-q"])
    if r2 != 0 or r3 != 0:
        failures.append(f"salvage of {tag}: report rc={r2} ({e2.strip()[-200:]}), resume rc={r3} ({e3.strip()[-200:]})")
    elif units(out) != units(good):
        failures.append(f"salvage of {tag} then --resume: units {units(out)} != {units(good)}")
    else:
        with h5py.File(out, "r") as f:
            complete = f.attrs.get("complete")
        lines.append(f"ok: salvage of {tag}: {kept} units kept, --resume completed it (complete={complete})")
    return lines, failures


# Two at a time: the CI machine has two cores, and most of a reader's time is its own start-up.
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    for lines, found in pool.map(lambda item: check(*item), corpus.items()):
        print("\n".join(lines))
        failures += found

shutil.rmtree(work, ignore_errors=True)
for f in failures:
    print("FAIL:", f)
print(f"{len(corpus)} damaged files x {len(readers)} readers + salvage: {len(failures)} failures")
sys.exit(1 if failures else 0)
