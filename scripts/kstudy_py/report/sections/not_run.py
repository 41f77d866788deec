"""Not run here: the variants an experiment asked for that this machine could not run at all, and why, in the words
the runner recorded (`skipped: <why>` samples). A rung that needs a newer GPU (`needs sm_80 (cp.async); this GPU
is sm_75`), the arch-specific sm_90a rungs on any other card, a missing driver entry point or library: such a rung
is absent from every table below, and this section says it was not measured rather than leaving it missing."""
import pandas as pd

from .. import section

EXPLANATION = ("A variant is skipped, never failed, where this machine cannot run it: a GPU (or a build target) "
               "older than the variant declares it needs, an arch-specific target of another GPU generation, a "
               "driver or library that is missing or refuses the problem, or a point that does not fit memory. "
               "Its rung is absent from the other sections; what it would have measured needs another machine.")


def skipped_rows(a, e):
    s = e.samples
    if s.empty or "status" not in s:
        return None
    skipped = s[s.status.str.startswith("skipped: ")]
    if skipped.empty:
        return None
    grouped = skipped.groupby("variant").agg(points=("point", "nunique"), reason=("status", "first")).reset_index()
    grouped["reason"] = grouped.reason.str.slice(len("skipped: "))
    gpu = a.environment.get("gpu_name", "") if a.environment else ""
    return grouped.assign(archive=a.label, experiment=e.name, gpu=gpu)


@section("not_run", "Not run on this machine", order=106)
def not_run(inputs, sec):
    rows = [r for a in inputs.archives for e in a.experiments.values() if (r := skipped_rows(a, e)) is not None]
    if not rows:
        return sec.skip("every variant asked for ran (no skipped samples)")
    df = pd.concat(rows, ignore_index=True)[["archive", "experiment", "gpu", "variant", "points", "reason"]]
    inputs.write_csv(df, "not_run.csv", sec, "per variant an experiment asked for and this machine could not run: "
                                             "the points skipped and the first reason recorded")
    sec.lines += [EXPLANATION, "", "| archive/experiment | GPU | variant | points | why |",
                  "| --- | --- | --- | ---: | --- |"]
    sec.lines += [f"| {r.archive}/{r.experiment} | {r.gpu or '—'} | `{r.variant}` | {r.points} | {r.reason} |"
                  for r in df.itertuples()]
    experiments = ", ".join(sorted(set(df.archive + "/" + df.experiment)))
    sec.headlines.append(f"{df.variant.nunique()} variant(s) asked for were not run on this machine ({experiments}); "
                         "the reasons are under 'Not run on this machine'.")
    return sec.done(df)
