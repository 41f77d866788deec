#!/usr/bin/python3
"""The prose of docs/results.md and README.md against their generated blocks (issue 46): a hand-written sentence
that cites a measured number or a verdict must say what the `kstudy:results` blocks say, so that the prose cannot
drift from the tables scripts/results.py regenerates.

    tests/check_results_prose.py REPOSITORY [--list]

First the checker itself on small pages with known answers (each kind of drift must fail, each allowed form pass),
then every page of scripts/kstudy_py/results.PAGES; --list prints each prose number checked. Prose is every line
outside a block, fenced code, a heading or an image line. Numbers in `code spans`, link targets and HTML comments are
not prose; a shape's later factors (65,536 × 4,096), dates, and numbers glued to letters (H200, 16M, sm_90, 8,192³)
carry no unit.

Sections. The page is cut by its headings. A paragraph's *scope* is the blocks under its own heading and that
heading's subheadings; a `###` (or deeper) heading with none takes its parent's, a `##` heading with none has none,
and the page's title collects only the blocks before the first `##`. Blocks of another section are reached only
through a `from` marker (below).

a. Every prose number written with a unit of the tables (µs, ms, GB/s, TB/s, TFLOP/s, ×, %) must equal, at the
   precision written, a number of its scope's blocks: 0.61× matches 0.613×, 1,206 µs matches 1,205.8 (half a unit
   of the last digit written, or of the table's where the table prints fewer decimals); ms and TB/s match the
   tables' µs and GB/s across the factor 1,000. The tables' numbers are typed: a % only matches a share (a number
   followed by %), a × only a ratio (followed by ×, or an end of its interval: "1.41×, 1.21–1.62", "0.71× (0.40–0.93)",
   "[1.45–1.54]", "interval 0.90–1.02"), and µs, ms, GB/s, TB/s and TFLOP/s only an untyped number (a time or a rate,
   its unit in the column header). Both ends of a range (0.81–0.91×, 602 to 311 µs, 53.4 → 42.2 µs) and each member
   of a list (1,206 and 1,719 µs, 74.0 / 295 / 31.7 µs) take the unit written after the last, except a number after
   "at", "rung", "session", "note", "issue", "call", "step", "schema" or "head_dim", which is a point or a name ("1.06×
   at 8,192 and 1.18×"). After "about", "~", "≈", "nearly", "roughly" or "around" an integer's trailing zeros are not
   significant (about 2,900 GB/s: 2,850 to 2,950). A single number after a bound (≤, ≥, <, >, under, below, within,
   up to, at most, at least, more than, less than) is a threshold, not a measurement, and is not checked; a range
   after one is ("within 7–10%"). "95%" before "interval", "confidence" or "bootstrap" is a level, not a result.
b. A number that passes rule a in a sentence naming a rung in backticks before it (a name some block row or column
   header names, `fused_cuda_feature_major` or `fused_cuda_feature_major@cuda`), after the sentence's last ";" or ":"
   and outside a parenthesis closed before the number, must be in a row or column of one of those rungs: a number of
   the section's blocks from another rung's row fails. Where "against", "than", "where", "while" or "vs" comes
   between the last such rung and the number, the number is the other side of a comparison and answers to rule a
   only.
c. A sentence that names two rungs in backticks, with one verdict word between them (faster, slower, beats, wins,
   loses, ties, ahead of, behind), says the first is faster, slower or level against the second. Where the scope's
   blocks give that pair a verdict (a summary or every-shape row, a pair column "`A` ÷ `B`", a Python rung's cell under
   a column naming kstudy's rung, "`A` vs `B`: beats", "`A` loses `B`"), one of them must go the same way (faster:
   beats or faster; slower: loses or slower; level: tie or inconclusive), among those at the shapes the sentence names
   when the blocks judge the pair there. A verdict word after "not", "never" or "no" is not read. docs/results.md has
   no such sentence today (its verdicts name one side by description: Triton, cuDNN, "the 15-line kernel"); the rule
   holds the ones to come.

Markers. A number from anywhere else carries, right after it, a comment that covers the unit-bearing numbers before
it in its clause: back to the previous marker, or the last "(", ")", ";" or ":", or the start of the sentence.

    <!-- prose: from PATH[,PATH...] -->          where a block of the page renders PATH, rules a and b hold against
                                                 those blocks (any section's); a text file (.md .json .csv .txt) must
                                                 hold the number at the prose's precision, of any type ("1.6x" reads
                                                 as 1.6×); a PATH that is neither fails.
    <!-- prose: archive PATH[,PATH...] WHAT -->  read by hand from an archive no block shows (each PATH must exist);
                                                 WHAT says what was read.
    <!-- prose: derived HOW -->                  computed from the tables (a difference, 1 − a ratio, a quotient).
    <!-- prose: quoted SOURCE -->                measured outside this tree (the seed, an issue, PyTorch) or in a file
                                                 retired to git history.
    <!-- prose: predicted SOURCE -->             a prediction, in a sentence that says "predict..."; a SOURCE that is a
                                                 text file of the repository is checked as `from` checks one.

These five are the whole exemption list. A marker that covers no number fails, as do an unknown kind, a path that
does not exist and an empty SOURCE.

Not checked: numbers without one of those units (counts, shapes, MHz, W, GiB, p-values, the unitless "against 740
and 1,452" after a unit-bearing one); a direction written in words ("Triton is faster by 0.8%" against a table that
says slower); bounds; which of several equal numbers in scope the sentence meant (a 2-digit ratio or share of a large
section can match by chance: a number quoted from elsewhere needs its marker even where the check passes without
one); what a `derived`, `archive`, `quoted` or `predicted` number says; verdicts that name a rung by a description
or a pronoun.
Exit 77 (ctest: skipped) only when scripts/kstudy_py cannot be imported: the checker needs no third-party module.
"""
import re
import sys
from pathlib import Path

