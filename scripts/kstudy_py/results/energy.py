"""Energy per call from timer `energy`: per variant and point, the calls back to back through one region
of at least the energy window, each sample already per call (the region's wall time and NVML energy divided by its
calls). Shown: the median time per call, the median energy per call with its interquartile range, the power those
two imply, the sampled power, and essential bytes (or flops) per joule. Device variants only: NVML measures the
GPU's energy, not the host's."""
import numpy as np

from .. import archive as A
from . import ResultsError, generator, stats as S

TIMER = "energy"


@generator("energy", "energy per call (timer energy) of every device variant and point")
def energy(block):
    lines = ["| variant | point | time per call: median (IQR) | energy per call: median (IQR) | energy ÷ time | "
             "sampled power | essential GB/J |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for path in block.paths:
        s = S.samples(path)
        s = s[(s.timer == TIMER) & s.on_device & np.isfinite(s.energy_joules.astype(float))]
        if s.empty:
            raise ResultsError(f"{path}: no device sample of timer energy")
        for (operation, rows, features, _), at in s.groupby(["operation", *A.EXTENTS], sort=False):
            for variant in sorted(at.variant.unique()):
                v = at[at.variant == variant]
                seconds = v.seconds.to_numpy(dtype=float)
                joules = v.energy_joules.to_numpy(dtype=float)
                point = f"{int(rows):,}" if features == 1 else f"{int(rows):,}×{int(features)}"
                watts = joules / seconds
                S.use(path, v)
                gbj = float(v.essential_bytes.iloc[0]) / joules / 1e9
                lines.append(f"| `{variant.split('@')[0]}` | {operation} {point} | {S.micro(np.median(seconds))} µs "
                             f"({S.micro(np.quantile(seconds, 0.25))}–{S.micro(np.quantile(seconds, 0.75))}) | "
                             f"{1e3 * np.median(joules):.3g} mJ ({S.iqr_text(1e3 * joules, 1)}) | "
                             f"{np.median(watts):,.0f} W ({S.iqr_text(watts, 0)}) | "
                             f"{np.median(v.power_watts.astype(float)):,.0f} W "
                             f"({S.iqr_text(v.power_watts.astype(float), 0)}) | "
                             f"{np.median(gbj):.2f} ({S.iqr_text(gbj, 2)}) |")
    return ["Timer `energy`: each sample is one region of back-to-back calls of at least the energy window, its wall "
            "time and NVML energy divided by the calls; medians over the trials (IQR). Energy ÷ time is the average "
            "power over the region; the sampled power is NVML's power reading during it, which averages over a "
            "longer interval and lags.", ""] + lines
