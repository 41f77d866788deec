"""Host<->device copy bandwidth by size, direction and host memory kind (`transfer` experiments)."""
import pandas as pd

from ... import archive as A
from .. import section
from ..figures import grid, save

# A copy's point: its size and the point key (the columns a copy does not vary read 0 or "" and group nothing apart;
# the table shows the copy's own, A.COPY_KEY).
KEYS = ["bytes", *A.point_key("samples")]
COLUMNS = ["archive", "experiment", "bytes", *A.COPY_KEY, "n_ok", "n_failed", "median", "q1", "q3",
           "GiB_per_s", "GiB_per_s_at_q3", "GiB_per_s_at_q1", "failure"]


def experiment_table(a, e):
    """Every attempted copy point, with its ok and failed sample counts and the first failure's status."""
    all_ = e.samples[e.samples.timer == "transfer"]
    counts = all_.assign(ok=(all_.gate != "failed") & (all_.status == "ok") & (all_.trial >= 0)) \
        .groupby(KEYS).ok.agg(n_ok="sum", n_all="size").reset_index()
    accepted = e.accepted()
    df = counts.merge(A.stats(accepted[accepted.timer == "transfer"], KEYS), on=KEYS, how="left")
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
    for (arch, d, m), g in ok.groupby(["archive", *A.COPY_KEY]):
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
    return ok.loc[ok.groupby(["archive", "experiment", *A.COPY_KEY]).bytes.idxmax()]


PIN_COLUMNS = ["archive", "experiment", "bytes", "call", "pin_s", "h2d_pageable_s", "h2d_pinned_s", "saving_per_copy_s",
               "copies_to_amortise"]


def pinning_table(a, e, copies):
    """What page-locking each size costs (cudaHostAlloc, cudaHostRegister), beside one h2d copy of that size from
    pageable and from pinned memory: pinning pays for itself after cost / (pageable - pinned) copies."""
    acc = e.accepted()
    pin = acc[acc.timer == "pin"]
    if pin.empty:
        return pd.DataFrame(columns=PIN_COLUMNS)
    stats = A.stats(pin, ["bytes", "variant"])
    h2d = copies[copies.direction == "h2d"].pivot_table(index="bytes", columns="memory_kind", values="median")
    rows = []
    for r in stats.itertuples():
        pageable = h2d.at[r.bytes, "pageable"] if "pageable" in h2d and r.bytes in h2d.index else float("nan")
        pinned = h2d.at[r.bytes, "pinned"] if "pinned" in h2d and r.bytes in h2d.index else float("nan")
        saving = pageable - pinned
        rows.append({"archive": a.label, "experiment": e.name, "bytes": r.bytes, "call": r.variant, "pin_s": r.median,
                     "h2d_pageable_s": pageable, "h2d_pinned_s": pinned, "saving_per_copy_s": saving,
                     "copies_to_amortise": r.median / saving if saving > 0 else float("inf")})
    return pd.DataFrame(rows, columns=PIN_COLUMNS)


def pinning_lines(pins):
    lines = ["", "What page-locking costs, and how many host→device copies of the same buffer pay it back (cost ÷ "
                 "(pageable − pinned copy time)):", "", "| size | call | cost | h2d pageable | h2d pinned | copies to "
                 "amortise |", "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in pins.sort_values(["bytes", "call"]).itertuples():
        amortise = "never" if r.copies_to_amortise == float("inf") else f"{r.copies_to_amortise:.1f}"
        lines.append(f"| {r.bytes / 2**20:,.3g} MiB | `{r.call}` | {A.fmt_seconds(r.pin_s)} | "
                     f"{A.fmt_seconds(r.h2d_pageable_s)} | {A.fmt_seconds(r.h2d_pinned_s)} | {amortise} |")
    return lines


@section("transfer", "Transfer calibration", order=90)
def transfer(inputs, sec):
    frames = [experiment_table(a, e) for a, e in inputs.experiments("transfer") if not e.samples.empty]
    if not frames:
        return sec.skip("no `transfer_calibration` experiment in the archives")
    df = pd.concat(frames, ignore_index=True).sort_values(["archive", *A.COPY_KEY, "bytes"])
    inputs.write_csv(df, "transfer.csv", sec, "host<->device copy: median seconds and GiB/s by size × direction × "
                                              "memory kind")
    ok = df[df.n_ok > 0]
    if ok.empty:
        failure = df.failure.dropna().iloc[0] if df.failure.notna().any() else "no reason recorded"
        sec.lines.append(f"Every transfer sample failed ({failure}): no bandwidth to report; the table lists the "
                         "attempted points.")
        return sec.done(df)
    for (d, m), g in ok.groupby(list(A.COPY_KEY)):
        big, small = g.loc[g.bytes.idxmax()], g.loc[g.bytes.idxmin()]
        sec.lines.append(f"- {d} {m}: {big.GiB_per_s:.1f} GiB/s at {big.bytes / 2**20:,.0f} MiB; "
                         f"{small.GiB_per_s:.2f} GiB/s at {small.bytes / 2**10:,.0f} KiB")
    for (arch, exp), g in largest_copy(ok).groupby(["archive", "experiment"]):
        sec.headlines.append(f"Copies of {g.bytes.max() / 2**20:,.0f} MiB ({arch}/{exp}): " + ", ".join(
            f"{r.direction} {r.memory_kind} {r.GiB_per_s:.1f} GiB/s" for r in g.itertuples()) + ".")
    sec.figures.append((transfer_figure(ok, inputs.out), "Copy bandwidth vs size, per direction and host memory kind"))
    pins = [pinning_table(a, e, df[(df.archive == a.label) & (df.experiment == e.name)])
            for a, e in inputs.experiments("transfer") if not e.samples.empty]
    pins = pd.concat(pins, ignore_index=True) if pins else pd.DataFrame(columns=PIN_COLUMNS)
    if not pins.empty:
        inputs.write_csv(pins, "pinning.csv", sec, "page-locking cost per size and call, and the h2d copies of that "
                                                   "size that amortise it")
        sec.lines.extend(pinning_lines(pins))
        big = pins[pins.bytes == pins.bytes.max()]
        sec.headlines.append(f"Page-locking {big.bytes.iloc[0] / 2**20:,.0f} MiB: " + ", ".join(
            f"`{r.call}` {A.fmt_seconds(r.pin_s)} (paid back after {r.copies_to_amortise:.1f} h2d copies)"
            for r in big.itertuples()) + ".")
    return sec.done(df)