from check_support import Cases, require

ARGS = [a for a in sys.argv[1:] if a != "--list"]
REPO = Path(ARGS[0] if ARGS else Path(__file__).resolve().parent.parent).resolve()
sys.path.insert(0, str(REPO / "scripts"))
results = require("kstudy_py.results")
BEGIN, END, PAGES = results.BEGIN, results.END, results.PAGES  # the block markers results.py reads
cases = Cases()
check = cases.check
LIST = "--list" in sys.argv  # print every prose number checked, with its marker


MARKER = re.compile(r"<!--\s*prose:\s*(?P<kind>\S+)\s*(?P<what>.*?)\s*-->", re.S)
KINDS = ("from", "archive", "derived", "quoted", "predicted")
TEXT_FILES = (".md", ".json", ".csv", ".txt")
COMMENT = re.compile(r"<!--.*?-->", re.S)
CODE = re.compile(r"`([^`\n]*)`")
LINK_TARGET = re.compile(r"(?<=\])\([^)\s]*\)")
NUMBER = re.compile(r"(?<![\w.,^/×\-])(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:[eE][-+]?\d+)?(?![\w])")
SPACE = "[ \u00a0\u202f]"
UNIT = re.compile(SPACE + r"?(µs|μs|ms|GB/s|TB/s|TFLOP/s|%|×)")
JOIN = re.compile(r"\s*(?:–|—|-|to|and|or|/|→|->)\s*")
BOUND = re.compile(r"(?:≤|≥|<|>|\bunder|\bbelow|\bwithin|\bup to|\bat most|\bat least|\bmore than|\bless than)"
                   + SPACE + r"*(?:(?:~|≈|about|nearly|roughly|around)" + SPACE + r"*)?$")
APPROX = re.compile(r"(?:~|≈|\babout|\bnearly|\broughly|\baround)" + SPACE + r"*$")
LEVEL = re.compile(SPACE + r"?(?:interval|confidence|bootstrap)")
SENTENCE_END = re.compile(r"(?<=[.!?])(?:\*{1,2})?\s+(?=[A-Z*_(\[])")
# A number after one of these words is a point or a name ("1.06× at 8,192 and 1.19×", "rung 7 and 60%"): a unit
# written after the next number is not carried back to it.
LABEL = re.compile(r"\b(?:at|rungs?|sessions?|notes?|issues?|calls?|steps?|schema|head_dim)" + SPACE + "$")
OTHER_SIDE = re.compile(r"\b(?:against|than|where|while|vs)\b")
IDENTIFIER = re.compile(r"^[A-Za-z_]\w*(?:@\w+)?$")
VERDICT_CELL = re.compile(r"\b(beats|loses|tie|inconclusive|faster|slower)\b(?!\s+at\b)")
VERDICT_PROSE = re.compile(r"\b(faster|slower|beats?|wins?|loses?|ties?|ahead of|behind)\b")
NEGATION = re.compile(r"\b(?:not|never|no)\s+(?:\w+\s+)?$")
SCALE = {"ms": (1000.0,), "TB/s": (1000.0,)}  # the tables print µs and GB/s
ANY = "any"  # the kind of a cited text file's number: a share, a ratio or a rate alike


def rung_name(text):
    """A code span's text as a rung name (`fused_cuda_feature_major@cuda` -> fused_cuda_feature_major), or None."""
    text = text.strip()
    return text.split("@")[0] if IDENTIFIER.match(text) else None


def value_of(token):
    return float(token.replace(",", ""))


def decimals(token):
    return len(token.split(".")[1]) if "." in token else 0


