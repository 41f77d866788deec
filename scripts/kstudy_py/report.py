"""`kstudy report ARCHIVE... --out DIR`: evidence tables (CSV), figures (PNG) and report.md from archives.

Every number is computed from the archives' samples (gate passed, status ok, trial >= 0); a summary table
in the archive, if any, is not used. Sections whose experiment is missing are skipped with a note.
"""
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from . import archive as A

SCORING_KEYS = ["archive", "experiment", "variant", "layout", "memory_kind", "rows", "features", "block_size", "timer"]
HOST_IN_HOST_OUT = ("one_shot", "one_shot_alloc", "pipelined")
RESIDENT = ("host_wall", "resident_wall")


def reuse_words(value):
    try:
        return f"the transpose pays back after {float(value):.3g} reuses"
    except ValueError:
        if value == "never":
            return "the transpose never pays back (row-major is already as fast)"
        return f"break-even: {value}"


class Section:
    """One part of the report: its tables, figures, findings, or why it was skipped."""

    def __init__(self, title):
        self.title = title
        self.tables = []    # (file name, description)
        self.figures = []   # (file name, caption)
        self.lines = []     # Markdown lines (findings)
        self.skipped = None

    def skip(self, why):
        self.skipped = why
        return self


class Report:
    def __init__(self, archives, out, shape=(1048576, 16), cpu_baseline=None, notes=(), command=""):
        self.command = command
        self.archives = archives
        self.out = Path(out)
        self.shape = shape
        self.cpu_baseline_path = cpu_baseline
        self.notes = list(notes)
        self.sections = []
        self.scoring = self._scoring_stats()
        self.baselines = self._baselines()

    # ------------------------------------------------------------------ helpers
    def experiments(self, kind):
        for a in self.archives:
            for e in a.experiments.values():
                if e.kind == kind:
                    yield a, e

    def write_csv(self, df, name, section, description):
        path = self.out / name
        df.to_csv(path, index=False, float_format="%.9g")
        section.tables.append((name, description))
        return path

    def _scoring_stats(self):
        frames = []
        for a, e in self.experiments("scoring"):
            s = e.accepted()
            if s.empty:
                continue
            st = A.stats(s, SCORING_KEYS)
            aggs = {"pitch": ("pitch", "max"), "bytes": ("bytes", "max")}
            if "occupancy" in s.columns:  # calculated occupancy (added to samples after the first archives)
                aggs["occupancy"] = ("occupancy", "max")
            extra = s.groupby(SCORING_KEYS, dropna=False).agg(**aggs).reset_index()
            frames.append(st.merge(extra, on=SCORING_KEYS))
        if not frames:
            return pd.DataFrame(columns=SCORING_KEYS + ["n", "median", "q1", "q3", "min", "max", "pitch", "bytes"])
        df = pd.concat(frames, ignore_index=True)
        df["boundary"] = [A.boundary(t, m) for t, m in zip(df.timer, df.memory_kind)]
        return df

    def _baselines(self):
        """CPU reference per (archive, experiment, rows, features): cpu_reference@openmp host_wall preferred."""
        out = []
        s = self.scoring
        for (arch, exp), group in s.groupby(["archive", "experiment"]):
            ref = group[group.variant.map(A.is_reference) & (group.timer == "host_wall") & (group.block_size == 0)]
            if ref.empty:
                continue
            order = {"openmp": 0, "threads": 1, "serial": 2}
            chosen = sorted(ref.variant.unique(), key=lambda v: (order.get(A.backend(v), 9), v))[0]
            r = ref[ref.variant == chosen][["archive", "experiment", "rows", "features", "median", "q1", "q3", "n"]]
            out.append(r.rename(columns={"median": "cpu_median", "q1": "cpu_q1", "q3": "cpu_q3", "n": "cpu_n"})
                       .assign(baseline=chosen))
        if not out:
            return pd.DataFrame(columns=["archive", "experiment", "rows", "features", "cpu_median", "cpu_q1", "cpu_q3",
                                         "cpu_n", "baseline"])
        return pd.concat(out, ignore_index=True)

    def speedups(self):
        s = self.scoring[self.scoring.block_size == 0]
        df = s.merge(self.baselines, on=["archive", "experiment", "rows", "features"], how="inner")
        df["speedup"] = df.cpu_median / df["median"]
        return df

    def archive_of(self, label):
        return next(a for a in self.archives if a.label == label)

    # ------------------------------------------------------------------ sections
    def section_overhead(self):
        sec = Section("Launch and compile overhead")
        rows = []
        for a, e in self.experiments("launch"):
            st = A.stats(e.accepted(), ["variant"])
            for _, r in st.iterrows():
                queued = "queued" in r.variant
                rows.append({"archive": a.label, "experiment": e.name, "item": r.variant,
                             "measure": "per launch, 1,000 queued then one fence" if queued else "one launch + fence",
                             "n": r.n, "median_us": r["median"] * 1e6, "q1_us": r.q1 * 1e6, "q3_us": r.q3 * 1e6})
        for a, e in self.experiments("cold_compile"):
            acc = e.accepted()
            st = A.stats(acc, ["variant", "timer"])
            for variant, g in st.groupby("variant"):
                by = {t: r for t, r in zip(g.timer, g.itertuples())}
                if "compile" in by:
                    r = by["compile"]
                    rows.append({"archive": a.label, "experiment": e.name, "item": variant,
                                 "measure": "NVRTC compile" if variant.startswith("nvrtc") else
                                 ("module load" if variant.startswith("module_load") else "compile"),
                                 "n": r.n, "median_us": r.median * 1e6, "q1_us": r.q1 * 1e6, "q3_us": r.q3 * 1e6})
                if "cold" in by:
                    r = by["cold"]
                    measure = "initialisation" if variant == "kokkos_initialize" else "first call (fresh process)"
                    rows.append({"archive": a.label, "experiment": e.name, "item": variant, "measure": measure,
                                 "n": r.n, "median_us": r.median * 1e6, "q1_us": r.q1 * 1e6, "q3_us": r.q3 * 1e6})
                    warm = next((by[t] for t in ("resident_wall", "host_wall") if t in by), None)
                    if warm is not None:
                        rows.append({"archive": a.label, "experiment": e.name, "item": variant,
                                     "measure": "second call (same process)", "n": warm.n,
                                     "median_us": warm.median * 1e6, "q1_us": warm.q1 * 1e6, "q3_us": warm.q3 * 1e6})
                        rows.append({"archive": a.label, "experiment": e.name, "item": variant,
                                     "measure": "first-call overhead (first - second, medians)", "n": min(r.n, warm.n),
                                     "median_us": (r.median - warm.median) * 1e6, "q1_us": np.nan, "q3_us": np.nan})
        if not rows:
            return sec.skip("no `launch` or `cold_compile` experiment in the archives")
        df = pd.DataFrame(rows)
        self.write_csv(df, "overhead.csv", sec, "launch overhead and cold start / compile times, µs")
        for _, r in df[df.measure.str.startswith(("one launch", "per launch"))].iterrows():
            sec.lines.append(f"- `{r['item']}`: {r.median_us:.2f} µs ({r.measure}; IQR {r.q1_us:.2f}–{r.q3_us:.2f}, n={r.n})")
        init = df[df.measure == "initialisation"]
        if len(init):
            for _, r in init.iterrows():
                sec.lines.append(f"- Kokkos initialisation: median {r.median_us / 1e3:.1f} ms (IQR "
                                 f"{r.q1_us / 1e3:.1f}–{r.q3_us / 1e3:.1f}, n={r.n} fresh processes)")
        over = df[df.measure.str.startswith("first-call overhead")].sort_values("median_us", ascending=False)
        if len(over):
            top = over.head(3)
            sec.lines.append("- Largest first-call overheads (one sample each unless n says otherwise): " + "; ".join(
                f"`{r['item']}` {r.median_us / 1e3:.2f} ms" for _, r in top.iterrows()))
        comp = df[df.measure.isin(["NVRTC compile", "module load"])]
        for _, r in comp.iterrows():
            sec.lines.append(f"- {r.measure} (`{r['item']}`): {r.median_us / 1e3:.3f} ms (n={r.n})")
        return sec

    def section_speedups(self):
        sec = Section("Speedups against the CPU reference")
        if self.scoring.empty:
            return sec.skip("no scoring experiment with accepted samples in the archives")
        if self.baselines.empty:
            return sec.skip("no `cpu_reference` host_wall samples: no CPU baseline to compare with")
        sp = self.speedups()
        cols = ["archive", "experiment", "variant", "layout", "rows", "features", "timer", "memory_kind", "boundary",
                "n", "median", "q1", "q3", "baseline", "cpu_median", "cpu_q1", "cpu_q3", "speedup"]
        sp = sp.sort_values(["archive", "experiment", "variant", "timer", "memory_kind", "rows", "features"])
        self.write_csv(sp[cols], "speedups.csv", sec,
                       "every scoring point: median/IQR (s) per variant and timing boundary, speedup = CPU median / median")
        rows, features = self.shape
        at = sp[(sp.rows == rows) & (sp.features == features)]
        tag = f"{rows}x{features}"
        if at.empty:
            sec.lines.append(f"No scoring point at {A.fmt_rows(rows)}×{features}; see `speedups.csv` for every point.")
        else:
            self.write_csv(at[cols], f"speedup_{tag}.csv", sec, f"the same at {A.fmt_rows(rows)}×{features}")
            self.speedup_at = at
            base = at.baseline.iloc[0]
            sec.lines.append(f"At {A.fmt_rows(rows)}×{features}, baseline `{base}` (host_wall) "
                             f"{A.fmt_seconds(at.cpu_median.iloc[0])}:")
            sec.lines.append("")
            sec.lines.append("| boundary | best variant | median | speedup |")
            sec.lines.append("| --- | --- | --- | --- |")
            for b, g in at[~at.variant.map(A.is_reference)].groupby("boundary"):
                best = g.loc[g["median"].idxmin()]
                sec.lines.append(f"| {b} | `{best.variant}` | {A.fmt_seconds(best['median'])} | {best.speedup:.2f}× |")
        best = self.best_per_regime()
        if best is not None and len(best):
            self.write_csv(best, "best_per_regime.csv", sec,
                           "fastest variant per timing boundary at the smallest, reference and largest tested row counts")
        from . import plots
        name = plots.speedup_vs_rows(sp, self.out)
        if name:
            sec.figures.append((name, "Speedup over the CPU reference vs rows (log–log), one panel per timing "
                                      "boundary, one line per variant; 1 = as fast as the CPU"))
        return sec

    def section_crossover(self):
        sec = Section("Crossover brackets")
        if self.scoring.empty or self.baselines.empty:
            return sec.skip("needs a scoring experiment with a `cpu_reference` baseline")
        sp = self.speedups()
        sp = sp[~sp.variant.map(A.is_reference)]
        host_in_out = sp[sp.timer.isin(HOST_IN_HOST_OUT)]
        # A host variant's input is already where it computes: its host_wall is its host-in/host-out time.
        host_variants = set(sp[sp.timer == "host_wall"].variant) - set(host_in_out.variant)
        candidates = pd.concat([host_in_out, sp[sp.variant.isin(host_variants) & (sp.timer == "host_wall")]])
        out = []
        for (arch, exp, variant, timer, memory, features), g in candidates.groupby(
                ["archive", "experiment", "variant", "timer", "memory_kind", "features"]):
            g = g.sort_values("rows")
            wins = (g.q3 < g.cpu_q1).to_numpy()  # non-overlapping IQRs, variant below the CPU
            tested = g.rows.to_numpy()
            if not wins.any():
                bracket, prev, first, stays = "never", "", "", ""
            else:
                i = int(np.argmax(wins))
                first = int(tested[i])
                prev = int(tested[i - 1]) if i > 0 else ""
                bracket = f"({prev if i > 0 else 'none tested below'}, {first})"
                stays = bool((g["median"].to_numpy()[i:] < g.cpu_median.to_numpy()[i:]).all())
            out.append({"archive": arch, "experiment": exp, "variant": variant, "timer": timer, "memory_kind": memory,
                        "features": features, "baseline": g.baseline.iloc[0], "tested_rows_min": int(tested.min()),
                        "tested_rows_max": int(tested.max()), "points": len(g), "previous_rows": prev,
                        "first_winning_rows": first, "bracket": bracket, "median_below_cpu_at_all_larger": stays})
        if not out:
            return sec.skip("no variant has host-in/host-out timings (one_shot, pipelined, or a host variant's host_wall)")
        df = pd.DataFrame(out)
        self.write_csv(df, "crossover.csv", sec,
                       "first tested row count whose host-in/host-out median beats the CPU reference with "
                       "non-overlapping IQRs (variant q3 < CPU q1), as (previous tested, this); `never` within the tested rows")
        self.crossover = df
        sec.lines.append("Criterion: the variant's third quartile lies below the CPU reference's first quartile "
                         "(one-shot or pipelined for device variants; host_wall for host variants, whose input is "
                         "already on the host).")
        sec.lines.append("")
        sec.lines.append("| variant | boundary | features | bracket (rows) | stays ahead |")
        sec.lines.append("| --- | --- | --- | --- | --- |")
        for _, r in df.iterrows():
            sec.lines.append(f"| `{r.variant}` | {A.boundary(r.timer, r.memory_kind)} | {r.features} | {r.bracket} | "
                             f"{'' if r.bracket == 'never' else ('yes' if r.median_below_cpu_at_all_larger else 'no')} |")
        return sec

    def section_layout(self):
        # Archives are the same machine when their GPU and CPU models match.
        machine = {a.label: (a.environment.get("gpu_name", ""), a.environment.get("cpu_model", "")) for a in self.archives}
        sec = Section("Layout: row-major vs feature-major vs padded")
        s = self.scoring[self.scoring.timer.isin(RESIDENT) & (self.scoring.block_size == 0)]
        transposes = {}
        for a, e in self.experiments("transpose"):
            st = A.stats(e.accepted(), ["rows", "features"])
            dev = a.environment.get("default_execution_space", "").lower()
            for _, r in st.iterrows():
                transposes[(a.label, int(r.rows), int(r.features))] = (r["median"], dev)
        rows = []
        for (arch, exp, rows_, feats, timer), g in s.groupby(["archive", "experiment", "rows", "features", "timer"]):
            parts = {}
            for _, r in g.iterrows():
                base, layout, flavour, back = A.split_layout(r.variant)
                parts.setdefault((base, back), []).append((layout, flavour, r))
            for (base, back), items in parts.items():
                feature = next((r for l, f, r in items if l == "feature_major" and not f), None)
                padded = next((r for l, f, r in items if l == "padded" and not f), None)
                if feature is None:
                    continue
                for layout, flavour, r in items:
                    if layout != "row_major":
                        continue
                    t_row, t_feat = r["median"], feature["median"]
                    tr = transposes.get((arch, int(rows_), int(feats)))
                    if tr is None:  # a transpose measured by another archive of the same machine
                        tr = next((v for k, v in transposes.items() if k[1:] == (int(rows_), int(feats))
                                   and machine.get(k[0]) == machine.get(arch)), None)
                    if tr is None:
                        transpose_s, reuse = np.nan, "no transpose measured at this shape"
                    elif tr[1] and tr[1] != back:
                        transpose_s, reuse = tr[0], f"n/a (transpose measured on {tr[1]})"
                    else:
                        transpose_s = tr[0]
                        reuse = "never" if t_row <= t_feat else f"{tr[0] / (t_row - t_feat):.3g}"
                    rows.append({"archive": arch, "experiment": exp, "family": f"{base}@{back}", "timer": timer,
                                 "rows": rows_, "features": feats, "row_variant": r.variant, "t_row_s": t_row,
                                 "t_feature_s": t_feat, "t_padded_s": padded["median"] if padded is not None else np.nan,
                                 "row_over_feature": t_row / t_feat,
                                 "padded_over_feature": padded["median"] / t_feat if padded is not None else np.nan,
                                 "transpose_s": transpose_s, "break_even_reuses": reuse})
        if not rows and not transposes:
            return sec.skip("no scoring experiment with both row-major and feature-major variants, and no "
                            "`layout_transpose` experiment")
        if rows:
            df = pd.DataFrame(rows)
            self.write_csv(df, "layout.csv", sec,
                           "resident medians (s) per layout, ratios to feature-major, transpose time and break-even "
                           "reuses = transpose / (t_row - t_feature), `never` where row-major is already as fast")
            self.layout = df
            from . import plots
            name = plots.layout_ratio(df, self.out)
            if name:
                sec.figures.append((name, "Row-major and padded time over feature-major time vs feature width"))
            else:
                sec.lines.append("Layout-ratio figure skipped: no row-major / feature-major pair was measured at two "
                                 "or more feature widths (widths present: "
                                 f"{', '.join(str(f) for f in sorted(df.features.unique()))}; the `feature_sweep` "
                                 "experiment varies them).")
            rows_, feats = self.shape
            at = df[(df.rows == rows_) & (df.features == feats)]
            for _, r in at.iterrows():
                sec.lines.append(f"- {A.fmt_rows(rows_)}×{feats} ({r.experiment}), `{r.row_variant}` ({r.timer}): row/feature "
                                 f"{r.row_over_feature:.2f}"
                                 + (f", padded/feature {r.padded_over_feature:.2f}" if np.isfinite(r.padded_over_feature) else "")
                                 + f"; transpose {A.fmt_seconds(r.transpose_s)}; {reuse_words(r.break_even_reuses)}")
        else:
            sec.lines.append("No scoring experiment holds row-major and feature-major variants of one family: "
                             "ratios and break-even skipped.")
        if transposes:
            t = pd.DataFrame([{"archive": k[0], "rows": k[1], "features": k[2], "transpose_s": v[0], "space": v[1]}
                              for k, v in transposes.items()])
            self.write_csv(t, "transpose.csv", sec, "resident row-major -> feature-major conversion, median s")
        return sec

    def section_block_size(self):
        sec = Section("Block size")
        s = self.scoring[self.scoring.block_size > 0]
        if s.empty:
            return sec.skip("no scoring samples with an explicit block size (the `block_size` experiment)")
        cols = ["archive", "experiment", "variant", "layout", "rows", "features", "timer", "block_size", "n", "median",
                "q1", "q3"]
        has_occupancy = "occupancy" in s.columns and (s.occupancy.fillna(0) > 0).any()
        if has_occupancy:
            cols.append("occupancy")
        df = s[cols].sort_values(cols[:8])
        self.block_sizes = df
        self.write_csv(df, "block_size.csv", sec, "median/IQR (s) per block size and layout"
                       + ("; calculated occupancy (active warps / maximum) as recorded by the run" if has_occupancy else ""))
        if not has_occupancy:
            sec.lines.append("No calculated occupancy in these archives (0 or absent): runtime only.")
        for (v, r, f, t), g in df.groupby(["variant", "rows", "features", "timer"]):
            best = g.loc[g["median"].idxmin()]
            worst = g.loc[g["median"].idxmax()]
            occ = f", occupancy {best.occupancy:.2f}" if has_occupancy and best.occupancy > 0 else ""
            sec.lines.append(f"- `{v}` {A.fmt_rows(r)}×{f} ({t}): best block {best.block_size} "
                             f"({A.fmt_seconds(best['median'])}{occ}), worst {worst.block_size} "
                             f"({worst['median'] / best['median']:.2f}× slower)")
        from . import plots
        name = plots.block_size(df, self.out)
        if name:
            sec.figures.append((name, "Runtime vs block size per variant and shape"
                                + ("; dotted, right axis: calculated occupancy" if has_occupancy else "")))
        return sec

    def section_seed(self):
        """The seed article's conclusions (its numbers quoted as constants) against this archive's data."""
        sec = Section("The seed's conclusions on this machine")
        rows = []

        def add(claim, seed, here, verdict):
            rows.append({"claim": claim, "seed": seed, "here": here, "verdict": verdict})

        for memory, variant, kernel, total in self.waterfall_totals():
            kept = kernel / total
            add(f"one-shot ({memory}) keeps a few % of the resident speedup at 1,048,576×16",
                "3.2% kept (324× → 10.4×, pageable NumPy in and out)",
                f"{100 * kept:.1f}% kept (`{variant}`: kernel {A.fmt_seconds(kernel)}, one-shot "
                f"{A.fmt_seconds(total)})", "holds" if kept < 0.1 else "changes: transfers erase less")
        cr = getattr(self, "crossover", None)
        if cr is not None and len(cr):
            g = cr[(cr.timer == "one_shot") & (cr.memory_kind == "pageable") & (cr.bracket != "never")]
            tested = cr[(cr.timer == "one_shot") & (cr.memory_kind == "pageable")]
            for family, seed_rows in (("fused_cuda", 4096), ("composed", 16384)):
                h = g[g.variant.str.startswith(family)]
                if not len(h) and len(tested[tested.variant.str.startswith(family)]):
                    add(f"{family} first beats the CPU one-shot from pageable memory", f"at {seed_rows:,} rows (vs NumPy)",
                        f"never up to {int(tested.tested_rows_max.max()):,} rows (vs `cpu_reference@openmp`)",
                        "changes: from pageable memory the multi-threaded CPU wins at every tested size")
                if len(h):
                    first = int(h.first_winning_rows.astype(int).min())
                    verdict = ("holds (within one doubling)" if seed_rows / 2 <= first <= seed_rows * 2 else
                               "changes: " + ("earlier" if first < seed_rows else "later"))
                    add(f"{family} first beats the CPU one-shot from pageable memory", f"at {seed_rows:,} rows (vs NumPy)",
                        f"at {first:,} rows (vs `cpu_reference@openmp`, separate IQRs)", verdict)
        lay = getattr(self, "layout", None)
        if lay is not None and len(lay):
            res = lay[lay.timer == "resident_wall"]
            for variant, claim_seed in (("fused_cuda_row_major@cuda", "1.83× (plain row-major kernel)"),
                                        ("fused_cuda_row_major_tiled@cuda", "1.83× (plain row-major kernel)"),
                                        ("fused_kokkos_row_major@cuda", "1.83× (plain row-major kernel)")):
                h = res[(res.row_variant == variant) & (res.rows == 262144) & (res.features == 256)]
                if len(h):
                    ratio = float(h.row_over_feature.iloc[0])
                    add(f"feature-major beats row-major at 262,144×256 (`{variant}`)", claim_seed,
                        f"row-major / feature-major = {ratio:.2f}",
                        "holds" if ratio > 1.5 else ("changes: row-major coalesced, ratio near 1" if ratio < 1.2
                                                     else "changes: smaller gap"))
            h = res[res.row_variant == "fused_cuda_row_major@cuda"]
            for (r, f), seed_text in (((262144, 256), "5.4 reuses"), ((1048576, 16), "≈1,450 reuses"),
                                      ((4194304, 16), "> 10,000 reuses")):
                k = h[(h.rows == r) & (h.features == f)]
                if len(k) and isinstance(k.break_even_reuses.iloc[0], (int, float, str)):
                    value = k.break_even_reuses.iloc[0]
                    seed_value = {(262144, 256): 5.4, (1048576, 16): 1450.0, (4194304, 16): 10000.0}[(r, f)]
                    try:
                        reuses = float(value)
                        here, verdict = f"{reuses:.3g} reuses", (
                            "holds (same order)" if seed_value / 3 <= reuses <= seed_value * 3 else
                            "changes: pays back " + ("sooner" if reuses < seed_value else "later"))
                    except (TypeError, ValueError):
                        here, verdict = str(value), "changes" if value == "never" else "not comparable"
                    add(f"transpose break-even at {r:,}×{f} (`fused_cuda_row_major@cuda`)", seed_text, here, verdict)
            k = h[(h.rows == 4194304) & (h.features == 16)]
            if len(k) and "t_padded_s" in k and k.t_padded_s.notna().iloc[0]:
                ratio = float(k.t_padded_s.iloc[0] / k.t_row_s.iloc[0])
                add("padded stride is slower than row-major at 4,194,304×16 (`fused_cuda`)", "up to 1.16×",
                    f"{ratio:.2f}×", "holds" if 1.0 < ratio <= 1.3 else "changes")
        bs = getattr(self, "block_sizes", None)
        if bs is not None and len(bs) and "occupancy" in bs.columns:
            if (bs.timer == "device_events").any():
                bs = bs[bs.timer == "device_events"]
            for (v, r, f, t), g in bs.groupby(["variant", "rows", "features", "timer"]):
                g = g[g.occupancy > 0]
                if len(g) < 2 or g.occupancy.max() < 2 * g.occupancy.min():
                    continue
                lo, hi = g.loc[g.occupancy.idxmin()], g.loc[g.occupancy.idxmax()]
                change = lo["median"] / hi["median"]
                add(f"doubling calculated occupancy changes little (`{v}` {A.fmt_rows(r)}×{f})",
                    "almost no change (feature-major 262,144×256)",
                    f"occupancy {lo.occupancy:.2f} → {hi.occupancy:.2f}: time × {1 / change:.2f}",
                    "holds" if 0.9 <= change <= 1.1 else "changes")
        if not rows:
            return sec.skip("none of the seed's measured points is in these archives")
        df = pd.DataFrame(rows)
        self.write_csv(df, "seed_comparison.csv", sec, "the seed article's claims beside this archive's numbers")
        sec.lines.append("The seed's baseline was single-threaded NumPy (150.6 ms at 1,048,576×16); kstudy's is the "
                         "multi-threaded Kokkos OpenMP `cpu_reference`, so speedups are smaller by design and "
                         "crossovers move to larger tables.")
        sec.lines.append("")
        sec.lines.append("| claim | seed | here | verdict |")
        sec.lines.append("| --- | --- | --- | --- |")
        for r in rows:
            sec.lines.append(f"| {r['claim']} | {r['seed']} | {r['here']} | {r['verdict']} |")
        return sec

    def transfer_table(self):
        out = []
        for a, e in self.experiments("transfer"):
            all_ = e.samples
            if all_.empty:
                continue
            counts = all_.assign(ok=(all_.gate_passed == 1) & (all_.status == "ok") & (all_.trial >= 0)) \
                .groupby(["bytes", "direction", "memory_kind"]).ok.agg(n_ok="sum", n_all="size").reset_index()
            st = A.stats(e.accepted(), ["bytes", "direction", "memory_kind"])
            df = counts.merge(st, on=["bytes", "direction", "memory_kind"], how="left")
            df["n_failed"] = df.n_all - df.n_ok
            df["GiB_per_s"] = df.bytes / df["median"] / 2**30
            df["GiB_per_s_at_q3"] = df.bytes / df.q3 / 2**30
            df["GiB_per_s_at_q1"] = df.bytes / df.q1 / 2**30
            status = all_[all_.status != "ok"].groupby(["bytes", "direction", "memory_kind"]).status.first()
            df = df.merge(status.rename("failure").reset_index(), on=["bytes", "direction", "memory_kind"], how="left")
            df.insert(0, "experiment", e.name)
            df.insert(0, "archive", a.label)
            out.append(df)
        if not out:
            return pd.DataFrame()
        df = pd.concat(out, ignore_index=True)
        return df[["archive", "experiment", "bytes", "direction", "memory_kind", "n_ok", "n_failed", "median", "q1",
                   "q3", "GiB_per_s", "GiB_per_s_at_q3", "GiB_per_s_at_q1", "failure"]]

    def section_transfer(self):
        sec = Section("Transfer calibration")
        df = self.transfer_table()
        if df.empty:
            return sec.skip("no `transfer_calibration` experiment in the archives")
        df = df.sort_values(["archive", "direction", "memory_kind", "bytes"])
        self.write_csv(df, "transfer.csv", sec, "host<->device copy: median seconds and GiB/s by size × direction × memory kind")
        self.transfers = df
        ok = df[df.n_ok > 0]
        if ok.empty:
            sec.lines.append(f"Every transfer sample failed ({df.failure.dropna().iloc[0] if df.failure.notna().any() else 'no reason recorded'}): "
                             "no bandwidth to report; the table lists the attempted points.")
            return sec
        for (d, m), g in ok.groupby(["direction", "memory_kind"]):
            big = g.loc[g.bytes.idxmax()]
            small = g.loc[g.bytes.idxmin()]
            sec.lines.append(f"- {d} {m}: {big.GiB_per_s:.1f} GiB/s at {big.bytes / 2**20:,.0f} MiB; "
                             f"{small.GiB_per_s:.2f} GiB/s at {small.bytes / 2**10:,.0f} KiB")
        from . import plots
        name = plots.transfer(ok, self.out)
        if name:
            sec.figures.append((name, "Copy bandwidth vs size, per direction and host memory kind"))
        return sec

    def bandwidth(self, arch, direction, memory, nbytes):
        """Bytes/s for a copy of nbytes: the archive's transfer_calibration medians (log-log interpolated
        in size), else its ceiling; returns (bytes/s, source)."""
        t = getattr(self, "transfers", None)
        if t is not None and not t.empty:
            g = t[(t.archive == arch) & (t.direction == direction) & (t.memory_kind == memory) & (t.n_ok > 0)]
            g = g.sort_values("bytes")
            if len(g) >= 2 and g.bytes.min() <= nbytes <= g.bytes.max():
                bw = np.exp(np.interp(np.log(nbytes), np.log(g.bytes.to_numpy(float)),
                                      np.log((g.bytes / g["median"]).to_numpy(float))))
                return float(bw), "transfer_calibration medians"
        c = self.archive_of(arch).ceiling(f"{direction}_{memory}")
        if c:
            return c, f"ceiling {direction}_{memory}"
        return None, "none"

    def section_waterfall(self):
        sec = Section("Where the ratio goes: resident to one-shot")
        rows, feats = self.shape
        if self.scoring.empty:
            return sec.skip("no scoring experiment")
        s = self.scoring[(self.scoring.rows == rows) & (self.scoring.features == feats) & (self.scoring.block_size == 0)]
        resident = s[s.timer == "resident_wall"]
        oneshot = s[s.timer == "one_shot"]
        if resident.empty or oneshot.empty:
            return sec.skip(f"needs resident_wall and one_shot samples of a device variant at "
                            f"{A.fmt_rows(rows)}×{feats}")
        # The same archive and experiment must hold the variant's one-shot samples too.
        keys = set(zip(oneshot.archive, oneshot.experiment, oneshot.variant))
        both = resident[[k in keys for k in zip(resident.archive, resident.experiment, resident.variant)]]
        if both.empty:
            return sec.skip("no variant has both resident_wall and one_shot samples at that shape")
        best = both.loc[both["median"].idxmin()]
        arch, exp, variant = best.archive, best.experiment, best.variant
        base = self.baselines[(self.baselines.archive == arch) & (self.baselines.experiment == exp) &
                              (self.baselines.rows == rows) & (self.baselines.features == feats)]
        cpu = float(base.cpu_median.iloc[0]) if len(base) else None
        up_b = A.upload_bytes(rows, feats, int(best.pitch))
        down_b = A.download_bytes(rows)
        comps = []
        for memory in ("pinned", "pageable"):
            one = oneshot[(oneshot.archive == arch) & (oneshot.experiment == exp) & (oneshot.variant == variant) &
                          (oneshot.memory_kind == memory)]
            if one.empty:
                continue
            up_bw, up_src = self.bandwidth(arch, "h2d", memory, up_b)
            down_bw, down_src = self.bandwidth(arch, "d2h", memory, down_b)
            kernel = float(best["median"])
            total = float(one["median"].iloc[0])
            up = up_b / up_bw if up_bw else np.nan
            down = down_b / down_bw if down_bw else np.nan
            entries = [("kernel (resident_wall)", kernel, "measured"),
                       (f"upload {up_b / 2**20:.1f} MiB", up, up_src),
                       (f"download {down_b / 2**20:.1f} MiB", down, down_src)]
            alloc = s[(s.archive == arch) & (s.experiment == exp) & (s.variant == variant) &
                      (s.timer == "one_shot_alloc") & (s.memory_kind == memory)]
            explained = kernel + np.nansum([up, down])
            if len(alloc):
                entries.append(("allocation (one_shot_alloc - one_shot)", float(alloc["median"].iloc[0]) - total, "measured"))
            entries.append(("other (one_shot - sum of the above)", total - explained, "remainder"))
            for name, sec_, src in entries:
                comps.append({"archive": arch, "experiment": exp, "variant": variant, "memory_kind": memory,
                              "rows": rows, "features": feats, "component": name, "seconds": sec_, "source": src})
            comps.append({"archive": arch, "experiment": exp, "variant": variant, "memory_kind": memory, "rows": rows,
                          "features": feats, "component": "one_shot (measured total)", "seconds": total,
                          "source": "measured"})
            if len(alloc):
                comps.append({"archive": arch, "experiment": exp, "variant": variant, "memory_kind": memory, "rows": rows,
                              "features": feats, "component": "one_shot_alloc (measured total)",
                              "seconds": float(alloc["median"].iloc[0]), "source": "measured"})
            line = (f"- `{variant}` from {memory} memory: resident {A.fmt_seconds(kernel)} → one-shot "
                    f"{A.fmt_seconds(total)} ({total / kernel:.1f}× longer); upload ≈ {A.fmt_seconds(up)} and download ≈ "
                    f"{A.fmt_seconds(down)} ({up_src if up_src == down_src else up_src + '; ' + down_src})")
            if cpu:
                line += (f"; speedup over the CPU reference {cpu / kernel:.1f}× resident → {cpu / total:.2f}× one-shot")
            sec.lines.append(line)
        if not comps:
            return sec.skip("no one_shot samples for the best resident variant")
        df = pd.DataFrame(comps)
        self.write_csv(df, f"waterfall_{rows}x{feats}.csv", sec,
                       "resident → one-shot decomposition; upload/download derived from copy bandwidth (source column)")
        self.waterfall = (df, cpu)
        from . import plots
        cpus = [("archive CPU reference", cpu)] if cpu else []
        bench = self.bench_cpu_at(rows, feats)
        if bench:
            cpus.append((f"CPU reference from {Path(self.cpu_baseline_path).name}", bench))
        name = plots.waterfall(df, cpus, self.out, rows, feats)
        sec.figures.append((name, f"Waterfall at {A.fmt_rows(rows)}×{feats} for the fastest resident variant: kernel, "
                                  "upload, download, remainder, measured one-shot; CPU reference as a line"))
        sec.lines.insert(0, f"Variant: the fastest resident device variant at {A.fmt_rows(rows)}×{feats} that also has "
                            f"one-shot samples. Upload = x ({A.fmt_rows(rows)} rows × pitch {int(best.pitch)} floats) + "
                            "3 feature vectors; download = score (float) + flag (uint8) per row.")
        return sec

    def section_roofline(self):
        sec = Section("Roofline")
        if self.scoring.empty:
            return sec.skip("no scoring experiment")
        s = self.scoring[self.scoring.block_size == 0].copy()
        rows, feats = self.shape
        picks = []
        ref = s[(s.rows == rows) & (s.features == feats)]
        if len(ref):
            picks.append((f"{A.fmt_rows(rows)}×{feats}", ref))
        size = s.rows * s.features
        largest = s[size == size.max()]
        if largest.rows.iloc[0] != rows or largest.features.iloc[0] != feats:
            picks.append((f"{A.fmt_rows(largest.rows.iloc[0])}×{largest.features.iloc[0]} (largest tested)", largest))
        out = []
        for label, g in picks:
            for _, r in g.iterrows():
                a = self.archive_of(r.archive)
                roof = {"resident_wall": "device_read", "device_events": "device_read", "host_wall": "host_read"}.get(r.timer)
                if roof is None and r.memory_kind in ("pinned", "pageable"):
                    roof = f"h2d_{r.memory_kind}"
                bw = a.ceiling(roof) if roof else None
                fl = A.flops(r.rows, r.features)
                eb = A.essential_bytes(r.rows, r.features)
                ai = fl / eb
                gflops = fl / r["median"] / 1e9
                out.append({"shape": label, "archive": r.archive, "experiment": r.experiment, "variant": r.variant,
                            "timer": r.timer, "memory_kind": r.memory_kind, "boundary": r.boundary, "rows": r.rows,
                            "features": r.features, "flops": fl, "essential_bytes": eb, "model_bytes": r.bytes,
                            "ai_flop_per_byte": ai, "model_ai_flop_per_byte": fl / r.bytes if r.bytes else np.nan,
                            "median_s": r["median"], "gflop_per_s": gflops,
                            "essential_GB_per_s": eb / r["median"] / 1e9, "roof": roof or "",
                            "roof_GB_per_s": bw / 1e9 if bw else np.nan,
                            "roof_gflop_per_s": ai * bw / 1e9 if bw else np.nan,
                            "fraction_of_roof": gflops / (ai * bw / 1e9) if bw else np.nan})
        df = pd.DataFrame(out)
        self.write_csv(df, "roofline.csv", sec,
                       f"arithmetic intensity = {A.FLOPS_PER_ELEMENT} flops per element / essential bytes; achieved "
                       "GFLOP/s; roof = the matching ceiling of the same archive × intensity")
        ceilings = {a.label: a.ceilings() for a in self.archives}
        from . import plots
        name = plots.roofline(df, ceilings, self.out)
        sec.figures.append((name, "Roofline: achieved GFLOP/s at the operation's arithmetic intensity "
                                  f"({A.FLOPS_PER_ELEMENT} flops per element: sub, mul, 2 compares, fma; essential bytes: x "
                                  "read once, score and flag written once) against the archive's measured bandwidth "
                                  "ceilings; hollow markers place resident variants at their modelled traffic instead"))
        sec.lines.append(f"The operation moves {A.essential_bytes(rows, feats) / 1e6:.1f} MB of essential bytes at "
                         f"{A.fmt_rows(rows)}×{feats} and does {A.FLOPS_PER_ELEMENT} flops per element: intensity "
                         f"{A.flops(rows, feats) / A.essential_bytes(rows, feats):.2f} flop/B, far below any machine "
                         "balance point, so every roof that applies is a bandwidth roof.")
        for label, g in df.groupby("shape", sort=False):
            for timer_set, roof_name in ((("resident_wall", "device_events"), "device_read"), (("host_wall",), "host_read")):
                h = g[g.timer.isin(timer_set) & g.fraction_of_roof.notna()]
                if h.empty:
                    continue
                b = h.loc[h.fraction_of_roof.idxmax()]
                sec.lines.append(f"- {label}, {'/'.join(timer_set)}: best `{b.variant}` ({b.timer}) at "
                                 f"{b.essential_GB_per_s:.0f} GB/s essential = {100 * b.fraction_of_roof:.0f}% of "
                                 f"{roof_name} ({b.roof_GB_per_s:.0f} GB/s)")
            for memory in ("pinned", "pageable"):
                h = g[(g.timer == "one_shot") & (g.memory_kind == memory) & g.fraction_of_roof.notna()]
                if h.empty:
                    continue
                b = h.loc[h.fraction_of_roof.idxmax()]
                sec.lines.append(f"- {label}, one_shot {memory}: best `{b.variant}` at {b.essential_GB_per_s:.1f} GB/s "
                                 f"essential = {100 * b.fraction_of_roof:.0f}% of h2d_{memory} ({b.roof_GB_per_s:.1f} GB/s)")
        return sec

    # ------------------------------------------------------------------ external CPU baseline
    def bench_baseline(self):
        """cpu_reference@openmp per-repetition times from a Google Benchmark JSON (kstudy_bench)."""
        doc = json.loads(Path(self.cpu_baseline_path).read_text())
        scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
        rows = []
        for b in doc.get("benchmarks", []):
            if b.get("run_type") != "iteration" or b.get("error_occurred"):
                continue
            parts = b["run_name"].split("/")
            if not A.is_reference(parts[0]) or len(parts) < 2 or "x" not in parts[1]:
                continue
            r, f = (int(x) for x in parts[1].split("x"))
            rows.append({"baseline": parts[0], "rows": r, "features": f,
                         "seconds": b["real_time"] * scale[b.get("time_unit", "ns")]})
        df = pd.DataFrame(rows)
        if df.empty:
            return df
        df = df[df.baseline == sorted(df.baseline.unique(), key=lambda v: (A.backend(v) != "openmp", v))[0]]
        return A.stats(df, ["baseline", "rows", "features"])

    def bench_cpu_at(self, rows, feats):
        if not self.cpu_baseline_path:
            return None
        b = self.bench_baseline()
        hit = b[(b.rows == rows) & (b.features == feats)] if len(b) else b
        return float(hit["median"].iloc[0]) if len(hit) else None

    def section_bench_baseline(self):
        sec = Section(f"Against an external CPU baseline ({Path(self.cpu_baseline_path).name})")
        base = self.bench_baseline()
        if base.empty:
            return sec.skip("no cpu_reference repetitions in that benchmark file")
        s = self.scoring[(self.scoring.block_size == 0) & self.scoring.timer.map(A.is_device_timer)]
        df = s.merge(base.rename(columns={"median": "cpu_median", "q1": "cpu_q1", "q3": "cpu_q3", "n": "cpu_n"})
                     [["baseline", "rows", "features", "cpu_median", "cpu_q1", "cpu_q3", "cpu_n"]],
                     on=["rows", "features"])
        if df.empty:
            shapes = ", ".join(f"{r}x{f}" for r, f in zip(base.rows, base.features))
            return sec.skip(f"the benchmark's CPU shapes ({shapes}) are not in the archives")
        df["speedup"] = df.cpu_median / df["median"]
        df["beats_cpu_iqr"] = df.q3 < df.cpu_q1
        cols = ["archive", "experiment", "variant", "rows", "features", "timer", "memory_kind", "boundary", "n", "median",
                "q1", "q3", "baseline", "cpu_n", "cpu_median", "cpu_q1", "cpu_q3", "speedup", "beats_cpu_iqr"]
        df = df.sort_values(["rows", "features", "boundary", "median"])
        self.write_csv(df[cols], "speedup_vs_bench_cpu.csv", sec,
                       "speedups against the benchmark file's CPU reference repetitions (same shapes only)")
        sec.lines.append(f"CPU reference from `{Path(self.cpu_baseline_path).name}` (each sample = one Google Benchmark "
                         "repetition's mean time) against the archives' device timings; only shapes present in both "
                         "files (host variants of the archives are left out: they ran in another process). Crossover brackets need a CPU "
                         "baseline at every tested row count, so they stay with the archive's own baseline.")
        sec.lines.append("")
        sec.lines.append("| shape | boundary | best variant | median | CPU median | speedup | IQRs separate |")
        sec.lines.append("| --- | --- | --- | --- | --- | --- | --- |")
        for (r, f, b), g in df.groupby(["rows", "features", "boundary"]):
            best = g.loc[g["median"].idxmin()]
            sec.lines.append(f"| {A.fmt_rows(r)}×{f} | {b} | `{best.variant}` | {A.fmt_seconds(best['median'])} | "
                             f"{A.fmt_seconds(best.cpu_median)} | {best.speedup:.2f}× | "
                             f"{'yes, GPU faster' if best.beats_cpu_iqr else ('yes, CPU faster' if best.q1 > best.cpu_q3 else 'no')} |")
        self.bench_speedups = df
        return sec

    def resident_timings(self):
        """Measured resident medians per scoring point, device_events before resident_wall (host_wall for host variants)."""
        rank = {"device_events": 0, "resident_wall": 1, "host_wall": 2}
        t = self.scoring[self.scoring.timer.isin(list(rank))].copy()
        if t.empty:
            return t
        t["timer_rank"] = t.timer.map(rank)
        return t.sort_values(["timer_rank", "archive", "experiment"], kind="stable")

    def section_profile(self):
        sec = Section("Hardware counters (Nsight Compute)")
        frames, versions = [], {}
        for a in self.archives:
            for e in a.experiments.values():
                if e.profile.empty:
                    continue
                frames.append(e.profile.assign(profile_archive=a.label))
                versions[f"{a.label}/{e.name}"] = e.profile_attrs.get("ncu_version", "ncu (version not recorded)")
        if not frames:
            return sec.skip("no profile table in the archives (`kstudy profile` writes one)")
        prof = pd.concat(frames, ignore_index=True)
        nan = np.nan
        ratio = lambda a, b: np.where((b > 0) & np.isfinite(b), a / b.where(b > 0, 1.0), nan)  # noqa: E731
        prof["dram_bytes"] = prof.dram_bytes_read + prof.dram_bytes_written
        prof["profiled_dram_GBps"] = ratio(prof.dram_bytes, prof.profiled_duration_s) / 1e9
        prof["sectors_per_load_request"] = ratio(prof.global_load_sectors, prof.global_load_requests)
        prof["sectors_per_store_request"] = ratio(prof.global_store_sectors, prof.global_store_requests)

        # Measured medians from the timing archives: same variant, layout, shape and block size; the same
        # experiment preferred. Instrumented durations never stand in for them.
        timings = self.resident_timings()
        keys = ["variant", "layout", "rows", "features", "block_size"]
        joined = {}
        for key, g in prof.groupby(keys + ["experiment"], sort=False):
            k = dict(zip(keys + ["experiment"], key))
            c = timings
            if len(c):
                c = c[(c.variant == k["variant"]) & (c.layout == k["layout"]) & (c.rows == k["rows"]) &
                      (c.features == k["features"]) & (c.block_size == k["block_size"])]
            same = c[c.experiment == k["experiment"]] if len(c) else c
            pick = (same if len(same) else c).iloc[0] if len(c) else None
            joined[key] = ({"timing_archive": pick.archive, "timing_experiment": pick.experiment, "timing_timer": pick.timer,
                            "timing_n": pick.n, "median_s": pick["median"], "q1_s": pick.q1, "q3_s": pick.q3}
                           if pick is not None else
                           {"timing_archive": "", "timing_experiment": "", "timing_timer": "", "timing_n": 0,
                            "median_s": nan, "q1_s": nan, "q3_s": nan})
        timing_cols = ["timing_archive", "timing_experiment", "timing_timer", "timing_n", "median_s", "q1_s", "q3_s"]
        tj = pd.DataFrame([dict(zip(keys + ["experiment"], k), **v) for k, v in joined.items()])
        prof = prof.merge(tj, on=keys + ["experiment"], how="left")

        cols = ["profile_archive", "experiment", "variant", "layout", "rows", "features", "block_size", "point", "status",
                "launch", "label", "kernel", "grid_size", "launch_block_size", "registers_per_thread",
                "profiled_duration_s", "dram_bytes_read", "dram_bytes_written", "profiled_dram_GBps",
                "dram_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct",
                "sectors_per_load_request", "sectors_per_store_request", "global_load_sectors", "global_load_requests",
                "global_store_sectors", "global_store_requests"] + timing_cols
        # Within a point, the order the profiling child ran the variants (the experiment's), kernels in launch order.
        prof = prof.sort_values(["profile_archive", "experiment", "point"], kind="stable")
        self.write_csv(prof[cols], "profile.csv", sec,
                       "one row per profiled kernel launch: Nsight Compute counters (DRAM bytes and % of peak, "
                       "occupancy, registers, sectors per request) beside the measured median of the variant at that "
                       "point (median_s; blank where no timing archive has it)")

        # Per variant and point: counters summed over the call's kernels; occupancy and registers of its
        # longest kernel.
        rows = []
        for key, g in prof.groupby(["profile_archive", "experiment", "point", "variant"], sort=False):
            k = g[g.launch >= 0]
            first = g.iloc[0]
            r = {c: first[c] for c in ["profile_archive", "experiment", "variant", "layout", "rows", "features",
                                       "block_size", "point", "status"] + timing_cols}
            r["kernels"] = len(k)
            if len(k):
                duration = k.profiled_duration_s.sum()
                longest = k.loc[k.profiled_duration_s.fillna(-1).idxmax()]
                r.update({
                    "profiled_duration_s": duration,
                    "profiled_dram_GBps": k.dram_bytes.sum() / duration / 1e9 if duration > 0 else nan,
                    "dram_throughput_pct": (k.dram_throughput_pct * k.profiled_duration_s).sum() / duration
                    if duration > 0 else nan,
                    "achieved_occupancy_pct": longest.achieved_occupancy_pct,
                    "theoretical_occupancy_pct": longest.theoretical_occupancy_pct,
                    "registers_per_thread": longest.registers_per_thread,
                    "longest_kernel": longest.label if longest.label else longest.kernel,
                    "sectors_per_load_request": k.global_load_sectors.sum() / k.global_load_requests.sum()
                    if k.global_load_requests.sum() > 0 else nan,
                    "dram_bytes_per_essential_byte": k.dram_bytes.sum() / A.essential_bytes(first.rows, first.features),
                })
            r["measured_effective_GBps"] = (A.essential_bytes(first.rows, first.features) / r["median_s"] / 1e9
                                            if r["median_s"] > 0 else nan)
            rows.append(r)
        by = pd.DataFrame(rows)
        by_cols = ["profile_archive", "experiment", "variant", "layout", "rows", "features", "block_size", "point",
                   "status", "kernels", "profiled_duration_s", "profiled_dram_GBps", "dram_throughput_pct",
                   "achieved_occupancy_pct", "theoretical_occupancy_pct", "registers_per_thread", "longest_kernel",
                   "sectors_per_load_request", "dram_bytes_per_essential_byte"] + timing_cols + ["measured_effective_GBps"]
        by = by.reindex(columns=by_cols)
        self.write_csv(by, "profile_by_variant.csv", sec,
                       "per variant and point: DRAM GB/s over the profiled kernels, duration-weighted % of peak, "
                       "occupancy and registers of the longest kernel, sectors per load request, DRAM bytes per "
                       "essential byte, and the measured median with its effective GB/s")
        self.profile = by

        sec.lines.append("Counters from Nsight Compute " + "; ".join(f"{v} (`{k}`)" for k, v in versions.items()) + ", one "
                         "instrumented call per variant and point after a warm-up. *Profiled* GB/s divide DRAM bytes by "
                         "the kernels' duration under the profiler, which only puts the counters in proportion; the "
                         "*measured* column is the median of the timing archives (device events, else resident wall "
                         "clock), never an instrumented duration. Sectors/request: 32-byte sectors per global load "
                         "request (4 for coalesced 4-byte loads by a warp, 16 for float4; more means scattered).")
        sec.lines.append("")
        sec.lines.append("| variant | point | kernels | measured median | profiled DRAM GB/s (% of peak) | occupancy "
                         "achieved / theoretical | registers | sectors / load request | DRAM bytes / essential | status |")
        sec.lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

        def num(v, fmt):
            return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else format(v, fmt)

        for _, r in by.iterrows():
            measured = (f"{A.fmt_seconds(r.median_s)} ({r.timing_timer})" if np.isfinite(r.median_s) else "no timing")
            if r.kernels == 0:
                sec.lines.append(f"| `{r.variant}` | {A.fmt_rows(r.rows)}×{r.features} | 0 | {measured} | — | — | — | — | — "
                                 f"| {r.status} |")
                continue
            sec.lines.append(
                f"| `{r.variant}` | {A.fmt_rows(r.rows)}×{r.features}{f' b{r.block_size}' if r.block_size else ''} | "
                f"{r.kernels} | {measured} | {num(r.profiled_dram_GBps, ',.0f')} ({num(r.dram_throughput_pct, '.0f')}%) | "
                f"{num(r.achieved_occupancy_pct, '.0f')}% / {num(r.theoretical_occupancy_pct, '.0f')}% | "
                f"{num(r.registers_per_thread, '.0f')} | {num(r.sectors_per_load_request, '.2f')} | "
                f"{num(r.dram_bytes_per_essential_byte, '.2f')} | {r.status} |")
        ok = by[by.kernels > 0]
        for (rows_, feats), g in ok.groupby(["rows", "features"]):
            best = g.loc[g.profiled_dram_GBps.fillna(-1).idxmax()]
            sec.lines.append("")
            sec.lines.append(f"- {A.fmt_rows(rows_)}×{feats}: highest profiled DRAM throughput `{best.variant}` "
                             f"{num(best.profiled_dram_GBps, ',.0f')} GB/s ({num(best.dram_throughput_pct, '.0f')}% of "
                             f"peak); most DRAM traffic per essential byte `"
                             + g.loc[g.dram_bytes_per_essential_byte.fillna(-1).idxmax()].variant
                             + f"` ({num(g.dram_bytes_per_essential_byte.max(), '.2f')}×).")
        return sec

    # ------------------------------------------------------------------ findings and Markdown
    def health_summary(self):
        """Per archive and experiment: how many samples were taken while the GPU reported throttling."""
        rows = []
        for a in self.archives:
            for e in a.experiments.values():
                if e.samples.empty:
                    continue
                s, h = e.samples, e.health
                accepted = e.accepted()
                throttled = s.throttled == 1 if "throttled" in s.columns else pd.Series(False, index=s.index)
                row = {"archive": a.label, "experiment": e.name, "samples": len(s),
                       "throttled_samples": int(throttled.sum()), "accepted_samples": len(accepted),
                       "accepted_throttled": int((accepted.throttled == 1).sum()) if len(accepted) else 0,
                       "points": len(h), "points_monitored": 0, "throttled_points": 0, "reasons": "",
                       "device": "", "sm_clock_min_mhz": np.nan, "sm_clock_max_mhz": np.nan,
                       "temperature_max_c": np.nan, "power_max_w": np.nan}
                if not e.has_health_table:
                    row["device"] = "no health table (archive schema < 3)"
                elif len(h):
                    watched = h[h.available == 1]
                    row["points_monitored"] = len(watched)
                    row["throttled_points"] = int((h.throttled == 1).sum())
                    row["device"] = watched.device.iloc[0] if len(watched) else h.device.iloc[0]
                    reasons = sorted({r for text in h.reasons for r in text.split(",") if r})
                    row["reasons"] = ",".join(reasons)
                    if len(watched):
                        clocks = pd.concat([watched.before_sm_clock_mhz, watched.after_sm_clock_mhz])
                        clocks = clocks[clocks >= 0]
                        temps = pd.concat([watched.before_temperature_c, watched.after_temperature_c])
                        power = pd.concat([watched.before_power_mw, watched.after_power_mw])
                        row["sm_clock_min_mhz"] = clocks.min() if len(clocks) else np.nan
                        row["sm_clock_max_mhz"] = clocks.max() if len(clocks) else np.nan
                        row["temperature_max_c"] = temps[temps >= 0].max() if (temps >= 0).any() else np.nan
                        row["power_max_w"] = power[power >= 0].max() / 1000 if (power >= 0).any() else np.nan
                rows.append(row)
        return pd.DataFrame(rows)

    def health_sentence(self, r):
        """One line per experiment; 0 throttled samples is a finding too, but only where the GPU was watched."""
        if r.points_monitored == 0:
            return (f"- {r.archive}/{r.experiment}: GPU throttling unknown — not monitored ({r.device}); "
                    f"{r.samples} samples")
        text = (f"- {r.archive}/{r.experiment}: {r.throttled_samples} of {r.samples} samples taken while the GPU "
                f"reported throttling ({r.accepted_throttled} of the {r.accepted_samples} accepted samples that "
                f"enter the medians); {r.throttled_points} of {r.points_monitored} monitored points throttled on "
                f"{r.device}")
        if r.reasons:
            text += f"; reasons seen: {r.reasons.replace(',', ', ')}"
        if np.isfinite(r.sm_clock_min_mhz):
            text += f"; SM clock {r.sm_clock_min_mhz:.0f}–{r.sm_clock_max_mhz:.0f} MHz"
        if np.isfinite(r.temperature_max_c):
            text += f", up to {r.temperature_max_c:.0f} °C"
        if np.isfinite(r.power_max_w):
            text += f", up to {r.power_max_w:.0f} W"
        return text

    def section_health(self):
        sec = Section("GPU health (NVML, before and after each point)")
        df = self.health_summary()
        if df.empty:
            return sec.skip("no samples")
        self.write_csv(df, "gpu_health.csv", sec, "samples taken while throttled, clocks, temperature and power "
                                                  "per archive and experiment")
        sec.lines.append("A sample is flagged *throttled* when NVML reported a slowdown reason (SW power cap, HW "
                         "slowdown, SW or HW thermal, HW power brake) just before or just after its point; GPU idle "
                         "and application-clock settings do not count. Throttled samples stay in the medians; this "
                         "says how many there were.")
        sec.lines.append("")
        sec.lines.extend(self.health_sentence(r) for r in df.itertuples())
        return sec

    def best_per_regime(self):
        """Fastest variant per timing boundary at the smallest, reference and largest tested row counts."""
        if self.baselines.empty:
            return None
        sp = self.speedups()
        rows, feats = self.shape
        f = feats if (sp.features == feats).any() else sp.features.mode().iloc[0]
        sp = sp[sp.features == f]
        if sp.empty:
            return None
        picks = [("smallest", sp.rows.min()), ("reference", rows), ("largest", sp.rows.max())]
        out = []
        seen = set()
        from .plots import BOUNDARY_ORDER
        order = [b for b in BOUNDARY_ORDER if b in set(sp.boundary)] + sorted(set(sp.boundary) - set(BOUNDARY_ORDER))
        for label, r in picks:
            if r in seen or not (sp.rows == r).any():
                continue
            seen.add(r)
            size = f"{A.fmt_rows(r)}×{f}" + (" (reference)" if r == rows and f == feats else "")
            for b in order:
                g = sp[(sp.rows == r) & (sp.boundary == b)]
                if len(g):
                    x = g.loc[g["median"].idxmin()]
                    out.append({"size": size, "rows": r, "features": f, "boundary": b, "variant": x.variant,
                                "median": x["median"], "q1": x.q1, "q3": x.q3, "baseline": x.baseline,
                                "cpu_median": x.cpu_median, "speedup": x.speedup})
        df = pd.DataFrame(out)
        if len(df):
            df["boundary"] = pd.Categorical(df.boundary, categories=order, ordered=True)
            df = df.sort_values(["boundary", "rows"])
            df["boundary"] = df.boundary.astype(str)
        return df

    def waterfall_totals(self):
        """(memory kind, variant, kernel seconds, measured one-shot seconds) per memory kind of the waterfall."""
        wf = getattr(self, "waterfall", None)
        if wf is None:
            return []
        out = []
        for memory, g in wf[0].groupby("memory_kind", sort=False):
            kernel = g[g.component.str.startswith("kernel")].seconds.iloc[0]
            total = g[g.component == "one_shot (measured total)"].seconds.iloc[0]
            out.append((memory, g.variant.iloc[0], kernel, total))
        return out

    def findings(self):
        lines = []
        rows, feats = self.shape
        shape = f"{A.fmt_rows(rows)}×{feats}"
        best = self.best_per_regime()
        if best is not None and len(best):
            sizes = list(dict.fromkeys(best["size"]))
            lines.append("Best variant per regime (median; speedup over the archive's CPU reference):")
            lines.append("")
            lines.append("| timing boundary | " + " | ".join(sizes) + " |")
            lines.append("| --- |" + " --- |" * len(sizes))
            for b, g in best.groupby("boundary", sort=False):
                cells = []
                for size in sizes:
                    h = g[g["size"] == size]
                    cells.append("" if h.empty else f"`{h.variant.iloc[0]}` {A.fmt_seconds(h['median'].iloc[0])} "
                                                   f"({h.speedup.iloc[0]:.3g}×)")
                lines.append(f"| {b} | " + " | ".join(cells) + " |")
            lines.append("")
        wf = getattr(self, "waterfall", None)
        if wf is not None and wf[1]:
            cpu = wf[1]
            for memory, variant, kernel, total in self.waterfall_totals():
                lines.append(f"- **Resident → one-shot ({memory})**, `{variant}`: speedup "
                             f"{cpu / kernel:.1f}× → {cpu / total:.2f}×, the ratio shrinks {total / kernel:.1f}-fold "
                             f"(archive's CPU baseline).")
        bench = getattr(self, "bench_speedups", None)
        if bench is not None and wf is not None:
            df, _ = wf
            v = df.variant.iloc[0]
            g = bench[(bench.variant == v) & (bench.rows == rows) & (bench.features == feats)]
            res = g[g.timer == "resident_wall"]
            # One line per experiment that measured the shape (rows_sweep and quick both reach 1M x 16), named.
            for _, r in g[g.timer == "one_shot"].iterrows():
                same = res[res.experiment == r.experiment]
                if len(same):
                    lines.append(f"- **Against {Path(self.cpu_baseline_path).name}'s CPU ({A.fmt_seconds(r.cpu_median)})**, "
                                 f"`{v}` ({r.experiment}): {same.speedup.iloc[0]:.1f}× resident → {r.speedup:.2f}× one-shot "
                                 f"{r.memory_kind}{' — the GPU loses' if r.speedup < 1 else ''}.")
        cr = getattr(self, "crossover", None)
        if cr is not None and len(cr):
            dev = cr[cr.timer == "one_shot"]
            for memory, g in dev.groupby("memory_kind"):
                won = g[g.bracket != "never"]
                if len(won):
                    firsts = won.first_winning_rows.astype(int)
                    at_min = won[firsts == won.tested_rows_min]
                    last = won.loc[firsts.idxmax()]
                    never = g[g.bracket == "never"].variant.tolist()
                    text = (f"- **Crossover, one-shot {memory}**: {len(won)} of {len(g)} device variants beat the CPU "
                            f"reference (separate IQRs) within the tested rows; {len(at_min)} already at the smallest "
                            f"tested size ({A.fmt_rows(g.tested_rows_min.min())} rows); latest bracket {last.bracket} "
                            f"(`{last.variant}`)")
                    if never:
                        text += "; never: " + ", ".join(f"`{v}`" for v in never)
                    lines.append(text + ".")
                else:
                    lines.append(f"- **Crossover, one-shot {memory}**: no device variant beats the CPU reference "
                                 f"within {A.fmt_rows(g.tested_rows_max.max())} rows.")
        lay = getattr(self, "layout", None)
        if lay is not None and len(lay):
            g = lay[(lay.rows == rows) & (lay.features == feats) & (lay.timer == "resident_wall")]
            for _, r in g.iterrows():
                lines.append(f"- **Layout, {shape} ({r.experiment})**: `{r.row_variant}` / feature-major = "
                             f"{r.row_over_feature:.2f}; {reuse_words(r.break_even_reuses)}.")
        return lines

    def markdown(self):
        lines = ["# kstudy report", ""]
        lines.append("Generated by `kstudy report` from the archives below. Every number is computed from the "
                     "archives' samples (gate passed, status ok, measured trials); medians and quartiles use linear "
                     "interpolation.")
        if self.command:
            lines.append("")
            lines.append(f"Command: `{self.command}`")
        lines.append("")
        lines.append("| archive | file | schema | kstudy | git commit | created (UTC) | GPU | CPU | Kokkos | experiments |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for a in self.archives:
            env = a.environment
            commit = a.attrs.get("git_commit", "")[:12] + (" (dirty)" if a.attrs.get("git_dirty") == "true" else "")
            lines.append(f"| {a.label} | `{a.path.name}` | {a.schema_version} | {a.attrs.get('kstudy_version', '')} | "
                         f"{commit} | {a.attrs.get('created_utc', '')} | {env.get('gpu_name', '—')} | "
                         f"{env.get('cpu_model', '')} ({env.get('openmp_threads', '?')} OpenMP threads) | "
                         f"{env.get('kokkos_version', '')} | "
                         + ", ".join(f"{e.name} ({len(e.samples)} samples)" for e in a.experiments.values()) + " |")
        lines.append("")
        if self.notes:
            lines.append("## Notes supplied with this report")
            lines.append("")
            for n in self.notes:
                lines.append(f"> {n}")
                lines.append(">")
            lines.pop()
            lines.append("")
        gate_lines = []
        for a in self.archives:
            for e in a.experiments.values():
                if e.gate.empty and e.samples.empty:
                    continue
                counts = e.samples.status.map(lambda x: x.split(":")[0]).value_counts().to_dict() if len(e.samples) else {}
                passed = int(e.gate.passed.sum()) if len(e.gate) else 0
                failed = e.gate[e.gate.passed == 0] if len(e.gate) else e.gate
                text = f"- {a.label}/{e.name}: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())) + " samples"
                if len(e.gate):
                    text += f"; correctness gate passed {passed} of {len(e.gate)} (variant, shape) verdicts"
                    if len(failed):
                        text += " — rejected: " + ", ".join(
                            f"`{r.variant}` {r.rows}×{r.features}" for r in failed.head(8).itertuples())
                gate_lines.append(text)
        if gate_lines:
            lines.append("Samples by status (only `ok` samples of gate-passed variants count):")
            lines.append("")
            lines.extend(gate_lines)
            lines.append("")
        health = self.health_summary()
        if not health.empty:
            lines.append("Samples taken while the GPU reported throttling (details: GPU health section):")
            lines.append("")
            lines.extend(self.health_sentence(r) for r in health.itertuples())
            lines.append("")
        lines.append("## Findings")
        lines.append("")
        f = self.findings()
        lines.extend(f if f else ["No finding could be computed (see the skipped sections)."])
        lines.append("")
        c = [(a.label, a.ceilings()) for a in self.archives]
        lines.append("## Ceilings measured in the same runs")
        lines.append("")
        for label, df in c:
            if df.empty:
                continue
            lines.append(f"- {label}: " + "; ".join(f"{r.name} {r.bytes_per_second / 1e9:,.1f} GB/s"
                                                     for r in df.itertuples()))
        lines.append("")
        for sec in self.sections:
            lines.append(f"## {sec.title}")
            lines.append("")
            if sec.skipped:
                lines.append(f"*Skipped: {sec.skipped}.*")
                lines.append("")
                continue
            for name, caption in sec.figures:
                lines.append(f"![{caption}]({name})")
                lines.append("")
                lines.append(f"*{caption}.*")
                lines.append("")
            lines.extend(sec.lines)
            lines.append("")
            if sec.tables:
                lines.append("Tables: " + "; ".join(f"[`{n}`]({n}) ({d})" for n, d in sec.tables) + ".")
                lines.append("")
        return "\n".join(lines)

    def run(self):
        self.out.mkdir(parents=True, exist_ok=True)
        # Transfers first: the waterfall derives upload/download times from them.
        order = [self.section_overhead, self.section_speedups, self.section_crossover, self.section_transfer,
                 self.section_waterfall, self.section_layout, self.section_block_size, self.section_roofline,
                 self.section_profile, self.section_seed, self.section_health]
        if self.cpu_baseline_path:
            order.insert(2, self.section_bench_baseline)
        by_title = []
        for fn in order:
            by_title.append(fn())
        # Present in reading order.
        rank = ["Launch", "Speedups", "Against", "Crossover", "Where", "Roofline", "Hardware", "Layout", "Block",
                "Transfer", "GPU health"]
        self.sections = sorted(by_title, key=lambda s: next((i for i, r in enumerate(rank) if s.title.startswith(r)), 99))
        (self.out / "report.md").write_text(self.markdown())
        return self.out / "report.md"


def main(args):
    archives = A.load(args.archives)
    shape = tuple(int(x) for x in args.shape.lower().split("x"))
    argv, shown = sys.argv[2:], []
    for i, a in enumerate(argv):  # the notes are quoted in full below the command; abbreviate them here
        shown.append("'…'" if i > 0 and argv[i - 1] == "--note" else shlex.quote(a))
    command = "kstudy report " + " ".join(shown)
    r = Report(archives, args.out, shape=shape, cpu_baseline=args.cpu_baseline, notes=args.note or [], command=command)
    path = r.run()
    written = sorted(p.name for p in Path(args.out).iterdir() if p.suffix in (".csv", ".png"))
    skipped = [s.title for s in r.sections if s.skipped]
    print(f"report: {path} ({len(written)} tables and figures"
          + (f"; skipped: {', '.join(skipped)}" if skipped else "") + ")")
    return 0
