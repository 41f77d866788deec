#!/usr/bin/python3
"""Reproduce the published numbers: every archive behind a generated table (the `<!-- kstudy:results ...
archives=... -->` markers of the pages scripts/results.py regenerates) re-measured with the command that made it,
then the tables regenerated from the new archives.

    scripts/reproduce.py plan                      # the archives behind the tables, with the command of each
    scripts/reproduce.py script > reproduce.sh     # a bash script for the GPU machine (no Python needed there)
    KSTUDY=bundle/kstudy OUT=out SECONDS_LEFT=540 bash reproduce.sh
                                                   # runs what OUT lacks; run it again to complete (it resumes)
    scripts/reproduce.py adopt out --dataset data/h200-2026-12-24   # copy them in, point the markers at them,
                                                   # regenerate every table (scripts/results.py --write)
    scripts/reproduce.py reports                   # regenerate every committed report under docs/ and every table

`reports` replays, from the repository root, the `kstudy report` command each report folder records
(docs/*/report_command.json, notes included), into that folder emptied first, then regenerates every table; `git diff`
shows what changed. A report's inputs change by running `kstudy report` with the new archives once: the folder then
records the new command.

The command of an archive is the one it records (root attribute `command_line`): `kstudy run EXPERIMENT... [options]`
or `kstudy profile ...`, with its --out replaced and `--resume` added when the output exists, so a run cut by a
call's time limit is completed by the next call, and a complete one costs a second. Archives made by other programs
(`kstudy_bench` JSON, an out-of-tree study) are listed with how to remake them, and left to the user.

Exit codes: 0 done, 1 --check found a difference, 2 bad usage or a page/archive that cannot be read, 77 h5py missing.
"""
import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
try:
    import h5py
except ImportError:  # pragma: no cover - depends on the machine
    print("reproduce.py: h5py is missing (Debian: apt-get install python3-h5py)", file=sys.stderr)
    sys.exit(77)
from kstudy_py import results  # noqa: E402  (the markers' grammar and pages: the same as scripts/results.py's)
# Options whose value is where the archive went, or a scratch folder: the script supplies its own.
DROPPED_WITH_VALUE = {"--out", "-o", "--keep-ncu", "--json"}
DROPPED = {"--overwrite", "--resume", "-q", "--quiet"}
REPORT_COMMAND = "report_command.json"  # written by `kstudy report` into its folder (kstudy_py/report)


class Error(Exception):
    pass


def pages(root):
    return [root / p for p in results.PAGES if (root / p).exists()]


def markers(root):
    """(page, line number, results.Block) of every opening marker of the pages."""
    for page in pages(root):
        for number, line in enumerate(page.read_text().split("\n"), 1):
            match = results.BEGIN.match(line)
            if match:
                where = f"{page.relative_to(root)}:{number}"
                try:
                    yield page, number, results.Block(match.group("args"), root, where)
                except results.ResultsError as error:
                    raise Error(str(error))


def published(root):
    """[(archive path relative to root, [pages naming it])] in first-seen order."""
    found = {}
    for page, _, block in markers(root):
        for name in block.archive_names:
            found.setdefault(name, []).append(str(page.relative_to(root)))
    return list(found.items())


def command_of(path):
    """(subcommand, arguments without output options) of a kstudy archive, or None with why."""
    if path.suffix == ".md":
        return None, "written from archives by a script (advise_check.md: scripts/advise_check.py, its dataset README)"
    if path.suffix != ".h5":
        return None, "not a kstudy archive (kstudy_bench JSON: scripts/device_run.sh BUNDLE bench; its dataset README)"
    with h5py.File(path, "r") as f:
        line = f.attrs.get("command_line")
    if line is None:
        return None, "the archive records no command line"
    line = line.decode() if isinstance(line, bytes) else str(line)
    words = shlex.split(line)
    if len(words) < 2 or Path(words[0]).name != "kstudy" or words[1] not in ("run", "profile"):
        return None, f"made by another program: {line}"
    with h5py.File(path, "r") as f:
        version = f["environment"].attrs.get("kokkos_version", "") if "environment" in f else ""
    version = version.decode() if isinstance(version, bytes) else str(version)
    kept, skip = [], False
    for word in words[2:]:
        if skip:
            skip = False
        elif word in DROPPED_WITH_VALUE:
            skip = True
        elif word in DROPPED or any(word.startswith(o + "=") for o in DROPPED_WITH_VALUE):
            continue
        else:
            kept.append(word)
    return (words[1], kept, version), None


