"""Write each day's exercise from its solution: the solution is the one source of a day.

The parts a learner writes are marked in the solution with comments; everything else (imports,
constants, docstrings, launch helpers, host functions) is given code, copied as it stands:

    @cuda.jit
    def add_naive_kernel(a, b, out):
        \"\"\"One thread per element: thread i writes out[i] = a[i] + b[i].\"\"\"
        # EXERCISE: find this thread's index with cuda.grid(1), guard i < out.size, write out[i]
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i]

``# EXERCISE: <hint>`` runs from the marker to the end of the block it sits in (usually the function
body), or to an ``# END EXERCISE`` line at the same indentation. In the exercise the region becomes

        raise NotImplementedError("Day 01: find this thread's index ... (3 lines)")

where the day's number and the line count (code lines, not blanks or comments) are filled in by this
module, so neither can drift from the solution. Lines that only the solution has and no learner
writes (a benchmark hook for a later day, say) sit between ``# SOLUTION ONLY`` and
``# END SOLUTION ONLY`` and are dropped. The exercise's docstring is the solution's, opened as
"Day NN exercise:" and closed with what to write and how to grade it.

    python -m course exercises            # write every days/dayNN_*/exercise.py
    python -m course exercises --check    # exit 1 naming each exercise that differs (CI runs it)
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from course import days

MARK = re.compile(r"^(?P<indent>[ \t]*)# EXERCISE:\s*(?P<hint>.+?)\s*$")
END = re.compile(r"^[ \t]*# END EXERCISE\s*$")
SOLUTION_ONLY = re.compile(r"^[ \t]*# SOLUTION ONLY\s*$")
END_SOLUTION_ONLY = re.compile(r"^[ \t]*# END SOLUTION ONLY\s*$")
LINE_LENGTH = 120  # pyproject's ruff line length: a long hint is split over several string pieces


class MarkerError(ValueError):
    """A marker that cannot be read: the message names the file and the line."""


@dataclass(frozen=True)
class Stub:
    """One region the learner writes."""

    where: str  # the enclosing function, e.g. "add_naive_kernel" or "BlockManager.allocate"
    hint: str  # the full message, "Day 01: ... (3 lines)"
    first: int  # 0-based line of the marker
    last: int  # 0-based last line replaced (inclusive; an END marker line is included)
    lines: int  # code lines the solution has there


def _code_lines(lines: list[str]) -> int:
    return sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#"))


def _enclosing(tree: ast.Module, line: int) -> tuple[list[str], list[ast.stmt]]:
    """For a marker on 1-based ``line``: the names of the defs around it, and the statements of the
    innermost block it sits in (a body, an else or finally branch; the marker is a comment, so it
    lies between that block's statements, never inside one)."""
    found: tuple[list[str], list[ast.stmt]] = ([], tree.body)

    def visit(node: ast.AST, path: list[str]) -> None:
        nonlocal found
        inside = node is tree or node.lineno < line <= node.end_lineno
        if not inside:
            return
        for field in ("body", "orelse", "finalbody", "handlers"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list) or not stmts:
                continue
            if field != "handlers" and not any(s.lineno <= line <= s.end_lineno for s in stmts) \
                    and any(s.lineno > line for s in stmts):
                found = (path, stmts)
            for s in stmts:
                named = isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                visit(s, path + [s.name] if named else path)

    visit(tree, [])
    return found


def find_stubs(source: str, number: int, name: str = "<solution>") -> list[Stub]:
    """Every ``# EXERCISE:`` region of a solution's source, in order."""
    lines = source.splitlines()
    tree = ast.parse(source)
    stubs = []
    for i, text in enumerate(lines):
        m = MARK.match(text)
        if not m:
            if END.match(text) and not any(s.last == i for s in stubs):
                raise MarkerError(f"{name}:{i + 1}: '# END EXERCISE' with no '# EXERCISE:' marker above it")
            continue
        indent, hint = m.group("indent"), m.group("hint")
        if re.search(r"\(\s*\d+\s+lines?\b", hint):
            raise MarkerError(f"{name}:{i + 1}: leave the line count out of the hint; the generator counts")
        if hint.startswith("Day "):
            raise MarkerError(f"{name}:{i + 1}: leave 'Day NN:' out of the hint; the generator adds it")
        where, block = _enclosing(tree, i + 1)
        after = [s for s in block if s.lineno > i + 1]
        if not after or after[0].col_offset != len(indent):
            raise MarkerError(f"{name}:{i + 1}: an '# EXERCISE:' marker must stand, at the same indentation, "
                              "just before the statements the learner writes")
        last = after[-1].end_lineno - 1  # 0-based
        for j in range(i + 1, min(len(lines), after[-1].end_lineno + 1)):  # an END may follow the block
            if END.match(lines[j]):
                if lines[j][: len(lines[j]) - len(lines[j].lstrip())] != indent:
                    raise MarkerError(f"{name}:{j + 1}: '# END EXERCISE' must have its marker's indentation")
                last = j
                break
            if MARK.match(lines[j]):
                raise MarkerError(f"{name}:{j + 1}: a marker inside the region of the one at line {i + 1}")
        body = [ln for ln in lines[i + 1: last + 1] if not END.match(ln)]
        count = _code_lines(body)
        if count == 0:
            raise MarkerError(f"{name}:{i + 1}: the marked region has no code")
        unit = "line" if count == 1 else "lines"
        stubs.append(Stub(".".join(where) or "<module>", f"Day {number:02d}: {hint} ({count} {unit})",
                          i, last, count))
    return stubs


def _raise_lines(indent: str, message: str) -> list[str]:
    """``raise NotImplementedError("...")``, split into string pieces that keep to LINE_LENGTH."""
    one = f"{indent}raise NotImplementedError({message!r})"
    if len(one) <= LINE_LENGTH and "'" not in message:
        return [f'{indent}raise NotImplementedError("{message}")'] if '"' not in message else [one]
    lead = f"{indent}raise NotImplementedError("
    pad = " " * len(lead)
    width = LINE_LENGTH - len(lead) - 3  # quotes and the closing parenthesis
    pieces, piece = [], ""
    for word in message.split(" "):  # each piece ends with its space, so the words stay whole
        if piece and len(piece) + len(word) > width:
            pieces.append(piece)
            piece = ""
        piece += word + " "
    pieces.append(piece[:-1])
    out = []
    for k, piece in enumerate(pieces):
        text = repr(piece) if '"' in piece else f'"{piece}"'
        out.append(f"{lead if k == 0 else pad}{text}{')' if k == len(pieces) - 1 else ''}")
    return out


def _docstring(tree: ast.Module, lines: list[str], number: int, stubs: list[Stub]) -> tuple[int, int, list[str]]:
    """(first line, last line, the exercise's docstring lines) in place of the solution's docstring."""
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        raise MarkerError("a solution opens with a module docstring ('Day NN: ...')")
    text = first.value.value.strip("\n")
    head = f"Day {number:02d}:"
    if not text.startswith(head):
        raise MarkerError(f"the solution's docstring must open with {head!r}")
    text = f"Day {number:02d} exercise:" + text[len(head):]
    width = max(len(s.where) for s in stubs)
    todo = ["", "What you write (each raises NotImplementedError with its hint until you do):"]
    for s in stubs:
        todo += textwrap.wrap(s.hint.split(": ", 1)[1], width=LINE_LENGTH - 4,
                              initial_indent=f"  {s.where.ljust(width)}  ", subsequent_indent=" " * (width + 4))
    todo += ["Everything else in this file is given. Grade with:  make check DAY=" + str(number)]
    body = text.splitlines() + todo
    out = ['"""' + body[0]] + body[1:] + ['"""']
    return first.lineno - 1, first.end_lineno - 1, out


def generate(source: str, number: int, name: str = "<solution>") -> str:
    """The exercise for a solution's source. Raises :class:`MarkerError` on a malformed marker."""
    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise MarkerError(f"{name}: {e}") from e
    stubs = find_stubs(source, number, name)
    if not stubs:
        raise MarkerError(f"{name}: no '# EXERCISE:' marker: nothing for the learner to write")
    doc_first, doc_last, doc = _docstring(tree, lines, number, stubs)
    out: list[str] = []
    drop = False
    i = 0
    by_first = {s.first: s for s in stubs}
    while i < len(lines):
        text = lines[i]
        if i == doc_first:
            out.extend(doc)
            i = doc_last + 1
            continue
        if SOLUTION_ONLY.match(text):
            if drop:
                raise MarkerError(f"{name}:{i + 1}: '# SOLUTION ONLY' inside another")
            drop = True
        elif END_SOLUTION_ONLY.match(text):
            if not drop:
                raise MarkerError(f"{name}:{i + 1}: '# END SOLUTION ONLY' with no '# SOLUTION ONLY' above it")
            drop = False
        elif drop:
            pass
        elif i in by_first:
            stub = by_first[i]
            indent = MARK.match(text).group("indent")
            out.extend(_raise_lines(indent, stub.hint))
            i = stub.last + 1
            continue
        else:
            out.append(text)
        i += 1
    if drop:
        raise MarkerError(f"{name}: '# SOLUTION ONLY' is never closed")
    # a dropped region leaves its blank lines behind: no more than two in a row, none at the end
    cleaned: list[str] = []
    for text in out:
        if not text.strip() and len(cleaned) >= 2 and not cleaned[-1].strip() and not cleaned[-2].strip():
            continue
        cleaned.append(text)
    while cleaned and not cleaned[-1].strip():
        cleaned.pop()
    return "\n".join(cleaned) + "\n"


def expected(info: days.DayInfo) -> str:
    return generate(info.solution_path.read_text(), info.number, info.solution_path.name)


def _selected(which) -> list[days.DayInfo]:
    return [days.find(d) for d in which] if which else days.all_days()


def write(which=()) -> list[Path]:
    """Write the exercises of the given days (all by default); the paths that changed."""
    changed = []
    for info in _selected(which):
        text = expected(info)
        path = info.exercise_path
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            changed.append(path)
    return changed


def drift(solution: Path, exercise: Path, number: int) -> str | None:
    """Why ``exercise`` is not what ``solution``'s markers make, or None when it is."""
    try:
        text = generate(solution.read_text(), number, solution.name)
    except MarkerError as e:
        return f"cannot generate: {e}"
    if not exercise.exists():
        return "missing"
    have, want = exercise.read_text().splitlines(), text.splitlines()
    if have == want and exercise.read_text() == text:
        return None
    line = next((k for k, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
    return f"differs from its solution's markers from line {line + 1}"


def check(which=()) -> list[str]:
    """One line per exercise that differs from what :func:`write` would write (empty: all agree)."""
    problems = []
    for info in _selected(which):
        why = drift(info.solution_path, info.exercise_path, info.number)
        if why:
            problems.append(f"{info.exercise_path.relative_to(days.ROOT)}: {why}")
    return problems
