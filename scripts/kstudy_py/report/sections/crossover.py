"""Crossover brackets: the first tested row count at which a host-in/host-out time beats the CPU reference.

The bracket keeps its IQR criterion; the margin at the first win, the ratio a reader takes from the table, is a
comparison of the variant's samples with the CPU reference's there (effects.py): the ratio of medians with its
bootstrap interval and a Mann-Whitney U verdict, Holm-corrected over the margins of that table. The throttled
samples the table's medians rest on, the CPU reference's included, are disclosed under it (report/throttle.py)."""
import numpy as np
import pandas as pd

from ... import archive as A
from ... import effects
from .. import section, throttle
from ..figures import ordered_boundaries
from ..inputs import HOST_IN_HOST_OUT
from ..variants import REFERENCE_FAMILY
from .speedups import against_reference, with_verdicts

CRITERION = ("Criterion: the variant's third quartile lies below the CPU reference's first quartile (one-shot or "
             "pipelined for device variants; host_wall for host variants, whose input is already on the host). The "
             "margin at the first win is the CPU median ÷ the variant's median there, with its 95% bootstrap "
             "interval and verdict, Holm-corrected over the margins of its table; the spread of every median the "
             "brackets rest on is in `speedups.csv` (q1, q3, cpu_q1, cpu_q3).")
# crossover.csv: the first win's margin with its interval, verdict and p_Holm (speedups.with_verdicts' columns).
MARGIN_COLUMNS = {"speedup_low": "first_win_margin_low", "speedup_high": "first_win_margin_high",
                  "verdict": "first_win_verdict", "p_holm": "first_win_p_holm"}


def candidates(sp):
    """Host-in/host-out timings: a device variant's one-shot and pipelined times, a host variant's host_wall."""
    sp = sp[sp.family != REFERENCE_FAMILY]
    device = sp[sp.timer.isin(HOST_IN_HOST_OUT)]
    host = sp[~sp.on_device.astype(bool) & (sp.timer == "host_wall")]
    return pd.concat([device, host])


def bracket(g):
    """(previous tested rows, first winning rows, bracket text, stays ahead, first-win margin, the first win's row
    of `g`) for one series sorted by rows; the margin is the CPU reference's median over the variant's at the first
    winning size (the seed: "The first measured win was only 1.1-1.6x")."""
    wins = (g.q3 < g.cpu_q1).to_numpy()  # non-overlapping IQRs, variant below the CPU
    tested = g.rows.to_numpy()
    if not wins.any():
        return "", "", "never", "", np.nan, None
    i = int(np.argmax(wins))
    previous = int(tested[i - 1]) if i > 0 else ""
    stays = bool((g["median"].to_numpy()[i:] < g.cpu_median.to_numpy()[i:]).all())
    margin = float(g.cpu_median.to_numpy()[i] / g["median"].to_numpy()[i])
    text = f"({previous if i > 0 else 'none tested below'}, {int(tested[i])})"
    return previous, int(tested[i]), text, stays, margin, g.index[i]


def crossover_table(sp):
    """(one row per series, {its row: the first win's row of `sp`} for the series that win)."""
    out, firsts = [], {}
    # A series: one variant, timer and point but for its rows, the swept axis.
    keys = ["archive", "experiment", "variant", "timer", *A.point_key("samples", without=("rows",))]
    for key, g in candidates(sp).groupby(keys, dropna=False):
        g = g.sort_values("rows")
        previous, first, text, stays, margin, at = bracket(g)
        if at is not None:
            firsts[len(out)] = at
        out.append({**dict(zip(keys, key)), "baseline": g.baseline.iloc[0], "tested_rows_min": int(g.rows.min()),
                    "tested_rows_max": int(g.rows.max()), "points": len(g), "previous_rows": previous,
                    "first_winning_rows": first, "bracket": text, "median_below_cpu_at_all_larger": stays,
                    "first_win_margin": margin})
    return pd.DataFrame(out), firsts


def margins(inputs, df, firsts):
    """{(archive, experiment): {row of `df`: Comparison}}: each winning series' variant against its CPU reference
    at the first winning size, one Holm family per table (an experiment's brackets)."""
    found = {}
    for key, g in df.groupby(["archive", "experiment"]):
        wins = [i for i in g.index if i in firsts]
        if wins:
            rows = inputs.speedups.loc[[firsts[i] for i in wins]].set_axis(wins)
            found[key] = against_reference(inputs, rows)[0]
    return found


def table_rows(inputs, arch, exp):
    """The points one experiment's table rests on: every tested size of its series (the bracket and whether it
    stays ahead read them all) and the CPU reference's rows there, for the throttle note."""
    sp = inputs.speedups
    rows = candidates(sp[(sp.archive == arch) & (sp.experiment == exp)])
    return pd.concat([rows, inputs.reference_points(rows)], ignore_index=True)


