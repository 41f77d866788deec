"""Where the ratio goes: the fastest resident scoring kernel at the reference shape, decomposed into kernel,
upload, download and remainder up to its measured one-shot time."""
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .... import archive as A
from ... import section
from ...figures import plt, save

OPERATION = "scoring"  # upload and download sizes below are the scoring operation's (x in; score, flag out)


@dataclass
class Waterfall:
    table: pd.DataFrame   # one row per component and host memory kind
    cpu: float            # the experiment's CPU reference median at the shape (None when absent)
    archive: str
    experiment: str

    def totals(self):
        """(memory kind, variant, kernel seconds, measured one-shot seconds) per memory kind."""
        out = []
        for memory, g in self.table.groupby("memory_kind", sort=False):
            kernel = g[g.component.str.startswith("kernel")].seconds.iloc[0]
            total = g[g.component == "one_shot (measured total)"].seconds.iloc[0]
            out.append((memory, g.variant.iloc[0], kernel, total))
        return out


def bandwidth(inputs, transfers, arch, direction, memory, nbytes):
    """Bytes/s for a copy of nbytes: the archive's transfer_calibration medians (log-log interpolated in size),
    else its ceiling; returns (bytes/s, source)."""
    if transfers is not None and not transfers.empty:
        g = transfers[(transfers.archive == arch) & (transfers.direction == direction) &
                      (transfers.memory_kind == memory) & (transfers.n_ok > 0)].sort_values("bytes")
        if len(g) >= 2 and g.bytes.min() <= nbytes <= g.bytes.max():
            bw = np.exp(np.interp(np.log(nbytes), np.log(g.bytes.to_numpy(float)),
                                  np.log((g.bytes / g["median"]).to_numpy(float))))
            return float(bw), "transfer_calibration medians"
    c = inputs.archive_of(arch).ceiling(f"{direction}_{memory}")
    return (c, f"ceiling {direction}_{memory}") if c else (None, "none")


def fastest_with_one_shot(s):
    """The fastest resident device point whose archive and experiment also hold its one-shot samples."""
    resident, oneshot = s[s.timer == "resident_wall"], s[s.timer == "one_shot"]
    keys = set(zip(oneshot.archive, oneshot.experiment, oneshot.variant))
    both = resident[[k in keys for k in zip(resident.archive, resident.experiment, resident.variant)]]
    return None if both.empty else both.loc[both["median"].idxmin()]


def components(inputs, transfers, s, best, memory):
    """The decomposition rows for one host memory kind (empty when that kind has no one-shot samples)."""
    arch, exp, variant = best.archive, best.experiment, best.variant
    mine = s[(s.archive == arch) & (s.experiment == exp) & (s.variant == variant) & (s.memory_kind == memory)]
    one, alloc = mine[mine.timer == "one_shot"], mine[mine.timer == "one_shot_alloc"]
    if one.empty:
        return []
    up_b, down_b = A.upload_bytes(best.rows, best.features, int(best.pitch)), A.download_bytes(best.rows)
    up_bw, up_src = bandwidth(inputs, transfers, arch, "h2d", memory, up_b)
    down_bw, down_src = bandwidth(inputs, transfers, arch, "d2h", memory, down_b)
    kernel, total = float(best["median"]), float(one["median"].iloc[0])
    up = up_b / up_bw if up_bw else np.nan
    down = down_b / down_bw if down_bw else np.nan
    entries = [("kernel (resident_wall)", kernel, "measured"), (f"upload {up_b / 2**20:.1f} MiB", up, up_src),
               (f"download {down_b / 2**20:.1f} MiB", down, down_src)]
    if len(alloc):
        entries.append(("allocation (one_shot_alloc - one_shot)", float(alloc["median"].iloc[0]) - total, "measured"))
    entries.append(("other (one_shot - sum of the above)", total - (kernel + np.nansum([up, down])), "remainder"))
    entries.append(("one_shot (measured total)", total, "measured"))
    if len(alloc):
        entries.append(("one_shot_alloc (measured total)", float(alloc["median"].iloc[0]), "measured"))
    return [{"archive": arch, "experiment": exp, "variant": variant, "memory_kind": memory, "rows": best.rows,
             "features": best.features, "component": name, "seconds": seconds, "source": source}
            for name, seconds, source in entries]