class Num:
    """A number as written: its value, the half unit of its last significant digit, and its kind: "%" for a share,
    "×" for a ratio (its interval's ends too), None for a time, a rate or anything else."""

    def __init__(self, token, approx=False, kind=None):
        self.token, self.value, self.kind = token, value_of(token), kind
        digits = token.split(".")[0].replace(",", "")
        places = -decimals(token)
        if approx and places == 0:
            places = len(digits) - len(digits.rstrip("0")) if digits.strip("0") else 0
        self.half = 0.5 * 10.0 ** places

    def matches(self, other, unit=None):
        """Whether `other` (a table's number) says this prose number, in the unit the prose writes."""
        if other.kind is not ANY and kind_of_unit(unit) != other.kind:
            return False
        for scale in ((1.0,) if other.kind is ANY else ()) + SCALE.get(unit, (1.0,)):
            # A table coarser than the prose (0.6 against 0.61) agrees with it; a table's integer is no such case
            # (rung 2's 2 is no 2.4).
            half = max(self.half * scale, other.half if "." in other.token else 0.0)
            if abs(self.value * scale - other.value) <= half * (1 + 1e-9):
                return True
        return False


def kind_of_unit(unit):
    return unit if unit in ("%", "×") else None


def unit_after(text, end):
    """The unit written right after a number ending at `end` (µs, ms, GB/s, TB/s, TFLOP/s, % or ×), or None; a
    "×" that a number follows is a shape (65,536 × 4,096), not a ratio."""
    unit = UNIT.match(text, end)
    if not unit:
        return None
    own, rest = unit.group(1), text[unit.end():]
    if own in ("µs", "μs", "ms") and re.match(r"\w", rest[:1] or " "):
        return None
    if own == "×" and re.match(SPACE + r"?\d", rest):
        return None
    return "µs" if own == "μs" else own


def numbers_in(text):
    """Every number of a block's (or a cited file's) text, each with its kind: a share where "%" follows it, a
    ratio where "×" follows it or where it continues a ratio ("1.41×, 1.21–1.62", "0.71× (0.40–0.93)",
    "[1.45–1.54]", "interval 0.90–1.02"), a range taking the unit after its far end. Code spans are masked: their
    digits are names."""
    out = []
    for line in CODE.sub(lambda m: "_" * len(m.group(0)), text).split("\n"):
        found = [[m, kind_of_unit(unit_after(line, m.end()))] for m in NUMBER.finditer(line)]
        for k in range(len(found) - 2, -1, -1):  # "83–83%", "0.71–1.41×": the far end's unit
            gap = line[found[k][0].end():found[k + 1][0].start()]
            if found[k][1] is None and found[k + 1][1] and re.fullmatch(r"\s*[–-]\s*", gap):
                found[k][1] = found[k + 1][1]
        for k in range(1, len(found)):  # a ratio's interval: "1.41×, 1.21–1.62;", "1.46× [1.45–1.54]"
            gap = line[found[k - 1][0].end():found[k][0].start()]
            if found[k][1] is None and found[k - 1][1] == "×" and re.fullmatch(r"[×\s(\[,–-]*", gap):
                found[k][1] = "×"
        for k, (m, kind) in enumerate(found):  # "time ratio 0.95×, interval 0.90–1.02"
            if kind is None and re.search(r"interval\s*$", line[:m.start()]):
                found[k][1] = "×"
                if k + 1 < len(found) and found[k + 1][1] is None:
                    found[k + 1][1] = "×"
        out += [Num(m.group(1), kind=kind) for m, kind in found]
    return out


def split_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def verdict_class(word):
    """faster, slower or level: what a verdict word (a block's or the prose's) says of its first rung."""
    word = word.lower()
    if word in ("beats", "beat", "faster", "wins", "win", "ahead of"):
        return "faster"
    if word in ("loses", "lose", "slower", "behind"):
        return "slower"
    return "level"  # tie, ties, inconclusive


