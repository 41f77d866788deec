"""The toy report section of docs/extending.md: the toy operation's median time per element, per variant
and size. Loaded with `kstudy report ARCHIVE --out DIR --sections tests/toy/toy_section.py`; it runs only
where the archives hold variants of operation toy_axpy."""
from kstudy_py.report import section


@section("toy_axpy_per_element", "Toy operation: time per element", order=95, operation="toy_axpy")
def toy_axpy_per_element(inputs, sec):
    points = inputs.points_of("toy_axpy")
    if points.empty:
        return sec.skip("no timed point of toy_axpy")
    table = points[["variant", "rows", "boundary", "median"]].rename(columns={"rows": "n"})
    table = table.assign(ns_per_element=table["median"] / table["n"] * 1e9).sort_values(["variant", "n"])
    inputs.write_csv(table, "toy_axpy_per_element.csv", sec, "median seconds and ns per element per variant and n")
    sec.lines.append(f"{len(table)} points; fewest ns per element: {table.ns_per_element.min():.3g}.")
    return sec.done(table)