def detail_line(g, cpu):
    variant, memory = g.variant.iloc[0], g.memory_kind.iloc[0]
    by = dict(zip(g.component, g.seconds))
    sources = list(dict.fromkeys(g[g.component.str.startswith(("upload", "download"))].source))
    kernel, total = by["kernel (resident_wall)"], by["one_shot (measured total)"]
    up = next(v for k, v in by.items() if k.startswith("upload"))
    down = next(v for k, v in by.items() if k.startswith("download"))
    line = (f"- `{variant}` from {memory} memory: resident {A.fmt_seconds(kernel)} → one-shot {A.fmt_seconds(total)} "
            f"({total / kernel:.1f}× longer); upload ≈ {A.fmt_seconds(up)} and download ≈ {A.fmt_seconds(down)} "
            f"({'; '.join(sources)})")
    if cpu:
        line += f"; speedup over the CPU reference {cpu / kernel:.1f}× resident → {cpu / total:.2f}× one-shot"
    return line


def finding(inputs, wf, bench_cpu):
    """One table: resident and one-shot speedups of the waterfall's variant against each CPU reference."""
    where = f"{wf.archive}/{wf.experiment}"
    lines = [f"**Resident → one-shot at {inputs.shape_label()}** (`{wf.totals()[0][1]}`, {where}; speedup over the "
             "CPU reference, resident → one-shot):", "",
             "| host memory | kernel → one-shot | against the experiment's CPU"
             + (f" | against {inputs.cpu_baseline_name}'s CPU ({A.fmt_seconds(bench_cpu)})" if bench_cpu else "")
             + " |", "| --- | --- | --- |" + (" --- |" if bench_cpu else "")]
    for memory, variant, kernel, total in wf.totals():
        cells = [f"{A.fmt_seconds(kernel)} → {A.fmt_seconds(total)} ({total / kernel:.1f}×)",
                 f"{wf.cpu / kernel:.1f}× → {wf.cpu / total:.2f}×" if wf.cpu else "n/a"]
        if bench_cpu:
            cells.append(f"{bench_cpu / kernel:.1f}× → {bench_cpu / total:.2f}×")
        lines.append(f"| {memory} | " + " | ".join(cells) + " |")
    return lines


@section("waterfall", "Where the ratio goes: resident to one-shot", order=40, needs=("transfer",), operation=OPERATION,
         findings=True)
def waterfall(inputs, sec, transfer):
    points = inputs.points_of(OPERATION)
    if points.empty:  # no reference shape either: name what is missing, not a shape of 0×0
        return sec.skip(f"needs resident_wall and one_shot samples of one device variant in one experiment; the "
                        f"archives hold no accepted sample of a timed {OPERATION} point")
    rows, feats = inputs.shape
    s = points[(points.rows == rows) & (points.features == feats) & (points.block_size == 0)]
    best = fastest_with_one_shot(s)
    if best is None:
        return sec.skip(f"needs resident_wall and one_shot samples of one device variant in one experiment at "
                        f"{inputs.shape_label()}")
    rows_ = [c for memory in ("pinned", "pageable") for c in components(inputs, transfer.value, s, best, memory)]
    df = pd.DataFrame(rows_)
    b = inputs.baselines
    base = b[(b.archive == best.archive) & (b.experiment == best.experiment) & (b.operation == OPERATION)
             & (b.rows == rows) & (b.features == feats)]
    wf = Waterfall(df, float(base.cpu_median.iloc[0]) if len(base) else None, best.archive, best.experiment)
    inputs.write_csv(df, f"waterfall_{rows}x{feats}.csv", sec,
                     "resident → one-shot decomposition; upload/download derived from copy bandwidth (source column)")
    sec.lines.append(f"Variant: the fastest resident device variant at {inputs.shape_label()} whose experiment "
                     f"({best.archive}/{best.experiment}) also has its one-shot samples. Upload = x "
                     f"({A.fmt_rows(rows)} rows × pitch {int(best.pitch)} floats) + 3 feature vectors; download = "
                     "score (float) + flag (uint8) per row.")
    sec.lines += [detail_line(g, wf.cpu) for _, g in df.groupby("memory_kind", sort=False)]
    cpus = [(f"CPU reference ({best.experiment})", wf.cpu)] if wf.cpu else []
    bench_cpu = inputs.bench_cpu_at(rows, feats, OPERATION) if inputs.cpu_baseline_path else None
    if bench_cpu:
        cpus.append((f"CPU reference from {inputs.cpu_baseline_name}", bench_cpu))
    sec.figures.append((waterfall_figure(wf, cpus, inputs.out, rows, feats),
                        f"Waterfall at {inputs.shape_label()} for the fastest resident variant: kernel, upload, "
                        "download, remainder, measured one-shot; CPU references as lines"))
    sec.findings.extend(finding(inputs, wf, bench_cpu))
    takes = [f"{A.fmt_seconds(total)} from {memory} memory ({total / kernel:.0f}× its {A.fmt_seconds(kernel)} resident)"
             for memory, _, kernel, total in wf.totals()]
    sec.headlines.append(f"Resident → one-shot at {inputs.shape_label()} ({wf.archive}/{wf.experiment}): "
                         f"`{best.variant}` takes " + ", ".join(takes) + ".")
    return sec.done(wf)


