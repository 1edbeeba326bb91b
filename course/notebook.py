"""Notebooks: run your own kernels or the solution's, with one switch in the first cell.

    TARGET = "solution"            # or "exercise": your days/dayNN_*/exercise.py
    mine = notebook.load(8, TARGET)
    out = mine.optimized(x, mask)  # yours, or a short "not written yet: <hint>" while it is a stub

``sol = days.load_solution(N)`` stays the source of inputs and references; what the learner writes
(the versions, the marked functions and classes) is taken from ``mine``. With the exercise, a
version whose host function or kernels are still stubs raises :class:`NotWritten` before anything is
launched (on a GPU a stub kernel would not raise, it would return garbage), and in Jupyter a
NotImplementedError shows as its hint alone, without a traceback.
"""

from __future__ import annotations

import functools
from pathlib import Path
from types import ModuleType

from course import days


class NotWritten(NotImplementedError):
    """A version of the exercise that is still a stub; the message is its hint."""


def _short_not_implemented(shell, etype, value, tb, tb_offset=None):
    """Jupyter's view of a stub: its hint in one line, no frames (the cell still fails)."""
    line = f"{etype.__name__}: {value}  (write it in your exercise.py, or set TARGET = \"solution\")"
    value._render_traceback_ = lambda: [line]  # showtraceback prints this in place of the frames
    shell.showtraceback((etype, value, tb))
    return []


def _quiet_stubs_in_jupyter() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.set_custom_exc((NotImplementedError,), _short_not_implemented)


def _checked(module: ModuleType, version: str, fn):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        missing = days.unwritten(module, version)
        if missing:
            raise NotWritten(missing)
        return fn(*args, **kwargs)

    return run


def load(day: int | str, target: str = "solution") -> ModuleType:
    """The module whose kernels a notebook runs: the solution, the learner's exercise, or a .py file.

    With anything but the solution, each version (``VERSIONS``) is checked before it runs and raises
    :class:`NotWritten` with its hint while it is a stub. The module keeps its ``__file__``, so
    ``course.compiler.reports(mine)`` reports on the learner's own kernels.
    """
    which = str(target).strip()
    if which.lower() == "solution":
        return days.load_solution(day)
    if which.lower() == "exercise":
        module = days.load_exercise(day)
    elif which.endswith(".py") and Path(which).exists():
        module = days._load_file(f"notebook_{Path(which).stem}", Path(which))
    else:
        raise ValueError(f"TARGET must be 'solution', 'exercise' or the path of a .py file, got {target!r}")
    view = ModuleType(module.__name__, module.__doc__)
    view.__dict__.update(module.__dict__)
    for version in days.versions(days.load_solution(day)):
        if callable(getattr(module, version, None)):
            setattr(view, version, _checked(module, version, getattr(module, version)))
    _quiet_stubs_in_jupyter()
    return view
