"""Published result tables, generated from the committed archives (scripts/results.py).

A markdown file carries blocks between marker lines

    <!-- kstudy:results GENERATOR archives=PATH[,PATH...] [key=value ...] -->
    ...generated text...
    <!-- kstudy:end -->

The opening marker names a generator (a function registered below with @generator, beside its code in a module of
this package) and the archives it reads, relative to the repository root; anything between the markers is rewritten
by `scripts/results.py --write` and compared by `--check`. Moving a section to re-measured archives is an edit of
its marker and a --write.

The statistics every generator shares live in `stats` and `..effects`: same-run comparisons by Mann-Whitney U with
Holm's correction over the family a claim rests on and the ratio of medians with its interval, verdicts against a
fixed target from the median and the interquartile range, ratios against a vendor variant's pooled samples, shares
of a roof timed on the variant's own clock only, and a note under every block whose samples ran throttled.
"""
import importlib
import pkgutil
import re
import shlex

BEGIN = re.compile(r"^<!-- kstudy:results (?P<args>.*?) -->\s*$")
END = "<!-- kstudy:end -->"
PAGES = ("README.md", "docs/results.md")  # the pages that carry blocks, relative to the repository
GENERATORS = {}  # name -> (function, one-line description); filled by @generator when the modules load


class ResultsError(Exception):
    """A marker or an archive a generator cannot use; scripts/results.py prints it and exits 2."""


def generator(name, description):
    """Registers `function(block) -> list of markdown lines` as the generator a marker calls by `name`."""
    def register(function):
        if name in GENERATORS:
            raise ResultsError(f"two generators are named {name!r}")
        GENERATORS[name] = (function, description)
        return function
    return register


def load_generators():
    """Imports every module of this package, so that each registers its generators; no list to keep."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return GENERATORS


class Block:
    """One marker's request: the generator's name, its archives (paths as written and resolved) and options."""

    def __init__(self, marker_args, root, where):
        try:
            words = shlex.split(marker_args)
        except ValueError as error:
            raise ResultsError(f"{where}: cannot read the marker ({error})")
        if not words:
            raise ResultsError(f"{where}: the marker names no generator")
        self.name, self.where, self.root = words[0], where, root
        self.options = {}
        for word in words[1:]:
            if "=" not in word:
                raise ResultsError(f"{where}: marker argument {word!r} is not key=value")
            key, value = word.split("=", 1)
            self.options[key] = value
        self.archive_names = [p for p in self.options.pop("archives", "").split(",") if p]
        if not self.archive_names:
            raise ResultsError(f"{where}: the marker of {self.name!r} names no archives= (comma-separated paths)")
        self.paths = [root / p for p in self.archive_names]
        for name, path in zip(self.archive_names, self.paths):
            if not path.exists():
                raise ResultsError(f"{where}: archive {name} does not exist (paths are relative to {root})")

    def option(self, key, default=None):
        return self.options.get(key, default)

    def archive(self, index=0):
        from . import stats
        return stats.archive(self.paths[index])


def generate(block):
    function = GENERATORS.get(block.name)
    if function is None:
        raise ResultsError(f"{block.where}: no generator named {block.name!r} (known: "
                           f"{', '.join(sorted(GENERATORS))})")
    from . import stats
    stats.USED.clear()
    lines = function[0](block)
    while lines and not lines[-1].strip():
        lines.pop()
    disclosed = stats.throttle_lines()
    return lines + [""] + (disclosed + [""] if disclosed else []) + [stats.provenance_line(block)]


def regenerate(text, root, label):
    """The file's text with every block regenerated; (text, number of blocks)."""
    out, lines, i, count = [], text.split("\n"), 0, 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        match = BEGIN.match(line)
        i += 1
        if not match:
            if line.strip().startswith("<!-- kstudy:end"):
                raise ResultsError(f"{label}:{i}: {END} without an opening kstudy:results marker")
            continue
        start = i
        while i < len(lines) and lines[i].strip() != END:
            if BEGIN.match(lines[i]):
                raise ResultsError(f"{label}:{i + 1}: a kstudy:results marker inside the block opened at line {start}")
            i += 1
        if i == len(lines):
            raise ResultsError(f"{label}:{start}: the kstudy:results block has no {END} line")
        block = Block(match.group("args"), root, f"{label}:{start}")
        out += [""] + generate(block) + ["", END]
        i += 1
        count += 1
    return "\n".join(out), count