def plan(root):
    rows = []
    for name, where in published(root):
        command, why = command_of(root / name)  # results.Block refused a missing archive
        rows.append((name, where, command, why))
    return rows


def do_plan(args):
    for name, where, command, why in plan(args.root):
        print(f"{name}  ({', '.join(sorted(set(where)))})")
        print(f"    kstudy {command[0]} {shlex.join(command[1])}   (Kokkos {command[2] or 'unrecorded'})" if command
              else f"    left to the user: {why}")


SCRIPT_HEAD = """#!/usr/bin/env bash
# Made by scripts/reproduce.py script: re-measures the archives behind the published tables into $OUT, each with
# the command it records. Needs KSTUDY (a kstudy of the cuda flavour) and OUT; an archive made under another Kokkos
# version than KSTUDY's own runs KSTUDY_KOKKOS_<version, dots as _> where set (e.g. KSTUDY_KOKKOS_4_6_1), else KSTUDY,
# and says so.
# SECONDS_LEFT (default 540) bounds
# the whole call: a command starts only with at least 30 s left and is stopped at the deadline; run the script
# again to complete what was cut (kstudy run --resume). Exit 0 when every archive is complete, 3 when some wait.
set -uo pipefail
: "${KSTUDY:?set KSTUDY to the kstudy binary}" "${OUT:?set OUT to the output folder}"
deadline=$(( $(date +%s) + ${SECONDS_LEFT:-540} ))
waiting=0
own=$("$KSTUDY" info 2> /dev/null | awk '/kokkos_version:/ {print $2; exit}')  # KSTUDY's own Kokkos version
step() {  # step OUTPUT KOKKOS_VERSION SUBCOMMAND ARGS...: run it unless OUTPUT is complete; --resume where it exists
  local out=$OUT/$1 version=$2 sub=$3; shift 3
  local var=KSTUDY_KOKKOS_${version//./_} kstudy=$KSTUDY
  if [[ -n $version && -n ${!var:-} ]]; then kstudy=${!var}
  elif [[ -n $version && $version != "$own" ]]; then
    echo "note: $out was made under Kokkos $version; $var unset, running $KSTUDY (Kokkos ${own:-unknown})"
  fi
  local left=$(( deadline - $(date +%s) ))
  if [[ -f $out.done ]]; then echo "complete: $out"; return; fi
  if (( left < 30 )); then echo "no time left for $out"; waiting=1; return; fi
  mkdir -p "$(dirname "$out")"
  local resume=()
  [[ $sub == run && -f $out ]] && resume=(--resume)
  [[ $sub == profile ]] && rm -f "$out"
  echo "== $out: kstudy $sub $* ${resume[*]} ($left s left)"
  if timeout "$left" "$kstudy" "$sub" "$@" "${resume[@]}" --out "$out" > "$out.log" 2>&1; then
    touch "$out.done"; tail -3 "$out.log"
  else
    echo "   cut or failed (rc $?): $(tail -1 "$out.log")"; waiting=1
  fi
}
"""


def do_script(args):
    lines = [SCRIPT_HEAD]
    left = []
    for name, _, command, why in plan(args.root):
        if command is None:
            left.append(f"# left to the user: {name}: {why}")
            continue
        out = str(Path(name).relative_to("data")) if name.startswith("data/") else name
        lines.append(f"step {shlex.quote(out)} {shlex.quote(command[2])} {command[0]} {shlex.join(command[1])}")
    lines += left + ['exit $(( waiting ? 3 : 0 ))', ""]
    sys.stdout.write("\n".join(lines))


