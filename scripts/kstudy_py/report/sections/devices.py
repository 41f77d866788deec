"""Several GPUs of one node (kstudy run --devices): the device-to-device spread of the same variant at the same
point (from the device every sample records, schema 12) and the peer-to-peer copy ceilings as matrices."""
import numpy as np
import pandas as pd

from .. import section
from ... import archive as A
from ... import devices as D

EXPLANATION = ("Per (variant, point, timer) and GPU: the median of the accepted samples and their interquartile "
               "range; spread = the slowest GPU's median / the fastest GPU's (1.000: no device-to-device "
               "difference). Only points measured on more than one GPU have a spread "
               "(kstudy run --devices all --replicate-on-every-device).")


@section("devices", "GPUs of one node: device-to-device spread and peer-to-peer copies", order=115, findings=True)
def devices(inputs, sec):
    from ...compare import KEYS
    # compare's point, and every column of the archive's point key it lacks (GEMM's k, the cache mode).
    table, spread = D.per_device(inputs.archives, KEYS + [c for c in A.point_key("samples") if c not in KEYS])
    p2p = pd.concat([D.peer_matrix(a) for a in inputs.archives] or [pd.DataFrame()], ignore_index=True)
    multi = spread[spread.devices > 1] if len(spread) else spread
    if multi.empty and p2p.empty:
        return sec.skip("no point measured on more than one GPU and no peer-to-peer ceilings "
                        "(kstudy run --devices all --replicate-on-every-device records them)")
    if not multi.empty:
        inputs.write_csv(table, "device_spread.csv", sec, "median and IQR per GPU of the same variant at the same "
                                                          "point, and the spread between GPUs")
        sec.lines += [EXPLANATION, ""]
        for label, g in multi.groupby("archive"):
            worst = g.sort_values("spread", ascending=False).iloc[0]
            text = (f"- {label}: {len(g)} points on {int(g.devices.max())} GPUs; median spread "
                    f"{g.spread.median():.3f}, largest {worst.spread:.3f} ({worst.variant}, {worst.timer}: "
                    f"{worst.slowest} slowest, {worst.fastest} fastest)")
            sec.lines.append(text)
            sec.headlines.append(f"Device-to-device spread ({label}): median {g.spread.median():.3f}, "
                                 f"largest {worst.spread:.3f} over {len(g)} points.")
        sec.lines.append("")
    if not p2p.empty:
        inputs.write_csv(p2p, "p2p_ceilings.csv", sec, "peer-to-peer copy bandwidth per ordered GPU pair, with "
                                                       "and without peer access")
        for label, g in p2p.groupby("archive"):
            for mode, title in (("peer", "peer access enabled"), ("staged", "without peer access (staged)")):
                if (g["mode"] == mode).any():
                    sec.lines += [f"{label}: cudaMemcpyPeerAsync GB/s, {title} (rows: source, columns: "
                                  "destination)", ""] + D.matrix_markdown(g, mode) + [""]
            best = g[g["mode"] == "peer"].gb_per_s
            if len(best) and np.isfinite(best.max()):
                sec.findings.append(f"- {label}: peer-to-peer copies {best.min():.1f}–{best.max():.1f} GB/s with "
                                    "peer access")
    if not sec.findings:
        sec.no_finding = "no peer-to-peer copy bandwidth with peer access measured"
    return sec.done(table)