class Block:
    """One kstudy:results block: its archives, its numbers, the numbers of each rung's rows and columns, its
    verdicts per (rung, rung, point)."""

    def __init__(self, line, args, body):
        self.line, self.body = line, body
        words = dict(w.split("=", 1) for w in args.split()[1:] if "=" in w)
        self.archives = [p for p in words.get("archives", "").split(",") if p]
        lines = [raw for raw in body.split("\n") if not raw.startswith("*Generated by")]
        self.numbers = numbers_in("\n".join(lines))
        self.rungs = {}  # rung -> [Num] of the rows and columns naming it
        self.verdicts = []  # (first rung, second rung, point text, class)
        header = None
        for i, raw in enumerate(lines):
            if raw.startswith("|"):
                cells = split_cells(raw)
                if i + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|?\s*$", lines[i + 1]):
                    header = [[rung_name(c) for c in CODE.findall(cell) if rung_name(c)] for cell in cells]
                    continue
                if re.match(r"^\|[\s:|-]+\|?\s*$", raw):
                    continue
                self._row(cells, header or [])
            else:
                header = None
                self._line(raw)

    def _add(self, rung, text):
        self.rungs.setdefault(rung, []).extend(numbers_in(text))

    def _row(self, cells, header):
        row_rungs = [rung_name(c) for c in CODE.findall("|".join(cells)) if rung_name(c)]
        for rung in row_rungs:
            self._add(rung, "|".join(cells))
        for j, cell in enumerate(cells):
            column = header[j] if j < len(header) else []
            for rung in column:
                self._add(rung, cell)
            found = VERDICT_CELL.search(cell)
            if not found:
                continue
            before = [rung_name(c) for c in CODE.findall("|".join(cells[:j])) if rung_name(c)]
            own_before = [rung_name(c) for c in CODE.findall(cell[:found.start()]) if rung_name(c)]
            own_after = [rung_name(c) for c in CODE.findall(cell[found.end():]) if rung_name(c)]
            order = list(dict.fromkeys(before + own_before + own_after + column))
            if len(order) >= 2:
                self.verdicts.append((order[0], order[1], cells[0], verdict_class(found.group(1))))

    def _line(self, raw):
        """A line outside a table: each rung it names owns the text from its name to the next rung's (an inline
        list, "`a` 3.89 (3.77–4.97), `b` 9.26 (8.54–9.74)"); a verdict word after the first of two rungs is the
        pair's verdict ("- 1,048,576×16: `a` vs `b`: beats (...)", "`a` tie `b` (...)")."""
        names = [(m.start(), rung_name(m.group(1))) for m in CODE.finditer(raw) if rung_name(m.group(1))]
        for k, (pos, rung) in enumerate(names):
            self._add(rung, raw[pos:names[k + 1][0] if k + 1 < len(names) else len(raw)])
        found = VERDICT_CELL.search(CODE.sub(lambda m: "_" * len(m.group(0)), raw), names[0][0]) if names else None
        if found and len(names) >= 2:
            point = raw[:names[0][0]]
            self.verdicts.append((names[0][1], names[1][1], point, verdict_class(found.group(1))))


class Section:
    def __init__(self, level, title, line, parent):
        self.level, self.title, self.line, self.parent = level, title, line, parent
        self.blocks, self.children = [], []

    def all_blocks(self):
        if self.level <= 1:  # the page's title is no section: its blocks are the ones before the first subheading
            return list(self.blocks)
        return self.blocks + [b for child in self.children for b in child.all_blocks()]

    def scope(self):
        """The blocks under this heading and its subheadings; a heading with none takes its parent's."""
        section = self
        while section is not None:
            blocks = section.all_blocks()
            if blocks or section.level <= 2:
                return blocks
            section = section.parent
        return []


def parse(text):
    """(paragraphs, blocks): each paragraph a (first line number, its lines, its section)."""
    lines = text.split("\n")
    root = Section(0, "", 0, None)
    section, paragraphs, blocks, current, fence, i = root, [], [], None, False, 0

    def flush():
        nonlocal current
        if current:
            paragraphs.append(current)
        current = None

    while i < len(lines):
        raw, number = lines[i], i + 1
        i += 1
        if raw.lstrip().startswith("```"):
            flush()
            fence = not fence
            continue
        if fence:
            continue
        heading = re.match(r"^(#{1,6})\s+(.*)$", raw)
        begin = BEGIN.match(raw)
        if heading:
            flush()
            level = len(heading.group(1))
            parent = section
            while parent.level >= level:
                parent = parent.parent
            section = Section(level, heading.group(2), number, parent)
            parent.children.append(section)
        elif begin:
            flush()
            start = i
            while i < len(lines) and lines[i].strip() != END:
                i += 1
            block = Block(number, begin.group("args"), "\n".join(lines[start:i]))
            section.blocks.append(block)
            blocks.append(block)
            i += 1
        elif not raw.strip() or raw.lstrip().startswith("!["):
            flush()
        else:
            if re.match(r"^\s*(?:[-*+]|\d+\.)\s", raw):
                flush()
            if current is None:
                current = (number, [], section)
            current[1].append(raw)
    flush()
    return paragraphs, blocks


def masked(text):
    """The paragraph with code spans, link targets and comments blanked (positions kept), its markers, and the
    rung candidates its code spans name, by position."""
    spans = [(m.start(), m.group(1)) for m in CODE.finditer(text)]
    code = [(m.start(), m.end()) for m in CODE.finditer(text)]
    markers = [(m.start(), m.group("kind"), m.group("what")) for m in MARKER.finditer(text)
               if not any(a <= m.start() < b for a, b in code)]
    out = COMMENT.sub(lambda m: " " * len(m.group(0)), text)
    out = CODE.sub(lambda m: "_" * len(m.group(0)), out)
    out = LINK_TARGET.sub(lambda m: " " * len(m.group(0)), out)
    return out, markers, spans


