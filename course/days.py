"""Find the days and load their code: the reference solution or the learner's exercise.

A day is named by its slug ``dayNN_topic``; the same slug names its folder in days/, its lesson,
solution, notebook and test. ``COURSE_TARGET=exercise|solution`` picks what tests and notebooks
grade (``make test`` grades solutions, ``make check`` the learner's exercise). Tests always take
``reference`` and ``make_inputs`` from the solution.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import importlib.util
import linecache
import os
import re
import sys
import tempfile
import types
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SLUG = re.compile(r"^day(\d{2})_[a-z0-9_]+$")
TARGETS = ("solution", "exercise")


class UnknownDay(LookupError):
    """No such day; the message lists the days that exist."""


@dataclass(frozen=True)
class DayInfo:
    number: int
    slug: str
    title: str
    memory_space: str

    @property
    def solution_path(self) -> Path:
        return ROOT / "solutions" / f"{self.slug}.py"

    @property
    def exercise_path(self) -> Path:
        return ROOT / "days" / self.slug / "exercise.py"

    @property
    def test_path(self) -> Path:
        return ROOT / "tests" / f"test_{self.slug}.py"

    @property
    def notebook_path(self) -> Path:
        return ROOT / "notebooks" / f"{self.slug}.ipynb"

    @property
    def lesson_path(self) -> Path:
        return ROOT / "lessons" / f"{self.slug}.md"

    @property
    def complete(self) -> bool:
        paths = (self.solution_path, self.exercise_path, self.test_path, self.notebook_path,
                 self.lesson_path, self.exercise_path.parent / "README.md")
        return all(p.exists() for p in paths)


_CONSTANTS: dict[Path, tuple[tuple[int, int], dict]] = {}  # path -> ((mtime_ns, size), constants)


def constants(path: Path) -> dict[str, object]:
    """Module-level string constants of a file, read without importing it (no numba, no GPU).

    Remembered per file until it changes (its mtime or size): every grader's import lists all the days
    (``all_days``), and parsing 90 solutions each time cost a test run a minute of collection."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return {}
    key = (st.st_mtime_ns, st.st_size)
    hit = _CONSTANTS.get(path)
    if hit is None or hit[0] != key:
        hit = _CONSTANTS[path] = (key, _parse_constants(path))
    return dict(hit[1])


def _parse_constants(path: Path) -> dict[str, object]:
    found = {}
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError):
        return found
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return found


def solution_closure(*paths: Path) -> list[Path]:
    """``paths`` and every solutions/ module they name (an import, a docstring: ``dayNN_topic``,
    ``attention_common``), transitively, sorted: what a compile of, or a proof over, those files reads
    of the course's solutions."""
    names = sorted(p.stem for p in (ROOT / "solutions").glob("*.py") if not p.stem.startswith("_"))
    ref = re.compile(r"\b(" + "|".join(names) + r")\b")
    seen: set[Path] = set()
    todo = [Path(p) for p in paths]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.add(path)
        todo.extend(ROOT / "solutions" / f"{name}.py" for name in ref.findall(path.read_text()))
    return sorted(seen)


def all_days() -> list[DayInfo]:
    """Every day with a solution, in order."""
    days = []
    for path in sorted((ROOT / "solutions").glob("day[0-9][0-9]_*.py")):
        m = SLUG.match(path.stem)
        if not m:
            continue
        consts = constants(path)
        days.append(DayInfo(int(m.group(1)), path.stem, str(consts.get("TITLE", path.stem)),
                            str(consts.get("MEMORY_SPACE", "?"))))
    return days


def find(day: int | str) -> DayInfo:
    """A day by number (6, "6", "06") or slug ("day06_conv1d"); :class:`UnknownDay` otherwise."""
    days = all_days()
    key = str(day).strip()
    for d in days:
        if key == d.slug or (key.isdigit() and int(key) == d.number):
            return d
    existing = ", ".join(str(d.number) for d in days) or "none yet"
    what = f"day {key}" if key.isdigit() else repr(key)
    raise UnknownDay(f"no {what}: days that exist: {existing}")


def load_solution(day: int | str) -> ModuleType:
    info = find(day)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module(f"solutions.{info.slug}")


def load_exercise(day: int | str) -> ModuleType:
    info = find(day)
    return _load_file(f"exercise_{info.slug}", info.exercise_path)


