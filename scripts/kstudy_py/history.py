"""`kstudy history add|show|list`: a results history across commits, in an SQLite index of archives.

The store indexes archives where they lie (absolute path and the file's SHA-256, so a moved or rewritten file is
noticed) under their commit, dirty flag, machine, Kokkos version and experiments, and keeps per (experiment,
variant, point, timer) the accepted samples with their median and quartiles. The samples are kept, not just the
summary, so that `show` can test a step with the samples of both sides even after the archive has moved.

Several processes may add at once (a job array finishing together): the store runs in WAL mode, every write
is one `BEGIN IMMEDIATE` transaction (the write lock is taken before reading, so two writers never both decide
an archive is new), waits up to a busy timeout for the lock, and an archive already recorded (same SHA-256) is
not recorded again.

Step detection in `show`: between each commit and the one before it, the verdict of `kstudy compare --gate`
(kstudy_py/gate.py) on the pooled samples of the two commits: a step is a SLOWER or FASTER verdict, that is a
Mann-Whitney U difference at the level given *and* a median change beyond the threshold with the medians'
intervals apart. The samples are there, so a rank test uses them rather than a rule on medians and IQRs that
ignores how many samples stand behind each; the threshold keeps a statistically real but tiny drift (which a
rank test finds between any two runs with enough samples) from being called a step.
"""
import datetime
import hashlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import archive as A
from . import gate as G

