"""`kstudy report ARCHIVE... --out DIR`: evidence tables (CSV), figures (PNG) and report.md from archives.

Every number is computed from the archives' samples (gate passed, status ok, trial >= 0); a summary table in
the archive, if any, is not used. The report is a set of sections, each in its own module under
`sections/`, registered beside its code with `@section(...)`:

    @section("transfer", "Transfer calibration", order=90)
    def transfer(inputs, sec):
        ...
        return sec.done(value=table)          # or: return sec.skip("why")

A section that needs another's result names it in `needs=` and receives that Section as a keyword argument
of the same name. A section registered for an `operation=` runs only when the archives hold variants of that
operation (their `variants` table says which); the others work for any operation. Sections whose data is
missing are kept in report.md as skipped, with the reason.
"""
import importlib
import importlib.util
import json
import pkgutil
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .. import archive as A


@dataclass
class Section:
    """One part of the report and what it hands on: tables, figures, Markdown detail, findings (grouped
    under the section's title near the top), headlines (the summary's few numbers, each naming its
    experiment), the reason it was skipped, and `value`, the result sections that need it read."""
    key: str
    title: str
    tables: list = field(default_factory=list)     # (file name, description)
    figures: list = field(default_factory=list)    # (file name, caption)
    lines: list = field(default_factory=list)      # Markdown detail
    findings: list = field(default_factory=list)   # Markdown lines for the Findings part
    headlines: list = field(default_factory=list)  # one sentence each, for the Summary
    skipped: Optional[str] = None
    value: object = None
    reports_findings: bool = False                 # registered with findings=True
    no_finding: Optional[str] = None               # why it ran but found nothing (for the Findings part)

    def skip(self, why):
        self.skipped = why
        return self

    def done(self, value=None):
        self.value = value
        return self


@dataclass
class Registration:
    key: str
    title: str
    build: Callable
    order: int
    needs: tuple
    operation: Optional[str]
    findings: bool = False


REGISTRY = {}


def section(key, title, order, needs=(), operation=None, findings=False):
    """Registers the decorated function `build(inputs, sec, **needed_sections) -> Section` as a report section.
    `order` places it in report.md; `title` may use {inputs.<attribute>} placeholders, filled per report.
    `findings=True`: the section may add findings; where none does, the Findings part says per such section what
    it missed (its skip reason) or, from `sec.no_finding`, why it found nothing."""
    def register(build):
        if key in REGISTRY:
            raise ValueError(f"report section {key!r} registered twice")
        REGISTRY[key] = Registration(key, title, build, order, tuple(needs), operation, findings)
        return build
    return register


def load_sections(extra=()):
    """Imports every module under sections/ (recursively), which registers their sections, then each of the
    user's own section files in `extra` (kstudy report --sections FILE.py)."""
    package = importlib.import_module(f"{__name__}.sections")
    for module in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        importlib.import_module(module.name)
    for path in extra:
        spec = importlib.util.spec_from_file_location(f"kstudy_user_sections_{Path(path).stem}", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"--sections {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def applicable(registrations, operations):
    return [r for r in registrations if r.operation is None or r.operation in operations]


def run_sections(inputs, registrations):
    """Runs the sections in dependency order; returns them in reading order. A section whose needed section
    does not apply to these archives (another operation) is not run either."""
    by_key = {r.key: r for r in registrations}
    done = {}

    def run(registration, chain=()):
        if registration.key in done:
            return done[registration.key]
        if registration.key in chain:
            raise ValueError("report sections depend on each other in a cycle: " + " -> ".join(chain))
        needed = {}
        for key in registration.needs:
            if key not in by_key:
                return None
            needed[key] = run(by_key[key], chain + (registration.key,))
            if needed[key] is None:
                return None
        sec = Section(registration.key, registration.title.format(inputs=inputs),
                      reports_findings=registration.findings)
        done[registration.key] = registration.build(inputs, sec, **needed)
        return done[registration.key]

    results = [run(r) for r in sorted(registrations, key=lambda r: (r.order, r.key))]
    return [s for s in results if s is not None]


COMMAND_FILE = "report_command.json"  # in the report folder: the argv of `kstudy report` that wrote it


def command_line(argv):
    shown = []
    for i, arg in enumerate(argv):  # the notes are quoted in full in report.md; abbreviate them here
        shown.append("'…'" if i > 0 and argv[i - 1] == "--note" else shlex.quote(arg))
    return "kstudy report " + " ".join(shown)


def build_report(archives, out, shape=None, cpu_baseline=None, notes=(), command="", extra_sections=()):
    """Writes every table, figure and report.md under `out`; returns the sections in reading order."""
    from .inputs import ReportInputs
    from .markdown import render
    load_sections(extra_sections)
    inputs = ReportInputs(archives, out, shape, cpu_baseline, notes, command)
    inputs.out.mkdir(parents=True, exist_ok=True)
    sections = run_sections(inputs, applicable(REGISTRY.values(), inputs.operations))
    (inputs.out / "report.md").write_text(render(inputs, sections))
    return sections


def main(args):
    archives = A.load(args.archives)
    shape = tuple(int(x) for x in args.shape.lower().split("x")) if args.shape else None
    sections = build_report(archives, args.out, shape=shape, cpu_baseline=args.cpu_baseline, notes=args.note or [],
                            command=command_line(sys.argv[2:]), extra_sections=args.sections or [])
    # The whole command, notes included, so `scripts/reproduce.py reports` can regenerate this report from its
    # archives without anyone keeping a script per report (report.md shows it with the notes abbreviated).
    (Path(args.out) / COMMAND_FILE).write_text(json.dumps({"argv": sys.argv[2:]}, indent=1, ensure_ascii=False) + "\n")
    written = sorted(p.name for p in Path(args.out).iterdir() if p.suffix in (".csv", ".png"))
    skipped = [s.title for s in sections if s.skipped]
    print(f"report: {Path(args.out) / 'report.md'} ({len(written)} tables and figures"
          + (f"; skipped: {', '.join(skipped)}" if skipped else "") + ")")
    return 0