SHORT_LABELS = {"kernel (resident_wall)": "kernel\n(resident_wall)",
                "other (one_shot - sum of the above)": "other\n(remainder)",
                "allocation (one_shot_alloc - one_shot)": "allocation"}
STEP_COLOURS = {"measured": "#4c72b0", "remainder": "#999999"}  # anything else: derived from a bandwidth


def draw_steps(ax, steps, top):
    """Stacked steps from 0; returns their tick labels."""
    bottom, labels = 0.0, []
    for i, r in enumerate(steps.itertuples()):
        v = r.seconds * 1e3 if np.isfinite(r.seconds) else 0.0
        ax.bar(i, abs(v), bottom=bottom if v >= 0 else bottom + v, color=STEP_COLOURS.get(r.source, "#dd8452"),
               edgecolor="black", lw=0.5)
        ax.text(i, bottom + max(v, 0) + 0.01 * top, f"{v:+.3g}", ha="center", va="bottom", fontsize=8)
        bottom += v
        labels.append(SHORT_LABELS.get(r.component, r.component.replace(" ", "\n", 1)))
    return labels


def draw_panel(ax, g, cpus):
    steps = g[~g.component.str.contains("measured total")]
    totals = g[g.component.str.contains("measured total")]
    top = max(totals.seconds.max(), np.nancumsum(steps.seconds.to_numpy()).max()) * 1e3
    labels = draw_steps(ax, steps, top)
    for r in totals.itertuples():
        ax.bar(len(labels), r.seconds * 1e3, color="#55a868", edgecolor="black", lw=0.5)
        ax.text(len(labels), r.seconds * 1e3 + 0.01 * top, f"{r.seconds * 1e3:.3g}", ha="center", va="bottom",
                fontsize=8)
        labels.append(r.component.replace(" (measured total)", "\n(measured)"))
    kernel, total = steps.seconds.iloc[0], totals.seconds.iloc[0]
    title = f"{g.memory_kind.iloc[0]} host memory: one-shot = {total / kernel:.1f}× resident"
    for k, (label, cpu) in enumerate(cpus):
        ratio = f"{label}: speedup {cpu / kernel:.1f}× resident → {cpu / total:.2f}× one-shot"
        if cpu * 1e3 <= top * 1.3:
            ax.axhline(cpu * 1e3, color=["crimson", "purple", "teal"][k % 3], ls="--", lw=1,
                       label=f"{label} {cpu * 1e3:.3g} ms")
        else:
            ratio += f" ({cpu * 1e3:.3g} ms, off scale)"
        title += "\n" + ratio
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", fontsize=8)  # above the short kernel bar, clear of the others
    ax.set_ylim(0, top * 1.3)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("milliseconds")
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def waterfall_figure(wf, cpus, out, rows, feats):
    """cpus: [(label, seconds)] reference lines; drawn when on scale, else named in the panel's title."""
    df = wf.table
    kinds = list(dict.fromkeys(df.memory_kind))
    fig, axes = plt.subplots(1, len(kinds), figsize=(6.5 * len(kinds), 5.0), squeeze=False, layout="constrained")
    for ax, memory in zip(axes.flat, kinds):
        draw_panel(ax, df[df.memory_kind == memory], cpus)
    derived = sorted(set(df.source) - {"measured", "remainder"})
    fig.suptitle(f"{df.variant.iloc[0]} at {rows:,}×{feats} ({wf.archive}/{wf.experiment}): resident → one-shot\n"
                 f"blue measured, orange derived from {'; '.join(derived) or 'n/a'}, grey remainder, green measured "
                 "total", fontsize=10)
    return save(fig, out, f"waterfall_{rows}x{feats}.png")