def target() -> str:
    """``solution``, ``exercise``, or the path of a module to grade instead (tests/wrong/ uses that)."""
    value = os.environ.get("COURSE_TARGET", "solution").strip()
    if value.lower() in TARGETS:
        return value.lower()
    if value.endswith(".py") and Path(value).exists():
        return value
    raise ValueError(f"COURSE_TARGET must be one of {TARGETS} or a .py file, got {value!r}")


def _load_file(name: str, path: Path) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def materialise_mistake(spec_path: Path) -> Path:
    """Write the solution with a tests/wrong/ spec's EDITS applied; return the new file's path.

    A spec names its ``SOLUTION`` slug and lists ``EDITS``: (text in the solution, what the mistake
    puts there). Each text must occur exactly once, so a spec that no longer fits its solution fails
    loudly instead of grading something else.
    """
    spec: dict = {}
    exec(compile(spec_path.read_text(), str(spec_path), "exec"), spec)
    source = (ROOT / "solutions" / f"{spec['SOLUTION']}.py").read_text()
    for old, new in spec["EDITS"]:
        if source.count(old) != 1:
            raise ValueError(f"{spec_path.name}: an edit matches {source.count(old)} places in "
                             f"{spec['SOLUTION']}.py (must be exactly 1): {old[:80]!r}")
        source = source.replace(old, new)
    return _write_source("course_mistakes", spec_path.name, source)


def _write_source(folder: str, name: str, source: str) -> Path:
    """``source`` as a file in a temp folder (rewritten only when it changed), for loading as a module."""
    out_dir = Path(tempfile.gettempdir()) / folder
    out_dir.mkdir(exist_ok=True)
    out = out_dir / name
    if not out.exists() or out.read_text() != source:
        out.write_text(source)
    return out


def with_constants(day: int | str, **values) -> ModuleType:
    """The day's solution with some module-level constants changed: ``with_constants(10, Z_CHUNK=32)``.

    Numba compiles a kernel's globals as constants, so a block shape or an unroll depth cannot be
    changed on a loaded module: each assignment ``NAME = ...`` at the start of a line is rewritten
    (it must occur exactly once) and the result loaded as a module of its own, with fresh kernels.
    For sweeping a day's knobs (tools/sweep.py); constants computed from the changed ones follow.
    """
    info = find(day)
    source = info.solution_path.read_text()
    for name, value in values.items():
        pattern = re.compile(rf"^{re.escape(name)} = .*$", re.M)
        found = pattern.findall(source)
        if len(found) != 1:
            raise ValueError(f"{info.slug}: {len(found)} module-level assignments of {name} (must be exactly 1)")
        line = f"{name} = {value!r}  # changed by with_constants"
        source = pattern.sub(lambda _m, line=line: line, source)
    tag = "_".join(f"{k}{v}" for k, v in values.items())
    tag = re.sub(r"[^A-Za-z0-9_]", "_", tag)
    out = _write_source("course_variants", f"{info.slug}__{tag}.py", source)
    return _load_file(f"variant_{out.stem}", out)


def with_globals(kernel, **replacements):
    """The same kernel compiled again with some of the globals it reads replaced: another device
    function or constant in place of its own (``with_globals(day46.kernel, tile_coords=grouped)``).

    The kernel's Python source is unchanged and not copied; only the names it looks up differ, so a
    day can ask "what if the blocks took their tiles in another order" without a second kernel."""
    from course import cuda

    py = getattr(kernel, "py_func", kernel)
    missing = [name for name in replacements if name not in py.__code__.co_names]
    if missing:
        raise ValueError(f"{py.__name__} reads no global named {', '.join(missing)}")
    scope = dict(py.__globals__, **replacements)
    fn = types.FunctionType(py.__code__, scope, py.__name__, py.__defaults__, py.__closure__)
    fn.__doc__, fn.__qualname__, fn.__module__ = py.__doc__, py.__qualname__, py.__module__
    return cuda.jit(fn, fastmath=bool(getattr(kernel, "targetoptions", {}).get("fastmath")))


