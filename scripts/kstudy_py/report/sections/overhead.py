"""Launch overhead (`launch` experiments) and cold start / compile times (`cold_compile`)."""
import numpy as np
import pandas as pd

from ... import archive as A
from .. import section


def overhead_row(a, e, item, measure, r):
    return {"archive": a.label, "experiment": e.name, "item": item, "measure": measure, "n": r.n,
            "median_us": r.median * 1e6, "q1_us": r.q1 * 1e6, "q3_us": r.q3 * 1e6}


def launch_rows(inputs):
    rows = []
    for a, e in inputs.experiments("launch"):
        for r in A.stats(e.accepted(), ["variant"]).itertuples():
            measure = "per launch, 1,000 queued then one fence" if "queued" in r.variant else "one launch + fence"
            rows.append(overhead_row(a, e, r.variant, measure, r))
    return rows


def cold_rows(inputs):
    rows = []
    for a, e in inputs.experiments("cold_compile"):
        st = A.stats(e.accepted(), ["variant", "timer"])
        for variant, g in st.groupby("variant"):
            by = {t: r for t, r in zip(g.timer, g.itertuples())}
            if "compile" in by:
                measure = ("NVRTC compile" if variant.startswith("nvrtc") else
                           "module load" if variant.startswith("module_load") else "compile")
                rows.append(overhead_row(a, e, variant, measure, by["compile"]))
            if "cold" not in by:
                continue
            cold = by["cold"]
            measure = "initialisation" if variant == "kokkos_initialize" else "first call (fresh process)"
            rows.append(overhead_row(a, e, variant, measure, cold))
            warm = next((by[t] for t in ("resident_wall", "host_wall") if t in by), None)
            if warm is not None:
                rows.append(overhead_row(a, e, variant, "second call (same process)", warm))
                rows.append({"archive": a.label, "experiment": e.name, "item": variant,
                             "measure": "first-call overhead (first - second, medians)", "n": min(cold.n, warm.n),
                             "median_us": (cold.median - warm.median) * 1e6, "q1_us": np.nan, "q3_us": np.nan})
    return rows


def detail_lines(df):
    lines = [f"- `{r['item']}`: {r.median_us:.2f} µs ({r.measure}; IQR {r.q1_us:.2f}–{r.q3_us:.2f}, n={r.n})"
             for _, r in df[df.measure.str.startswith(("one launch", "per launch"))].iterrows()]
    for _, r in df[df.measure == "initialisation"].iterrows():
        lines.append(f"- Kokkos initialisation: median {r.median_us / 1e3:.1f} ms (IQR "
                     f"{r.q1_us / 1e3:.1f}–{r.q3_us / 1e3:.1f}, n={r.n} fresh processes)")
    over = df[df.measure.str.startswith("first-call overhead")].sort_values("median_us", ascending=False)
    if len(over):
        lines.append("- Largest first-call overheads (one sample each unless n says otherwise): " + "; ".join(
            f"`{r['item']}` {r.median_us / 1e3:.2f} ms" for _, r in over.head(3).iterrows()))
    for _, r in df[df.measure.isin(["NVRTC compile", "module load"])].iterrows():
        lines.append(f"- {r.measure} (`{r['item']}`): {r.median_us / 1e3:.3f} ms (n={r.n})")
    return lines


def headline(df):
    """The cheapest synchronised launch and the initialisation cost, each with its experiment."""
    parts = []
    sync = df[df.measure == "one launch + fence"]
    for (arch, exp), g in sync.groupby(["archive", "experiment"]):
        parts.append("one launch + fence " + ", ".join(f"{r.median_us:.1f} µs (`{r['item']}`)" for _, r in g.iterrows())
                     + f" ({arch}/{exp})")
    init = df[df.measure == "initialisation"]
    if len(init):
        r = init.iloc[0]
        parts.append(f"Kokkos initialisation {r.median_us / 1e3:.0f} ms ({r.archive}/{r.experiment})")
    return ["Overhead: " + "; ".join(parts) + "."] if parts else []


@section("overhead", "Launch and compile overhead", order=100)
def overhead(inputs, sec):
    rows = launch_rows(inputs) + cold_rows(inputs)
    if not rows:
        return sec.skip("no `launch` or `cold_compile` experiment in the archives")
    df = pd.DataFrame(rows)
    inputs.write_csv(df, "overhead.csv", sec, "launch overhead and cold start / compile times, µs")
    sec.lines.extend(detail_lines(df))
    sec.headlines.extend(headline(df))
    return sec.done(df)