def bracket_cell(r, found):
    """'(2048, 4096), 1.35× (1.21–1.50) faster, stays ahead': the bracket, the margin at the first win with its
    interval and verdict, and whether the median stays below the CPU's; 'never' alone."""
    if r.bracket == "never":
        return r.bracket
    margin = found[r.Index].speed_cell() if r.Index in found else f"{r.first_win_margin:.2f}×"
    return f"{r.bracket}, {margin}" + (", stays ahead" if r.median_below_cpu_at_all_larger else ", falls back")


def detail_tables(inputs, df, found):
    """One table per experiment: a row per variant (and width, where the experiment varies it), a column per
    timing boundary; under it the margins' family and the throttled samples among its points."""
    lines = [CRITERION, "", effects.words_text(), ""]
    df = df.assign(boundary=[A.boundary(t, m) for t, m in zip(df.timer, df.memory_kind)])
    for (arch, exp), g in df.groupby(["archive", "experiment"]):
        columns = ordered_boundaries(g.boundary)
        widths = g.features.nunique() > 1
        mine = found.get((arch, exp), {})
        lines += [f"{arch}/{exp}, bracket in rows, the margin at the first win (CPU median ÷ variant median, 95% "
                  "interval, verdict), and whether it stays ahead (the median stays below the CPU's at every larger "
                  "size):", "",
                  "| variant | " + ("features | " if widths else "") + " | ".join(columns) + " |",
                  "| --- |" + (" --- |" if widths else "") + " --- |" * len(columns)]
        for (variant, features), v in g.groupby(["variant", "features"]):
            cells = {r.boundary: bracket_cell(r, mine) for r in v.itertuples()}
            lines.append(f"| `{variant}` | " + (f"{features} | " if widths else "")
                         + " | ".join(cells.get(b, "") for b in columns) + " |")
        lines.append("")  # every table's part ends with a blank line, the next one's caption follows it
        if mine:
            lines += [effects.family_line(mine.values(), "this table's first-win margins: each winning variant and "
                                          "boundary against the CPU reference at its first winning size"), ""]
        lines += throttle.note(inputs, table_rows(inputs, arch, exp))
    return lines[:-1]


def one_shot_summary(df, key):
    """Per host memory kind, how many device variants of the experiment cross over from a one-shot call."""
    lines = []
    dev = df[(df.archive == key[0]) & (df.experiment == key[1]) & (df.timer == "one_shot")]
    for memory, g in dev.groupby("memory_kind"):
        won = g[g.bracket != "never"]
        where = f"{key[0]}/{key[1]}"
        if won.empty:
            lines.append(f"**one-shot {memory}** ({where}): no device variant beats the CPU reference up to "
                         f"{A.fmt_rows(g.tested_rows_max.max())} rows.")
            continue
        firsts = won.first_winning_rows.astype(int)
        last = won.loc[firsts.idxmax()]
        text = (f"**one-shot {memory}** ({where}): {len(won)} of {len(g)} device variants beat the CPU reference "
                f"(separate IQRs) within the tested rows; the first from {won.loc[firsts.idxmin()].bracket} rows "
                f"(`{won.loc[firsts.idxmin()].variant}`), the last from {last.bracket} (`{last.variant}`)")
        never = g[g.bracket == "never"].variant.tolist()
        lines.append(text + ("; never: " + ", ".join(f"`{v}`" for v in never) if never else "") + ".")
    return lines


@section("crossover", "Crossover brackets", order=30, findings=True)
def crossover(inputs, sec):
    if inputs.points.empty or inputs.baselines.empty:
        return sec.skip("needs timed variants with a CPU reference baseline")
    df, firsts = crossover_table(inputs.speedups)
    if df.empty:
        return sec.skip("no variant has host-in/host-out timings (one_shot, pipelined, or a host variant's host_wall)")
    found = margins(inputs, df, firsts)
    df = with_verdicts(df, {i: c for table in found.values() for i, c in table.items()}).rename(columns=MARGIN_COLUMNS)
    inputs.write_csv(df, "crossover.csv", sec,
                     "first tested row count whose host-in/host-out median beats the CPU reference with "
                     "non-overlapping IQRs (variant q3 < CPU q1), as (previous tested, this); `never` within the "
                     "tested rows; first_win_margin = CPU median / variant median at the first winning size, with its "
                     "95% interval, Holm-corrected verdict and p over the experiment's margins")
    sec.lines.extend(detail_tables(inputs, df, found))
    key = inputs.primary_sweep()
    summary = one_shot_summary(df, key)
    if summary:
        sec.findings.extend(f"- {line}" for line in summary)
        sec.headlines.append("Crossover: " + " ".join(summary))
    else:
        sec.no_finding = "no device variant's one-shot time in the primary sweep to bracket"
    return sec.done(df)