def derive_kernel(kernel, edits, **closure):
    """A Numba kernel derived from another's Python source: each (old, new) edit applied, old occurring
    exactly once (ValueError otherwise), compiled in the original's globals with ``closure``'s names
    (device functions) as its free variables. Like course.days.with_globals, the original is not
    copied into the day's file: only the edited text is written there. The derived source is registered in
    linecache, so inspect (and course.days.stub_hint, which finds a stub device function among the
    free variables) can read it."""
    from course import cuda

    py = getattr(kernel, "py_func", kernel)
    lines = textwrap.dedent(inspect.getsource(py)).splitlines(keepends=True)
    while not lines[0].startswith("def "):  # the decorator: the derived function is jitted below
        lines.pop(0)
    source = "".join(lines)
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"derive_kernel: {old.strip()[:60]!r} occurs {source.count(old)} times in "
                             f"{py.__name__}'s source, expected once")
        source = source.replace(old, new)
    name = source.split("(", 1)[0][len("def "):]
    names = ", ".join(closure)
    factory = f"def _factory({names}):\n{textwrap.indent(source, '    ')}    return {name}\n"
    filename = f"<{name}: derived from {py.__module__}.{py.__name__}>"
    linecache.cache[filename] = (len(factory), None, factory.splitlines(keepends=True), filename)
    scope = dict(py.__globals__)
    exec(compile(factory, filename, "exec"), scope)
    fn = scope["_factory"](**closure)
    # the original's fastmath (ex2.approx for exp2, as the CUDA C uses) carries over, as in with_globals
    return cuda.jit(fn, fastmath=bool(getattr(kernel, "targetoptions", {}).get("fastmath")))


def load_target(day: int | str) -> ModuleType:
    """The module under test: the solution, the learner's exercise, or a file (COURSE_TARGET): a
    module, or a tests/wrong/ spec (the solution with one classic mistake, see materialise_mistake)."""
    which = target()
    if which == "exercise":
        return load_exercise(day)
    if which == "solution":
        return load_solution(day)
    path = Path(which).resolve()
    if "EDITS" in path.read_text():
        path = materialise_mistake(path)
    return _load_file(f"target_{path.stem}", path)


def versions(module: ModuleType) -> tuple[str, ...]:
    """The host functions a day times and grades, in order (naive first)."""
    return tuple(getattr(module, "VERSIONS", ("naive", "optimized")))


def sim_versions(module: ModuleType) -> tuple[str, ...]:
    """The versions the simulator can run: ``SIM_VERSIONS`` where a day has GPU-only ones (a CuPy
    RawKernel in CUDA C, managed memory), else every version."""
    return tuple(getattr(module, "SIM_VERSIONS", versions(module)))


# ---- stubs: what the learner has not written yet ------------------------------------------------------

def stub_hint(func, _seen=None) -> str | None:
    """The NotImplementedError hint if ``func`` (a kernel or host function) is still a stub, or calls
    one: a device function in its closure (day 07 hands a stub tap reader to day 06's window_kernel)
    or one of its own module's device functions that it names (day 31's pipelined kernel leaves its
    loop given and the step it calls to the learner) is checked the same way."""
    py_func = getattr(func, "py_func", func)
    seen = _seen if _seen is not None else set()
    if id(py_func) in seen:
        return None
    seen.add(id(py_func))
    try:
        source = inspect.getsource(py_func)
    except (OSError, TypeError):
        return None
    if "raise NotImplementedError" in source:
        return _raised_hint(source)
    inner = [cell.cell_contents for cell in getattr(py_func, "__closure__", None) or ()]
    module = getattr(py_func, "__module__", None)
    names = getattr(getattr(py_func, "__code__", None), "co_names", ())
    glob = getattr(py_func, "__globals__", {})
    inner += [glob[n] for n in names if n in glob and hasattr(glob[n], "py_func")
              and getattr(glob[n].py_func, "__module__", None) == module]
    for f in inner:
        if f is not func and hasattr(f, "py_func"):
            hint = stub_hint(f, seen)
            if hint:
                return hint
    return None


def _raised_hint(source: str) -> str | None:
    """The message of the first ``raise NotImplementedError("...")`` in a function's source, whole
    (a hint may hold parentheses and run over several string pieces)."""
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return "not written yet"
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and getattr(node.exc.func, "id", None) == "NotImplementedError":
            args = node.exc.args
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                return " ".join(args[0].value.split())
            return "not written yet"
    return None


def unwritten(module: ModuleType, version: str) -> str | None:
    """"<label> is not written yet: <hint>" while the host function of ``version`` or one of its
    kernels (``KERNELS`` labels ``version`` and ``version.*``) is still a stub; None once written."""
    fn = getattr(module, version, None)
    kernels = getattr(module, "KERNELS", {})
    # a list, not a dict: a KERNELS label may equal the version's name, and the host function must
    # still be checked (a stubbed host function around a given kernel)
    parts = [(version, fn), *((k, v[0]) for k, v in kernels.items() if k == version or k.startswith(version + "."))]
    for label, func in parts:
        hint = stub_hint(func) if func is not None else None
        if hint:
            return f"{label} is not written yet: {hint}"
    return None