class Claim:
    """A unit-bearing number of the prose: where it is, what it says, what covers it."""

    def __init__(self, match, unit, approx, bound, in_range):
        self.start, self.end = match.start(1), match.end(1)
        self.num = Num(match.group(1), approx)
        self.unit, self.bound, self.in_range = unit, bound, in_range
        self.marker = None


def claims_of(sentence):
    """The sentence's unit-bearing numbers, a unit written after the last of a range or list carried back to the
    others ("1,206 and 1,719 µs"), never to a shape's factor or to a point ("1.06× at 8,192 and 1.19×")."""
    found = []
    for m in NUMBER.finditer(sentence):
        factor = bool(re.search("×" + SPACE + "?$", sentence[:m.start()]))  # 65,536 × 4,096's 4,096
        own = None if factor else unit_after(sentence, m.end())
        if own == "%" and LEVEL.match(sentence, UNIT.match(sentence, m.end()).end()):
            continue  # "95% interval": a level, not a result
        point = factor or bool(LABEL.search(sentence[:m.start()]))
        found.append({"m": m, "unit": own, "range": False, "point": point, "factor": factor})
    for k in range(len(found) - 2, -1, -1):
        this, after = found[k], found[k + 1]
        gap = sentence[this["m"].end():after["m"].start()]
        if this["unit"] is not None or not after["unit"] or not JOIN.fullmatch(gap):
            continue
        ranged = gap.strip() in ("–", "—", "-", "to", "→", "->")
        if this["point"] and (this["factor"] or not ranged):
            continue
        this["unit"] = after["unit"]
        this["range"] = after["range"] = this["range"] or ranged
    claims = []
    for f in found:
        if f["unit"] is None:
            continue
        m = f["m"]
        before = sentence[max(0, m.start() - 16):m.start()].replace("*", "").rstrip("( ")
        claims.append(Claim(m, f["unit"], bool(APPROX.search(before)), bool(BOUND.search(before)), f["range"]))
    return claims


def sentences_of(text):
    out, start = [], 0
    for m in SENTENCE_END.finditer(text):
        out.append((start, m.start()))
        start = m.end()
    out.append((start, len(text)))
    return out


class TextSource:
    """A text file a `prose: from` marker names, as a pool of numbers with no rows."""

    def __init__(self, numbers):
        self.numbers, self.rungs = numbers, {}


def closed(flat, pos, at):
    """Whether a parenthesis open at `pos` closes before `at`: "(0.92×: `a` loads ...), and 24%" names `a` for
    what is inside the parentheses only."""
    depth = 0
    for ch in flat[pos:at]:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return True
    return False


def rungs_before(flat, lo, at, spans, blocks):
    """Rule b's rungs for the number at `at`: those its sentence names before it, after the last ';' or ':', with
    rows in `blocks`; none where "against", "than", "where", "while" or "vs" comes between the last of them and the
    number (the number is the other side of a comparison)."""
    start = max(lo, flat.rfind(";", lo, at) + 1, flat.rfind(":", lo, at) + 1)
    named = [(pos, rung_name(t)) for pos, t in spans if start <= pos < at and rung_name(t)
             and any(rung_name(t) in b.rungs for b in blocks) and not closed(flat, pos, at)]
    if not named or OTHER_SIDE.search(flat, named[-1][0], at):
        return []
    return [r for _, r in named]


