"""`kstudy compare ARCHIVE... --by device`: device-to-device spread of the same variant at the same point, from the
GPU every sample records (schema 12: samples.device_uuid, device_pci_bus_id, device_model). An archive of
`kstudy run --devices ... --replicate-on-every-device` runs every point on every GPU of a node, which is what this
question needs; a sharded `--devices` run splits the (point, replication) units, so a point is on several devices
only where its replications landed on different ones, each with a part of its samples.

Per (experiment, variant, point, timer) and device: samples, median and interquartile range; per point: how many
devices and the spread = slowest median / fastest median (1.0 = identical devices)."""
import sys

import numpy as np
import pandas as pd

from . import archive as A

DEVICE = ["device_pci_bus_id", "device_uuid", "device_model"]


def per_device(archives, keys):
    """(per-device table, per-point spread table); both empty when no sample names its device."""
    frames = []
    for a in archives:
        for e in a.experiments.values():
            s = e.accepted()
            if s.empty or "device_uuid" not in s.columns:
                continue
            s = s[s.device_uuid.astype(str) != ""]
            if not s.empty:
                frames.append(s.assign(archive=a.label))
    if not frames:
        return pd.DataFrame(), pd.DataFrame()
    s = pd.concat(frames, ignore_index=True)
    s["size_bytes"] = np.where(s.rows == 0, s.bytes, 0)
    point = ["archive"] + [k for k in keys if k in s.columns]
    grouped = s.groupby(point + DEVICE, dropna=False).seconds
    table = pd.DataFrame({
        "n": grouped.size(),
        "median": grouped.median(),
        "q1": grouped.quantile(0.25),
        "q3": grouped.quantile(0.75),
    }).reset_index()
    table["iqr"] = table.q3 - table.q1
    table["iqr_over_median"] = table.iqr / table["median"]
    rows = []
    for key, g in table.groupby(point, dropna=False):
        fastest, slowest = g.loc[g["median"].idxmin()], g.loc[g["median"].idxmax()]
        row = dict(zip(point, key if isinstance(key, tuple) else (key,)))
        row.update(devices=len(g), fastest=fastest.device_pci_bus_id, slowest=slowest.device_pci_bus_id,
                   min_median=fastest["median"], max_median=slowest["median"],
                   spread=slowest["median"] / fastest["median"] if fastest["median"] > 0 else np.nan,
                   max_iqr_over_median=g.iqr_over_median.max())
        rows.append(row)
    spread = pd.DataFrame(rows)
    table = table.merge(spread[point + ["spread"]], on=point)
    return table, spread


def main(archives, keys, out, show):
    table, spread = per_device(archives, keys)
    if table.empty:
        print("kstudy compare --by device: no sample names its device (archives before schema 12, or runs without a "
              "GPU); kstudy run --devices all --replicate-on-every-device records them", file=sys.stderr)
        return 1
    if out:
        table.to_csv(out, index=False, float_format="%.9g")
        print(f"compare: wrote {out}", file=sys.stderr)
    multi = spread[spread.devices > 1]
    print("Per device (PCI bus id, UUID, model): accepted samples n, median and interquartile range (q3 - q1) of the "
          "same variant at the same point; spread = slowest device's median / fastest device's median "
          "(1.000 = no device-to-device difference).")
    if multi.empty:
        print("Every point ran on one device only: no device-to-device spread; "
              "kstudy run --devices all --replicate-on-every-device runs every point on every GPU.")
    varying = [k for k in ["archive"] + keys if k in table.columns
               and (table[k].astype(str).nunique() > 1 or k in ("experiment", "variant"))]
    shown = table.sort_values(varying + ["device_pci_bus_id"]).copy()
    for c in ("median", "iqr"):
        shown[c] = shown[c].map(A.fmt_seconds)
    shown["spread"] = shown.spread.map(lambda v: "" if not np.isfinite(v) else f"{v:.3f}")
    show(shown, varying + DEVICE + ["n", "median", "iqr", "spread"])
    if not multi.empty:
        worst = multi.sort_values("spread", ascending=False).iloc[0]
        print(f"\nlargest spread: {worst.spread:.3f} ({worst.variant} at rows={worst.get('rows', '')}, "
              f"features={worst.get('features', '')}, {worst.timer}: {worst.slowest} slowest, {worst.fastest} fastest) "
              f"over {len(multi)} point(s) measured on more than one device; median spread "
              f"{multi.spread.median():.3f}")
    return 0


def peer_matrix(archive):
    """The peer-to-peer ceilings of an archive (p2p_copy_<src>_<dst>_<peer|staged>, kstudy run --devices) as a
    table: src, dst, mode, GB/s; empty when there are none."""
    c = archive.ceilings()
    if not len(c):
        return pd.DataFrame()
    parts = c.name.astype(str).str.extract(r"^p2p_copy_(\d+)_(\d+)_(peer|staged)$")
    hit = c[parts[0].notna()]
    if hit.empty:
        return pd.DataFrame()
    parts = parts[parts[0].notna()]
    return pd.DataFrame({"archive": archive.label, "src": parts[0].astype(int).to_numpy(),
                         "dst": parts[1].astype(int).to_numpy(), "mode": parts[2].to_numpy(),
                         "gb_per_s": (hit.bytes_per_second.astype(float) / 1e9).to_numpy()})


def matrix_markdown(p2p, mode):
    """One Markdown matrix (rows: source, columns: destination) of a peer_matrix table's mode."""
    m = p2p[p2p["mode"] == mode]
    devices = sorted(set(p2p.src) | set(p2p.dst))
    value = {(r.src, r.dst): r.gb_per_s for r in m.itertuples()}
    lines = ["| src \\ dst | " + " | ".join(str(d) for d in devices) + " |",
             "|---" * (len(devices) + 1) + "|"]
    for s in devices:
        cells = ["-" if s == d else (f"{value[(s, d)]:.1f}" if (s, d) in value else "n/a") for d in devices]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return lines
