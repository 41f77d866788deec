"""Cold against warm caches: per variant and point of a sweep run with `"cache": ["warm", "cold"]`, the median time
with the caches as the previous trial left them and after a write larger than the last-level cache (outside the
timed region), their ratio and a Mann-Whitney verdict. Device variants on CUDA events, host variants on the host
clock; the flush size is the archive's."""
import numpy as np

from .. import archive as A
from . import ResultsError, generator, stats as S

DEVICE_TIMER, HOST_TIMER = "device_events", "host_wall"


def size(nbytes):
    return f"{nbytes / 2**20:,.0f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:,.0f} KiB"


def quartiles(seconds):
    q1, q3 = np.quantile(seconds, [0.25, 0.75])
    return f"{S.micro(q1)}–{S.micro(q3)}"


@generator("cache_modes", "cold-cache against warm-cache medians per device variant and point")
def cache_modes(block):
    lines = []
    for path in block.paths:
        s = S.samples(path)
        s = s[(s.on_device & (s.timer == DEVICE_TIMER)) | (~s.on_device & (s.timer == HOST_TIMER))]
        if s.empty or set(s.cache.dropna().unique()) != {"warm", "cold"}:
            raise ResultsError(f"{path}: no variant timed with both warm and cold caches")
        flush = int(s[s.cache == "cold"].flush_bytes.max())
        kinds = (("CUDA events (device variants)", s.on_device.any()),
                 ("the host clock (host variants)", (~s.on_device).any()))
        clocks = " and ".join(c for c, on in kinds if on)
        lines += [f"Caches cold: {flush / 2**20:,.0f} MiB written before every timed region (outside it); warm: as "
                  f"the previous trial left them. {clocks[0].upper() + clocks[1:]}, medians (IQR).", "",
                  "| variant | point | essential traffic | warm | cold | cold vs warm (time ratio, interval; "
                  "p_Holm) |", "| --- | --- | --- | --- | --- | --- |"]
        family, table = S.Family(), []
        for (rows, features, depth), at in s.groupby(list(A.EXTENTS)):
            for variant in sorted(at.variant.unique()):
                v = at[at.variant == variant]
                warm = np.sort(v[v.cache == "warm"].seconds.to_numpy(dtype=float))
                cold = np.sort(v[v.cache == "cold"].seconds.to_numpy(dtype=float))
                if not len(warm) or not len(cold):
                    continue
                S.use(path, v)
                # name@backend where the archive holds the name on several backends (one row each).
                label = variant if s.variant.str.split("@").str[0].eq(variant.split("@")[0]).sum() > len(
                    s[s.variant == variant]) else variant.split("@")[0]
                token = family.add(cold, warm, f"`{label}` at {int(rows):,}×{int(features)}").token
                table.append(f"| `{label}` | {int(rows):,}×{int(features)} | "
                             f"{size(float(v.essential_bytes.iloc[0]))} | "
                             f"{S.micro(np.median(warm))} µs ({quartiles(warm)}) | "
                             f"{S.micro(np.median(cold))} µs ({quartiles(cold)}) | {token} |")
        lines += family.fill(table, "short")
        lines += ["", f"Cold vs warm: beats = cold faster, loses = cold slower; {S.effects.rules_text()}; the family "
                  "is the table's rows.", ""]
    return lines[:-1]