def check_page(text, label, root):
    """The problems of a page's prose: (line, message) pairs; and how many numbers were checked."""
    paragraphs, blocks = parse(text)
    by_archive = {}
    for block in blocks:
        for name in block.archives:
            by_archive.setdefault(name, []).append(block)
    problems, checked, verdicts, exempt = [], 0, 0, 0
    for first, lines, section in paragraphs:
        joined = "\n".join(lines)
        line_of = [first + joined.count("\n", 0, k) for k in range(len(joined) + 1)]
        clean, markers, spans = masked(joined)
        flat = clean.replace("\n", " ")
        scope = section.scope()
        for lo, hi in sentences_of(flat):
            sentence = flat[lo:hi]
            claims = claims_of(sentence)
            for c in claims:
                c.start += lo
                c.end += lo
            sentence_markers = [mk for mk in markers if lo <= mk[0] < hi]
            last = lo
            for pos, kind, what in sentence_markers:
                start = max([last] + [flat.rfind(ch, lo, pos) + 1 for ch in "();:"])  # its clause
                covered = [c for c in claims if start <= c.start < pos and c.marker is None]
                where = f"{label}:{line_of[pos]}"
                if kind not in KINDS:
                    problems.append((where, f"unknown marker kind {kind!r} (one of {', '.join(KINDS)})"))
                elif not covered:
                    problems.append((where, f"the marker `prose: {kind} {what}` covers no unit-bearing number"))
                elif kind != "derived" and not what:
                    problems.append((where, f"the marker `prose: {kind}` names no source"))
                elif kind == "predicted" and not re.search(r"\bpredict", sentence, re.I):
                    problems.append((where, "a `prose: predicted` marker in a sentence that names no prediction"))
                for c in covered:
                    c.marker = (kind, what)
                last = pos
            for c in claims:
                where = f"{label}:{line_of[c.start]}"
                shown = f"{c.num.token}{'' if c.unit in ('%', '×') else ' '}{c.unit}"
                if c.bound and not c.in_range:
                    continue
                checked += 1
                if LIST:
                    print(f"     {where}: {shown}" + (f" <!-- prose: {' '.join(c.marker)} -->" if c.marker else ""))
                pool_blocks, source = scope, "its section's blocks"
                if c.marker:
                    kind, what = c.marker
                    paths = what.split()[0].split(",") if what else []
                    if kind == "predicted" and paths and (root / paths[0]).is_file():
                        kind = "from"  # a prediction written down in a file of the repository: checked there
                    if kind not in ("from", "archive"):
                        exempt += 1
                        continue
                    missing = [path for path in paths if not (root / path).exists()]
                    if missing:
                        problems.append((where, f"{shown}: `prose: {kind}` names {', '.join(missing)}: no such file"))
                        continue
                    if kind == "archive":
                        exempt += 1
                        continue  # read from the archive by hand: no block shows it
                    texts = [path for path in paths if path not in by_archive]
                    if [path for path in texts if not path.endswith(TEXT_FILES)]:
                        problems.append((where, f"{shown}: `prose: from {what}`: no block of the page renders "
                                         f"{', '.join(texts)} (an archive read by hand is `prose: archive`)"))
                        continue
                    pool_blocks = [b for path in paths for b in by_archive.get(path, [])]
                    source = " and ".join(f"the blocks of {path}" if path in by_archive else path for path in paths)
                    if texts:
                        text_numbers = [n for path in texts for n in numbers_in(
                            re.sub(r"(\d)x\b", "\\1×", (root / path).read_text()))]
                        for n in text_numbers:
                            n.kind = ANY  # a note's or a README's prose: its units are not a table's
                        if not pool_blocks and any(c.num.matches(n, c.unit) for n in text_numbers):
                            continue
                        pool_blocks = pool_blocks + [TextSource(text_numbers)]
                pool = [n for b in pool_blocks for n in b.numbers]
                if not any(c.num.matches(n, c.unit) for n in pool):
                    where_from = "" if c.marker else (" and carries no `<!-- prose: ... -->` marker"
                                                      if scope else ": its section has no block, and no marker")
                    problems.append((where, f"{shown} is not in {source}{where_from}"))
                    continue
                own = rungs_before(flat, lo, c.start, spans, pool_blocks)
                rows = [n for b in pool_blocks for r in own for n in b.rungs.get(r, [])]
                if own and LIST:
                    print(f"     {where}: {shown} in the rows of " + ", ".join(f"`{r}`" for r in dict.fromkeys(own)))
                if own and not any(c.num.matches(n, c.unit) for n in rows):
                    problems.append((where, f"{shown} is in {source} but in no row of "
                                     + ", ".join(f"`{r}`" for r in dict.fromkeys(own))))
            found, judged = verdict_problems(flat, lo, hi, spans, scope, label, line_of)
            problems += found
            verdicts += judged
            if judged and LIST:
                print(f"     {label}:{line_of[lo]}: a verdict")
    return problems, checked, verdicts, exempt


def shapes_in(text):
    """The shapes a text names, as tuples of integers: 65,536×4096, 16 × 16,384 × 64, 8,192³, 1M×16."""
    def integer(token):
        token = token.replace(",", "")
        return int(token[:-1]) << 20 if token.endswith("M") else int(token)
    number = r"\d{1,3}(?:,\d{3})+M?|\d+M?"
    found = [tuple(integer(t) for t in re.split(SPACE + r"?×" + SPACE + r"?", m.group(0)))
             for m in re.finditer(rf"(?:{number})(?:{SPACE}?×{SPACE}?(?:{number}))+", text)]
    found += [(integer(m.group(1)),) * 3 for m in re.finditer(rf"({number})³", text)]
    return set(found)