BUSY_TIMEOUT_S = 60
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS archives (
  id INTEGER PRIMARY KEY,
  sha256 TEXT NOT NULL UNIQUE,
  path TEXT NOT NULL,
  file_bytes INTEGER NOT NULL,
  git_commit TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  machine TEXT NOT NULL,
  host TEXT NOT NULL,
  gpu_name TEXT NOT NULL,
  kokkos_version TEXT NOT NULL,
  experiments TEXT NOT NULL,
  schema_version TEXT NOT NULL,
  created_utc TEXT NOT NULL,
  recorded_utc TEXT NOT NULL,
  repo TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
  archive_id INTEGER NOT NULL REFERENCES archives(id) ON DELETE CASCADE,
  experiment TEXT NOT NULL,
  variant TEXT NOT NULL,
  backend TEXT NOT NULL,
  point TEXT NOT NULL,
  timer TEXT NOT NULL,
  n INTEGER NOT NULL,
  median REAL NOT NULL,
  q1 REAL NOT NULL,
  q3 REAL NOT NULL,
  samples BLOB NOT NULL,
  PRIMARY KEY (archive_id, experiment, variant, point, timer)
);
CREATE INDEX IF NOT EXISTS points_by_variant ON points (variant, point, timer);
"""


class HistoryError(Exception):
    """A problem with the store or the request; one line, exit code 2."""


def default_store():
    env = os.environ.get("KSTUDY_HISTORY")
    if env:
        return Path(env)
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "kstudy" / "history.sqlite"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def connect(store):
    store = Path(store)
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(str(store), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except (OSError, sqlite3.Error) as error:
        raise HistoryError(f"cannot open the history store {store}: {error}")
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
        # Switching to WAL needs the database to itself for a moment; a writer starting at the same instant
        # can make it fail at once rather than wait, so it is retried.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if str(mode).lower() != "wal":
            raise HistoryError(f"the history store {store} cannot use WAL mode (journal mode {mode}); a "
                               "network file system? set --store or KSTUDY_HISTORY to a local path")
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("COMMIT")
    except sqlite3.DatabaseError as error:
        db.close()
        raise HistoryError(f"the history store {store} is not usable: {error}")
    return db


def git(repo, *args):
    try:
        run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout if run.returncode == 0 else None


def repo_holding(commit, candidates):
    """The first candidate folder that is a git repository knowing `commit`, as its top level, or ''."""
    if not commit:
        return ""
    for c in candidates:
        if not c:
            continue
        top = git(c, "rev-parse", "--show-toplevel")
        if top and git(top.strip(), "cat-file", "-e", f"{commit}^{{commit}}") is not None:
            return top.strip()
    return ""


def series_rows(archive):
    """(experiment, variant, backend, point, timer, n, median, q1, q3, samples blob) per point of the archive."""
    from .compare import KEYS, accepted
    s = accepted(archive)
    if s.empty:
        return []
    s = s.assign(point=[G.point_label(dict(zip(KEYS, k))) for k in s[KEYS].itertuples(index=False)])
    rows = []
    # Two keys that read as one label (a memory kind or layout the label leaves out) are pooled: one point to a
    # reader.
    for (experiment, variant, point, timer), g in s.groupby(["experiment", "variant", "point", "timer"]):
        x = np.sort(g.seconds.to_numpy(dtype=np.float64))
        q1, median, q3 = np.percentile(x, [25, 50, 75])
        rows.append((experiment, variant, A.backend(variant), point, timer, len(x), float(median), float(q1),
                     float(q3), x.astype("<f8").tobytes()))
    return rows


def add(args):
    store = Path(args.store) if args.store else default_store()
    prepared = []
    for given in args.archives:
        path = Path(given).resolve()
        if not path.is_file():
            raise HistoryError(f"{given}: no such file")
        # Read everything before taking the store's write lock: the lock is held only for the inserts.
        digest = sha256_of(path)
        archive = A.Archive(path)
        attrs, env = archive.attrs, archive.environment
        commit = attrs.get("git_commit", "")
        repo = repo_holding(commit, [args.repo, os.getcwd()])
        gpu = env.get("gpu_name", "")
        host = attrs.get("host", "")
        meta = dict(sha256=digest, path=str(path), file_bytes=path.stat().st_size, git_commit=commit,
                    git_dirty=1 if attrs.get("git_dirty", "") == "true" else 0, machine=gpu or host or "unknown",
                    host=host, gpu_name=gpu, kokkos_version=env.get("kokkos_version", ""),
                    experiments=",".join(sorted(archive.experiments)), schema_version=archive.schema_version,
                    created_utc=attrs.get("created_utc", ""),
                    recorded_utc=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    repo=repo)
        prepared.append((given, meta, series_rows(archive)))
    db = connect(store)
    try:
        for given, meta, rows in prepared:
            db.execute("BEGIN IMMEDIATE")
            try:
                known = db.execute("SELECT id, path FROM archives WHERE sha256 = ?", (meta["sha256"],)).fetchone()
                if known:
                    if known[1] != meta["path"] and not Path(known[1]).is_file():
                        db.execute("UPDATE archives SET path = ? WHERE id = ?", (meta["path"], known[0]))
                        note = f"already recorded (#{known[0]}), moved from {known[1]}"
                    else:
                        also = ", also at " + known[1] if known[1] != meta["path"] else ""
                        note = f"already recorded (#{known[0]}{also})"
                else:
                    columns = list(meta)
                    cur = db.execute(f"INSERT INTO archives ({', '.join(columns)}) VALUES "
                                     f"({', '.join('?' * len(columns))})", [meta[c] for c in columns])
                    db.executemany("INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                   [(cur.lastrowid, *r) for r in rows])
                    if meta["repo"]:
                        db.execute("INSERT OR REPLACE INTO meta VALUES ('repo', ?)", (meta["repo"],))
                    note = (f"recorded #{cur.lastrowid}: {meta['git_commit'][:10] or 'no commit'}"
                            f"{'+dirty' if meta['git_dirty'] else ''} on {meta['machine']}, {len(rows)} series")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            print(f"history: {given}: {note}")
    finally:
        db.close()
    return 0


def file_status(path, sha256, file_bytes, verify):
    p = Path(path)
    if not p.is_file():
        return "missing"
    if p.stat().st_size != file_bytes or (verify and sha256_of(p) != sha256):
        return "changed"
    return "ok"


def list_(args):
    store = Path(args.store) if args.store else default_store()
    if not store.is_file():
        raise HistoryError(f"no history store at {store} (record archives with `kstudy history add`)")
    db = connect(store)
    rows = db.execute("SELECT a.id, a.git_commit, a.git_dirty, a.machine, a.kokkos_version, a.experiments, "
                      "a.created_utc, a.path, a.sha256, a.file_bytes, COUNT(p.variant) FROM archives a LEFT JOIN "
                      "points p ON p.archive_id = a.id GROUP BY a.id ORDER BY a.created_utc, a.id").fetchall()
    db.close()
    print(f"history store {store}: {len(rows)} archives")
    table = [["#", "commit", "machine", "kokkos", "created", "series", "file", "experiments", "path"]]
    for (i, commit, dirty, machine, kokkos, experiments, created, path, sha, size, n) in rows:
        table.append([str(i), (commit[:10] or "-") + ("+dirty" if dirty else ""), machine, kokkos or "-", created,
                      str(n), file_status(path, sha, size, not args.quick), experiments, path])
    widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def commit_order(repo, commits):
    """commit -> position in `git log` order of `repo` (oldest first), or None when a commit is not in it."""
    if not repo:
        return None
    log = git(repo, "log", "--all", "--topo-order", "--reverse", "--format=%H")
    if log is None:
        return None
    position = {c: i for i, c in enumerate(log.split())}
    return position if all(c in position for c in commits) else None


def show(args):
    store = Path(args.store) if args.store else default_store()
    if not store.is_file():
        raise HistoryError(f"no history store at {store} (record archives with `kstudy history add`)")
    threshold = G.parse_gate(args.threshold)
    db = connect(store)
    query = ("SELECT p.experiment, p.variant, p.point, p.timer, a.machine, a.git_commit, a.git_dirty, "
             "a.created_utc, a.id, p.samples FROM points p JOIN archives a ON a.id = p.archive_id "
             "WHERE (p.variant = ? OR p.variant LIKE ? ESCAPE '\\')")
    like = args.variant.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "@%"
    params = [args.variant, like]
    for column, value in (("p.point", args.point), ("p.timer", args.timer), ("p.experiment", args.experiment)):
        if value:
            query += f" AND {column} = ?"
            params.append(value)
    if args.machine:
        query += " AND lower(a.machine) LIKE ?"
        params.append(f"%{args.machine.lower()}%")
    rows = db.execute(query, params).fetchall()
    stored_repo = db.execute("SELECT value FROM meta WHERE key = 'repo'").fetchone()
    db.close()
    if not rows:
        raise HistoryError(f"nothing recorded for variant {args.variant}"
                           + "".join(f", {n} {v}" for n, v in (("point", args.point), ("timer", args.timer),
                                                               ("machine", args.machine),
                                                               ("experiment", args.experiment)) if v)
                           + " (`kstudy history list` shows what is stored)")
    repo = args.repo or (stored_repo[0] if stored_repo else "")
    position = commit_order(repo, {r[5] for r in rows if r[5]})
    order_note = (f"commit order: git log of {repo}" if position is not None else
                  "commit order: archive creation time" + (f" ({repo} does not hold every commit)" if repo else
                                                           " (no repository recorded; add --repo)"))
    series = {}
    for experiment, variant, point, timer, machine, commit, dirty, created, aid, blob in rows:
        group = series.setdefault((experiment, variant, point, timer, machine), {})
        entry = group.setdefault((commit, dirty), dict(created=created, archives=set(), samples=[]))
        entry["created"] = min(entry["created"], created)
        entry["archives"].add(aid)
        entry["samples"].append(np.frombuffer(blob, dtype="<f8"))
    print(f"{order_note}; step = `compare --gate` verdict against the commit before: Mann-Whitney U at alpha "
          f"{args.alpha:g} and a median change beyond {threshold * 100:g}% with the medians' intervals apart")
    plotted = []
    for key in sorted(series):
        experiment, variant, point, timer, machine = key
        groups = series[key]

        def rank(item):
            (commit, dirty), entry = item
            return ((position[commit], dirty, entry["created"]) if position is not None else
                    (entry["created"], dirty, commit))

        ordered = sorted(groups.items(), key=rank)
        print(f"\n{experiment} / {variant} / {point} / {timer} on {machine}")
        table = [["commit", "created", "archives", "n", "median", "IQR (q1..q3)", "vs previous", "step"]]
        points = []
        previous = None
        for (commit, dirty), entry in ordered:
            x = np.concatenate(entry["samples"])
            q1, median, q3 = np.percentile(x, [25, 50, 75])
            change, step = "", ""
            if previous is not None:
                v = G.verdict(previous, x, threshold, args.alpha, args.min_samples)
                if np.isfinite(v["ratio"]):
                    change = f"x{v['ratio']:.3f}"
                if v["verdict"] in ("SLOWER", "FASTER"):
                    step = f"STEP {v['verdict']}"
                elif v["verdict"] == "UNCERTAIN" and v["reason"].startswith("too few"):
                    step = "(too few samples)"
            label = (commit[:10] or "-") + ("+dirty" if dirty else "")
            table.append([label, entry["created"], str(len(entry["archives"])), str(len(x)), A.fmt_seconds(median),
                          f"{A.fmt_seconds(q1)}..{A.fmt_seconds(q3)}", change, step])
            points.append((label, median, q1, q3, step))
            previous = x
        widths = [max(len(r[c]) for r in table) for c in range(len(table[0]))]
        for r in table:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        plotted.append((key, points))
    if args.plot:
        plot(plotted, args.plot)
        print(f"\nhistory: wrote {args.plot}")
    return 0


def plot(plotted, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * max(len(p) for _, p in plotted) + 3), 4.5))
    labels = []  # every commit of every series, in the order the series list them
    for _, points in plotted:
        for p in points:
            if p[0] not in labels:
                labels.append(p[0])
    for (experiment, variant, point, timer, machine), points in plotted:
        xs = np.array([labels.index(p[0]) for p in points])
        med = np.array([p[1] for p in points])
        lo = med - np.array([p[2] for p in points])
        hi = np.array([p[3] for p in points]) - med
        ax.errorbar(xs, med, yerr=[lo, hi], marker="o", capsize=3, label=f"{variant} {point} {timer} ({machine})")
        steps = [i for i, p in enumerate(points) if p[4].startswith("STEP")]
        if steps:
            ax.scatter(xs[steps], med[steps], s=160, facecolors="none", edgecolors="red", linewidths=2, zorder=3)
    ax.set_xticks(np.arange(len(labels)))
    ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("median seconds (bars: q1..q3)")
    ax.set_title("kstudy history (red circles: step against the commit before)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as error:
        raise HistoryError(f"cannot write --plot {path}: {error.strerror or error}")
    finally:
        plt.close(fig)


def main(args):
    try:
        if args.history_command == "add":
            return add(args)
        if args.history_command == "list":
            return list_(args)
        return show(args)
    except HistoryError as error:
        print(f"kstudy history: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # parse_gate on --threshold
        print(f"kstudy history: {str(error).replace('--gate', '--threshold')}", file=sys.stderr)
        return 2
    except sqlite3.Error as error:
        print(f"kstudy history: the history store failed: {error}", file=sys.stderr)
        return 2
