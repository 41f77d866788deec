#!/usr/bin/python3
"""`kstudy compare --by device` and the CLI of a study over a node's GPUs, without GPUs:
  - a synthetic schema 12 archive, one point measured on two devices with known medians: per device n, median
    and IQR, spread = slow median / fast median, the slowest device named;
  - end to end with fake devices (KSTUDY_FAKE_DEVICES): `kstudy run --devices all --replicate-on-every-device`
    merges one archive whose samples name both devices, and compare --by device reads it;
  - refusals: an archive without device columns (exit 1), --replicate-on-every-device without --devices, and
    `kstudy p2p` in the cpu flavour (exit 69, one line).

usage: check_compare_devices.py KSTUDY SOURCE_DIR FLAVOUR
Exit 77 (ctest: skipped) when this python lacks h5py, pandas, numpy or scipy.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import h5py
    import numpy as np
    import pandas  # noqa: F401  (compare needs it)
    import scipy  # noqa: F401
except ImportError as error:
    print(f"skipped: {error}")
    sys.exit(77)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_archive as S  # noqa: E402

STRING = h5py.string_dtype("utf-8")
FAKE = ("GPU-aaaa-0,0000:01:00.0,Fake H200;GPU-bbbb-1,0000:02:00.0,Fake H200;"
        "GPU-cccc-2,0000:03:00.0,Fake H200,fail: Xid 79")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def run(kstudy, *args, env=None):
    p = subprocess.run([kstudy, *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def with_devices(path, devices):
    """Rewrites the samples of a synthetic archive as schema 12, replication r on devices[r]."""
    with h5py.File(path, "r+") as h5:
        samples = h5["experiments/synthetic/samples"][:]
        columns = {"device_uuid": [], "device_pci_bus_id": [], "device_model": []}
        for r in samples["replication"]:
            uuid, bus = devices[r]
            columns["device_uuid"].append(uuid)
            columns["device_pci_bus_id"].append(bus)
            columns["device_model"].append("Fake H200")
        dtype = [(n, samples.dtype[n]) for n in samples.dtype.names] + [(n, STRING) for n in columns]
        table = np.empty(len(samples), dtype=dtype)
        for n in samples.dtype.names:
            table[n] = samples[n]
        for n, values in columns.items():
            table[n] = values
        del h5["experiments/synthetic/samples"]
        h5["experiments/synthetic"].create_dataset("samples", data=table)
        h5.attrs["schema_version"] = "14"


def main():
    kstudy, source, flavour = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # Device 1 is 1.5x slower than device 0 at the one point; device 0's samples spread more.
        fast = np.array([1.0, 1.1, 0.9, 1.0, 1.2, 0.8, 1.0, 1.0]) * 1e-3
        slow = np.full(8, 1.5e-3)
        synthetic = S.write(str(tmp / "two.h5"), {("composed@serial", 4096, 16, "host_wall"): [fast, slow]})
        with_devices(synthetic, [("GPU-aaaa-0", "0000:01:00.0"), ("GPU-bbbb-1", "0000:02:00.0")])
        rc, out, err = run(kstudy, "compare", synthetic, "--by", "device", "--out", str(tmp / "d.csv"))
        check(rc == 0, f"compare --by device: exit {rc}: {err}")
        table = pandas.read_csv(tmp / "d.csv")
        check(sorted(table.device_pci_bus_id) == ["0000:01:00.0", "0000:02:00.0"], f"devices: {table}")
        d0 = table[table.device_pci_bus_id == "0000:01:00.0"].iloc[0]
        d1 = table[table.device_pci_bus_id == "0000:02:00.0"].iloc[0]
        check(d0.n == 8 and d1.n == 8, f"n per device: {table}")
        check(abs(d0["median"] - 1.0e-3) < 1e-12 and abs(d1["median"] - 1.5e-3) < 1e-12, f"medians: {table}")
        check(abs(d0.iqr - (np.quantile(fast, 0.75) - np.quantile(fast, 0.25))) < 1e-12 and d1.iqr == 0, "IQR")
        check(abs(d0.spread - 1.5) < 1e-9, f"spread: {d0.spread}")
        check("largest spread: 1.500" in out and "0000:02:00.0 slowest" in out, out)
        print("ok: compare --by device on a synthetic archive: medians, IQR, spread 1.500, slowest named")

        # The report's section: the spread, and the peer-to-peer ceilings as matrices.
        with h5py.File(synthetic, "r+") as h5:
            ceilings = np.array([("p2p_copy_0_1_peer", 1 << 30, 0.004, 2.5e11, 0, 0.0, "device_events"),
                                 ("p2p_copy_1_0_staged", 1 << 30, 0.05, 2.0e10, 0, 0.0, "device_events")],
                                dtype=[("name", STRING), ("bytes", "<i8"), ("seconds", "<f8"),
                                       ("bytes_per_second", "<f8"), ("flops", "<i8"), ("flops_per_second", "<f8"),
                                       ("clock", STRING)])
            h5["experiments/synthetic"].create_dataset("ceilings", data=ceilings)
        rc, out, err = run(kstudy, "report", synthetic, "--out", str(tmp / "report"))
        check(rc == 0, f"report: exit {rc}: {err}")
        md = (tmp / "report/report.md").read_text()
        check("## GPUs of one node" in md and "largest 1.500" in md, md[:3000])
        check("| 0 | - | 250.0 |" in md and "| 1 | 20.0 | - |" in md and "| 1 | n/a | - |" in md, md)
        check((tmp / "report/device_spread.csv").exists() and (tmp / "report/p2p_ceilings.csv").exists(), "CSVs")
        print("ok: the report's section: spread and the peer-to-peer matrices (peer and staged)")

        # An archive before schema 12 names no device.
        old = S.write(str(tmp / "old.h5"), {("composed@serial", 4096, 16, "host_wall"): fast})
        rc, out, err = run(kstudy, "compare", old, "--by", "device")
        check(rc == 1 and "no sample names its device" in err, f"old archive: exit {rc}: {err}")
        print("ok: an archive without devices is one line, exit 1")

        # The CLI's refusals.
        rc, out, err = run(kstudy, "run", "quick", "--replicate-on-every-device", "--out", str(tmp / "x.h5"))
        check(rc != 0 and "needs --devices" in err, f"--replicate without --devices: exit {rc}: {err}")
        rc, out, err = run(kstudy, "p2p")
        if flavour == "cpu":
            check(rc == 69 and "cuda flavour" in err, f"p2p in the cpu flavour: exit {rc}: {err}")
            print("ok: kstudy p2p in the cpu flavour says it needs CUDA (exit 69)")
        if flavour != "cpu":
            print("skipped: the end-to-end fake-device run needs the cpu flavour (a cuda child needs a GPU)")
            return 0

        # End to end: fake devices, every point on each healthy one, merged and compared.
        env = dict(os.environ, KSTUDY_FAKE_DEVICES=FAKE, KSTUDY_CEILING_BYTES="33554432", OMP_NUM_THREADS="1",
                   OMP_PROC_BIND="false", KSTUDY_QUIET="1")
        merged = str(tmp / "node.h5")
        rc, out, err = run(kstudy, "run", str(source / "tests/shard_tiny.json"), "--devices", "all",
                           "--replicate-on-every-device", "--trials", "2", "-q", "--out", merged, env=env)
        check(rc == 0, f"run --devices all: exit {rc}: {err}")
        check("device 2 (Fake H200, 0000:03:00.0, GPU-cccc-2) failed its health check (fail: Xid 79): left out"
              in err, err)
        with h5py.File(merged) as h5:
            uuids = {u.decode() for u in h5["experiments/shard_tiny/samples"]["device_uuid"]}
            check(uuids == {"GPU-aaaa-0", "GPU-bbbb-1"}, f"sample devices: {uuids}")
            check(h5.attrs["device_replicas"] == "true", "device_replicas")
        rc, out, err = run(kstudy, "compare", merged, "--by", "device")
        check(rc == 0 and "0000:02:00.0" in out and "largest spread" in out, f"compare: exit {rc}: {err}{out}")
        print("ok: run --devices all --replicate-on-every-device with fake devices, merged and compared by device")

        # SIGTERM to the parent reaches every device's process: each stops after its point, nothing is merged,
        # and --resume completes them.
        stopped = str(tmp / "stopped.h5")
        args = [kstudy, "run", str(source / "tests/shard_tiny.json"), "--devices", "0,1", "--replications", "20",
                "--out", stopped]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        # The stop must come while the devices run, not after a fixed sleep (a fast machine finishes first): as
        # soon as a device's log has its first line, which without -q is its first step ("measuring ceilings").
        # With -q the first line was the last one ("results: ..."): the stop then came after the devices had
        # finished, and on a loaded machine after the merge had begun, so the run exited 0 (about 1 run in 25
        # with two suites side by side).
        logs = Path(stopped + ".devices")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and p.poll() is None and not any(
                f.stat().st_size > 0 for f in logs.glob("device-*.log")):
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
        check(p.returncode == 128 + signal.SIGTERM and "stopped by signal 15" in err,
              f"SIGTERM: exit {p.returncode}: {err}")
        check(not Path(stopped).exists(), "nothing merged after a stop")
        rc, out, err = run(*args, "--resume", env=env)
        check(rc == 0 and Path(stopped).exists(), f"--resume after the stop: exit {rc}: {err}")
        print("ok: SIGTERM stops every device's process, nothing merged; --resume completes and merges")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as failure:
        print(f"FAIL: {failure}")
        sys.exit(1)
