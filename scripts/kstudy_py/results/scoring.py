"""The scoring ladder's baseline (plain_baseline.h5): each fused kernel against the plain kernel of its family at
every shape the archive measured, judged by Mann-Whitney on the same archive's samples."""
from . import ResultsError, generator, stats as S

# (faster candidate, baseline): rung 2 against rung 1 of the CUDA ladder, and the Kokkos pair the seed compared.
PAIRS = ("fused_cuda_feature_major@cuda:plain_cuda_feature_major@cuda,"
         "fused_kokkos_feature_major@cuda:plain_kokkos_feature_major@cuda")


@generator("plain_baseline", "fused scoring kernels against the plain kernels at every shape (plain_baseline.h5)")
def plain_baseline(block):
    path = block.paths[0]
    s = S.samples(path)
    pairs = [p.split(":") for p in block.option("pairs", PAIRS).split(",")]
    for pair in pairs:
        missing = [v for v in pair if v not in set(s.variant)]
        if len(pair) != 2 or missing:
            raise ResultsError(f"{block.where}: pair {':'.join(pair)} is not two variants of "
                               f"{block.archive_names[0]} (missing: {', '.join(missing) or 'a second variant'})")
    shapes = sorted({(r, f) for r, f in zip(s.rows, s.features)}, key=lambda x: (x[1], x[0]))
    head = "| rows × features | " + " | ".join(f"`{a.split('@')[0]}` ÷ `{b.split('@')[0]}` (time)" for a, b in pairs)
    lines = [head + " |", "| --- |" + " --- |" * len(pairs)]
    tally = [{"beats": [], "tie": [], "loses": [], "ratios": []} for _ in pairs]
    for rows, features in shapes:
        cells = []
        for i, (a, b) in enumerate(pairs):
            ma, mb = S.measure(path, a, rows, features), S.measure(path, b, rows, features)
            if ma is None or mb is None:
                cells.append("")
                continue
            verdict, p = S.versus(ma, mb)
            tally[i].setdefault(verdict, []).append(ma.point())
            tally[i]["ratios"].append(ma.median / mb.median)
            cells.append(f"{ma.median / mb.median:.2f} ({verdict})")
        if any(cells):  # an archive may hold other operations' shapes too
            lines.append(f"| {rows:,}×{features} | " + " | ".join(cells) + " |")
    lines.append("")
    for (a, b), t in zip(pairs, tally):
        n = len(t["ratios"])
        if not n:
            continue
        text = (f"- `{a.split('@')[0]}` beats `{b.split('@')[0]}` at **{len(t['beats'])} of {n}** shapes "
                f"(time ratio {min(t['ratios']):.2f}–{max(t['ratios']):.2f})")
        if t["tie"]:
            text += f"; tie at {', '.join(t['tie'])}"
        if t["loses"]:
            text += f"; loses at {', '.join(t['loses'])}"
        lines.append(text + ".")
    lines += ["", f"Ratios: median time over median time; verdicts: {S.ALPHA_TEXT}, over every accepted sample "
              "(all replications) of each variant at the shape."]
    return lines