def verdict_problems(flat, lo, hi, spans, scope, label, line_of):
    """Rule c for one sentence: ([problem], whether the sentence made a verdict claim the blocks judge)."""
    verdicts = [v for block in scope for v in block.verdicts]
    known = {r for v in verdicts for r in v[:2]}
    named = [(pos, r) for pos, r in ((p, rung_name(t)) for p, t in spans if lo <= p < hi) if r in known]
    if len(named) < 2 or named[0][1] == named[1][1]:
        return [], False
    (pa, a), (pb, b) = named[0], named[1]
    words = [m for m in VERDICT_PROSE.finditer(flat, pa, pb)
             if not NEGATION.search(flat[max(lo, m.start() - 20):m.start()])]
    if len(words) != 1:
        return [], False
    said = verdict_class(words[0].group(1))
    pair = [(p, v) for x, y, p, v in verdicts if (x, y) == (a, b)]
    pair += [(p, {"faster": "slower", "slower": "faster"}.get(v, v)) for x, y, p, v in verdicts if (x, y) == (b, a)]
    if not pair:
        return [], False
    named_shapes = shapes_in(flat[lo:hi])
    at_point = [(p, v) for p, v in pair if shapes_in(p) & named_shapes]
    pool = at_point or pair
    if any(v == said for _, v in pool):
        return [], True
    got = ", ".join(sorted({v + (f" at {p.strip(' -:')}" if p.strip(' -:') else "") for p, v in pool}))
    return [(f"{label}:{line_of[words[0].start()]}", f"the prose says `{a}` is {said} against `{b}`; "
             f"the blocks say {got}")], True


# The checker on pages with known answers.
TABLE = """<!-- kstudy:results lab2 archives=data/h200-2026-12-01-s9/lab.h5 -->

| | variant | GB/s at 65,536×4096: median (IQR) |
| --- | --- | --- |
| rung 1 | `softmax_a` | 1,205.8 (1,200–1,210) |
| rung 2 | `softmax_b@cuda` | 3,586 (3,565–3,592; 0.613× [0.60–0.62]) |

| shape | best rung | vendor | best rung vs vendor |
| --- | --- | --- | --- |
| 65,536×4096 | `softmax_b` 3,586 | `softmax_v` 3,484 | beats (1.029×, 1.022–1.041; p_Holm = 0.0024) |
| 65,536×128 | `softmax_b` 2,087 | `softmax_v` 1,608 | tie (1.30×, 0.97–1.48; p_Holm = 0.2) |

<!-- kstudy:end -->
"""


def page(prose, more=""):
    return f"# T\n\n## S\n\n{TABLE}\n{prose}\n\n{more}"


def problems_of(prose, more=""):
    return check_page(page(prose, more), "page.md", REPO)[0]


check(problems_of("Rung 2 reaches 3,586 GB/s, 0.61× and 3.59 TB/s; rung 1 about 1,200 GB/s.") == [],
      "numbers of the block at the prose's precision, TB/s against GB/s, about")
check(problems_of("The ratio spans 0.60–0.62× (interval), the 95% interval.") == [], "a range and an interval level")
got = problems_of("Rung 2 reaches 3,587 GB/s.")
check(len(got) == 1 and "3,587 GB/s is not in its section's blocks" in got[0][1], f"a drifted number fails ({got})")
got = problems_of("The ranges are 0.60–0.64×.")
check(len(got) == 1 and "0.64×" in got[0][1], f"a range's far end is checked ({got})")
got = problems_of("The two rungs take 1,206 and 1,300 µs.")
check(len(got) == 1 and "1,300 µs" in got[0][1], f"a list's first member takes the unit, the second is checked ({got})")
check(problems_of("It takes 2.5 ms <!-- prose: quoted issue 43 -->, 16 × 4,096 rows, sm_90, `x_1.5×`.") == [],
      "a quoted number, a shape, a name and a code span")
check(problems_of("It stays within 1% of the roof, under 3×, below 1.02×.") == [], "bounds are not measurements")
got = problems_of("It stays within 7–9% of the roof.")
check(len(got) == 2, f"a range after a bound is checked ({got})")
got = problems_of("`softmax_a` runs at 3,586 GB/s.")
check(len(got) == 1 and "in no row of `softmax_a`" in got[0][1], f"rule b: the number of another rung's row ({got})")
check(problems_of("`softmax_b` runs at 3,586 GB/s against 1,206 GB/s.") == [],
      "rule b: the number after 'against' answers to rule a only")
check(problems_of("`softmax_b@cuda` reaches 0.61×.") == [], "rule b: name@backend")
got = problems_of("Rung 2 gains 2.4% <!-- prose: derived 1 − 0.976× -->, predicted 7%"
                  " <!-- prose: predicted note 47 -->.")
check(got == [], f"derived and predicted markers ({got})")
got = problems_of("Rung 2 gains 2.4% <!-- prose: predicted note 47 -->.")
check(len(got) == 1 and "names no prediction" in got[0][1], f"a predicted marker needs a prediction ({got})")
got = problems_of("Rung 2 gains 2.4%.", "Nothing here <!-- prose: derived -->.")
check(len(got) == 2 and any("covers no unit-bearing number" in g[1] for g in got), f"a stale marker fails ({got})")
got = problems_of("It took 9.9 ms <!-- prose: from data/no-such-file.h5 -->.")
check(len(got) == 1 and "no such file" in got[0][1], f"a marker naming a missing file fails ({got})")
got = problems_of("It took 1.21× <!-- prose: from data/h200-2026-12-01-s9/lab.h5 -->.")
check(len(got) == 1 and "not in the blocks of data/h200-2026-12-01-s9/lab.h5" in got[0][1],
      f"a from-block marker is checked ({got})")
