"""The frame the scripted checks under tests/ share: the repository a check reads (its first argument, else the
checkout this file sits in), ctest's skip (exit 77) where this Python lacks a module the check needs, and one line a
case (ok / FAIL) with an exit status that says whether any failed.

    from check_support import Cases, repository, require
    np, pd = require("numpy", "pandas")
    cases = Cases()
    cases.check(condition, "what the case shows")
    cases.finish("every case passed")
"""
import importlib
import sys
from pathlib import Path


def repository():
    """The repository the check reads: the first argument, else the checkout this file sits in."""
    return Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()


def require(*modules):
    """The modules, imported; where one is missing, a line saying which and exit 77 (ctest: skipped)."""
    try:
        imported = [importlib.import_module(name) for name in modules]
    except ImportError as error:
        print(f"skipped: {error}")
        sys.exit(77)
    return imported[0] if len(imported) == 1 else imported


class Cases:
    """ok / FAIL lines, one a case, and the failures they add up to."""

    def __init__(self):
        self.failures = []

    def check(self, condition, what):
        """Prints the case and returns whether it held (a case that later ones need can end them early)."""
        print(("ok  " if condition else "FAIL") + " " + what)
        if not condition:
            self.failures.append(what)
        return bool(condition)

    def finish(self, passed_line):
        """Exit 1 with the count of failed cases, else print passed_line and exit 0."""
        if self.failures:
            print(f"{len(self.failures)} check(s) failed")
            sys.exit(1)
        print(passed_line)
        sys.exit(0)
