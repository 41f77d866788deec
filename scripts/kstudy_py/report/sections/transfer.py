"""Host<->device copy bandwidth by size, direction and host memory kind (`transfer` experiments)."""
import pandas as pd

from ... import archive as A
from .. import section
from ..figures import grid, save

KEYS = ["bytes", "direction", "memory_kind"]
COLUMNS = ["archive", "experiment", "bytes", "direction", "memory_kind", "n_ok", "n_failed", "median", "q1", "q3",
           "GiB_per_s", "GiB_per_s_at_q3", "GiB_per_s_at_q1", "failure"]


def experiment_table(a, e):
    """Every attempted copy point, with its ok and failed sample counts and the first failure's status."""
    all_ = e.samples
    counts = all_.assign(ok=(all_.gate != "failed") & (all_.status == "ok") & (all_.trial >= 0)) \
        .groupby(KEYS).ok.agg(n_ok="sum", n_all="size").reset_index()
    df = counts.merge(A.stats(e.accepted(), KEYS), on=KEYS, how="left")
    df["n_failed"] = df.n_all - df.n_ok
    df["GiB_per_s"] = df.bytes / df["median"] / 2**30
    df["GiB_per_s_at_q3"] = df.bytes / df.q3 / 2**30
    df["GiB_per_s_at_q1"] = df.bytes / df.q1 / 2**30
    status = all_[all_.status != "ok"].groupby(KEYS).status.first()
    df = df.merge(status.rename("failure").reset_index(), on=KEYS, how="left")
    return df.assign(archive=a.label, experiment=e.name)[COLUMNS]


def transfer_figure(ok, out):
    fig, (ax,) = grid(1, 1, width=7, height=4.5)
    styles = {("h2d", "pinned"): ("#4c72b0", "-"), ("d2h", "pinned"): ("#dd8452", "-"),
              ("h2d", "pageable"): ("#4c72b0", "--"), ("d2h", "pageable"): ("#dd8452", "--")}
    multi = ok.archive.nunique() > 1
    for (arch, d, m), g in ok.groupby(["archive", "direction", "memory_kind"]):
        g = g.sort_values("bytes")
        c, ls = styles.get((d, m), (None, "-"))
        ax.plot(g.bytes, g.GiB_per_s, marker="o", color=c, ls=ls, label=f"{d} {m}" + (f" [{arch}]" if multi else ""))
        ax.fill_between(g.bytes, g.GiB_per_s_at_q3, g.GiB_per_s_at_q1, color=c, alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GiB/s (median; band: IQR)")
    ax.set_title("Host↔device copy bandwidth vs size")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return save(fig, out, "transfer_bandwidth.png")


def largest_copy(ok):
    """Per archive, experiment, direction and memory kind: the point at the largest size."""
    return ok.loc[ok.groupby(["archive", "experiment", "direction", "memory_kind"]).bytes.idxmax()]


@section("transfer", "Transfer calibration", order=90)
def transfer(inputs, sec):
    frames = [experiment_table(a, e) for a, e in inputs.experiments("transfer") if not e.samples.empty]
    if not frames:
        return sec.skip("no `transfer_calibration` experiment in the archives")
    df = pd.concat(frames, ignore_index=True).sort_values(["archive", "direction", "memory_kind", "bytes"])
    inputs.write_csv(df, "transfer.csv", sec, "host<->device copy: median seconds and GiB/s by size × direction × "
                                              "memory kind")
    ok = df[df.n_ok > 0]
    if ok.empty:
        failure = df.failure.dropna().iloc[0] if df.failure.notna().any() else "no reason recorded"
        sec.lines.append(f"Every transfer sample failed ({failure}): no bandwidth to report; the table lists the "
                         "attempted points.")
        return sec.done(df)
    for (d, m), g in ok.groupby(["direction", "memory_kind"]):
        big, small = g.loc[g.bytes.idxmax()], g.loc[g.bytes.idxmin()]
        sec.lines.append(f"- {d} {m}: {big.GiB_per_s:.1f} GiB/s at {big.bytes / 2**20:,.0f} MiB; "
                         f"{small.GiB_per_s:.2f} GiB/s at {small.bytes / 2**10:,.0f} KiB")
    for (arch, exp), g in largest_copy(ok).groupby(["archive", "experiment"]):
        sec.headlines.append(f"Copies of {g.bytes.max() / 2**20:,.0f} MiB ({arch}/{exp}): " + ", ".join(
            f"{r.direction} {r.memory_kind} {r.GiB_per_s:.1f} GiB/s" for r in g.itertuples()) + ".")
    sec.figures.append((transfer_figure(ok, inputs.out), "Copy bandwidth vs size, per direction and host memory kind"))
    return sec.done(df)