got = problems_of("It took 1.21× <!-- prose: guessed -->.")
check(len(got) == 1 and "unknown marker kind" in got[0][1], f"an unknown marker kind ({got})")
check(problems_of("At 65,536×4096 `softmax_b` is faster than `softmax_v`.") == [], "rule c: a verdict that agrees")
got = problems_of("At 65,536×4096 `softmax_b` is slower than `softmax_v`.")
check(len(got) == 1 and "is slower against `softmax_v`" in got[0][1], f"rule c: a verdict that disagrees ({got})")
got = problems_of("At 65,536×128 `softmax_b` beats `softmax_v`.")
check(len(got) == 1 and "level at 65,536×128" in got[0][1], f"rule c: at the point the sentence names ({got})")
check(problems_of("`softmax_v` is not faster than `softmax_b` at 65,536×128.") == [], "rule c: a negation")
check(problems_of("`softmax_v` loses to `softmax_b`.") == [], "rule c: the pair named the other way round")
got = check_page("# T\n\nIt takes 3 ms.\n\n## S\n\n" + TABLE, "page.md", REPO)[0]
check(len(got) == 1 and "no block" in got[0][1], f"the title's prose does not reach a section's blocks ({got})")
got = check_page("# T\n\n## S\n\n" + TABLE + "\n### Sub\n\nIt reaches 3,586 GB/s.\n\n## U\n\nIt reaches 3,586 GB/s.\n",
                 "page.md", REPO)[0]
check(len(got) == 1 and "its section has no block" in got[0][1],
      f"a ### heading without blocks takes its parent's, a ## one none ({got})")
got = problems_of("Rung 2 reaches 3,587 GB/s; it took 9.9 ms <!-- prose: quoted issue 43 -->.")
check(len(got) == 1 and "3,587 GB/s" in got[0][1], f"a marker covers its clause only ({got})")
got = problems_of("It took 9.9 ms (9.8 ms <!-- prose: quoted issue 43 -->).")
check(len(got) == 1 and "9.9 ms" in got[0][1], f"a marker covers back to the parenthesis only ({got})")
got = problems_of("It took 9.9 ms `<!-- prose: derived -->`.")
check(len(got) == 1 and "9.9 ms" in got[0][1], f"a marker in a code span is not a marker ({got})")
check(problems_of("It took 9.9 ms <!-- prose: archive data/h200-2026-12-01-s9/lab2.h5 its medians -->.") == [],
      "an archive marker names an archive that exists")
got = problems_of("It took 9.9 ms <!-- prose: from data/h200-2026-12-01-s9/lab2.h5 -->.")
check(len(got) == 1 and "no block of the page renders" in got[0][1], f"`from` an archive no block renders ({got})")
check(problems_of("Before the fix it ran 1.6× <!-- prose: from docs/performance_notes.md --> slower.") == [],
      "`from` a text file: the number is in it (1.6x read as 1.6×)")
got = problems_of("It ran 77.77× <!-- prose: from docs/performance_notes.md --> slower.")
check(len(got) == 1 and "docs/performance_notes.md" in got[0][1], f"`from` a text file that lacks the number ({got})")
check(problems_of("Predicted: 2–4% <!-- prose: predicted docs/performance_notes.md (note 53) -->.") == [],
      "a prediction written down in a file is checked there")
check(problems_of("Rung 2 at 0.61× and rung 7 and 0.62×, then 0.62× at 8,192 and 0.60×, 1,048,576 × 16 and 0.61×.")
      == [], "no unit carried back to a name, a point or a shape's factor")
got = problems_of("(At 3,586 GB/s: `softmax_a` is slow), and 1,205.8 GB/s against 3,586 GB/s.")
check(got == [], f"rule b: a rung inside a closed parenthesis names nothing after it ({got})")
got = problems_of("The lean rung is 0.613× and 0.61× <!-- prose: from data/h200-2026-12-01-s9/lab.h5 -->.")
check(got == [], f"`from` a block of the page checks against it ({got})")

total = judged = marked = 0
for name in PAGES:
    path = REPO / name
    found, count, verdicts, exempt = check_page(path.read_text(), name, REPO)
    total, judged, marked = total + count, judged + verdicts, marked + exempt
    for where, what in found:
        check(False, f"{where}: {what}")
    check(not found, f"{name}: {count} prose number(s), {count - exempt} of them checked against the blocks or a "
          f"cited file, and {verdicts} verdict sentence(s): {len(found)} problem(s)")
print(f"{total} prose numbers in {', '.join(PAGES)}: {total - marked} checked against the blocks or a cited file, "
      f"{marked} under an archive, derived, quoted or predicted marker; {judged} verdict sentence(s) checked")

cases.finish("check_results_prose.py: every case passed")