def do_adopt(args):
    source = Path(args.source)
    dataset = Path(args.dataset)
    if dataset.is_absolute() or not str(dataset).startswith("data/"):
        raise Error(f"--dataset {dataset}: a folder under data/, relative to the repository")
    mapping = {}
    for name, _, command, _ in plan(args.root):
        if command is None or not name.startswith("data/"):
            continue
        made = source / Path(name).relative_to("data")
        if not made.exists() or not Path(str(made) + ".done").exists():
            raise Error(f"{made}: missing or incomplete; run the script again on the GPU machine")
        target = dataset / Path(name).relative_to("data").as_posix().replace("/", "__")
        mapping[name] = str(target)
    (args.root / dataset).mkdir(parents=True, exist_ok=True)
    for old, new in mapping.items():
        shutil.copyfile(source / Path(old).relative_to("data"), args.root / new)
    readme = args.root / dataset / "README.md"
    if not readme.exists():  # the dataset's own page: what each file re-measures; its commits come from the archives
        rows = [f"| `{Path(new).name}` | `{old}` |" for old, new in mapping.items()]
        readme.write_text(f"# {dataset.name}: the published archives, re-measured\n\n"
                          "Made by `scripts/reproduce.py script` on the GPU machine and `scripts/reproduce.py adopt`; "
                          "each file re-measures the archive beside it with the command that archive records.\n\n"
                          "| file | re-measures |\n| --- | --- |\n" + "\n".join(rows) + "\n")
    subprocess.call([sys.executable, str(Path(__file__).resolve().parent / "data_provenance.py"), "--write",
                     "--data", str(args.root / "data")], stdout=subprocess.DEVNULL)
    for page in pages(args.root):
        lines = page.read_text().split("\n")
        for i, line in enumerate(lines):
            match = results.BEGIN.match(line)
            if match:  # the same words, archives= pointed at the copies
                words = [w if not w.startswith("archives=") else
                         "archives=" + ",".join(mapping.get(n, n) for n in w[len("archives="):].split(","))
                         for w in shlex.split(match.group("args"))]
                lines[i] = f"<!-- kstudy:results {shlex.join(words)} -->"
        page.write_text("\n".join(lines))
    print(f"reproduce.py: {len(mapping)} archive(s) copied into {dataset}, markers pointed at them")
    return subprocess.call([sys.executable, str(Path(__file__).resolve().parent / "results.py"),
                            *[str(p) for p in pages(args.root)], "--write", "--root", str(args.root)])


def do_reports(args):
    """Every committed report regenerated from its recorded command, then every generated table."""
    commands = sorted((args.root / "docs").glob(f"*/{REPORT_COMMAND}"))
    if not commands:
        raise Error(f"no docs/*/{REPORT_COMMAND}: no report here records its command (run `kstudy report` once)")
    for recorded in commands:
        folder = recorded.parent
        try:
            argv = json.loads(recorded.read_text())["argv"]
        except (ValueError, KeyError, TypeError) as error:
            raise Error(f"{recorded}: not a recorded report command ({error})")
        out = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--out", "-o")), None)
        if out is None or (args.root / out).resolve() != folder.resolve():
            raise Error(f"{recorded}: its command writes to {out!r}, not to the folder that records it")
        print(f"reproduce.py: {folder.relative_to(args.root)}: kstudy report {shlex.join(argv)}", flush=True)
        for old in folder.iterdir():  # a section that no longer applies leaves no stale table behind
            if old.is_file() and old.suffix in (".csv", ".png", ".md", ".json"):
                old.unlink()
        code = subprocess.call([sys.executable, str(REPO / "scripts" / "kstudy_report.py"), "report", *argv],
                               cwd=args.root)
        if code:
            raise Error(f"{folder.relative_to(args.root)}: kstudy report exited {code}")
    return subprocess.call([sys.executable, str(Path(__file__).resolve().parent / "results.py"),
                            *[str(p) for p in pages(args.root)], "--write", "--root", str(args.root)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=REPO, help="the repository (default: this script's)")
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("plan", help="the archives behind the tables and their commands")
    sub.add_parser("script", help="print the bash script that re-measures them")
    adopt = sub.add_parser("adopt", help="copy re-measured archives in and regenerate the tables")
    adopt.add_argument("source", help="the script's OUT folder, brought back")
    adopt.add_argument("--dataset", required=True, help="the new dataset folder, data/...")
    sub.add_parser("reports", help="regenerate every report under docs/ from its recorded command, then the tables")
    args = parser.parse_args()
    args.root = args.root.resolve()
    try:
        return {"plan": do_plan, "script": do_script, "adopt": do_adopt, "reports": do_reports}[args.what](args) or 0
    except (Error, OSError) as error:
        print(f"reproduce.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
