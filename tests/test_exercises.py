"""course.exercises: the exercise is generated from the solution's markers, and drift is caught."""

import textwrap

import pytest

from course import days, exercises
from course.grading import stub_hint

SOLUTION = textwrap.dedent('''\
    """Day 07: a toy -- out[i] = 2 * x[i].

    v1 naive  one thread per element.
    """

    import numpy as np

    from course import cuda

    THREADS = 256


    @cuda.jit
    def twice_kernel(x, out):
        """Thread i writes out[i] = 2 * x[i]."""
        i = cuda.grid(1)
        # EXERCISE: guard i < out.size (f(x) needs no parentheses), write out[i]
        if i < out.size:
            # doubling is one FMA-free multiply
            out[i] = 2 * x[i]


    def host(x):
        # EXERCISE: allocate, launch, return
        out = np.empty_like(x)
        twice_kernel[1, THREADS](x, out)
        return out
        # END EXERCISE


    # SOLUTION ONLY
    def helper_for_day_08():
        return 8
    # END SOLUTION ONLY


    def given():
        return 1
    ''')


def test_marked_bodies_become_stubs_with_day_and_counted_lines():
    text = exercises.generate(SOLUTION, 7)
    assert text.startswith('"""Day 07 exercise: a toy')
    assert "twice_kernel  guard i < out.size (f(x) needs no parentheses), write out[i] (2 lines)" in text
    assert 'raise NotImplementedError("Day 07: guard i < out.size (f(x) needs no parentheses), write out[i] ' \
           '(2 lines)")' in text
    assert 'raise NotImplementedError("Day 07: allocate, launch, return (3 lines)")' in text
    assert "i = cuda.grid(1)" in text  # given code before the marker stays
    assert "        out[i] = 2 * x[i]" not in text and "END EXERCISE" not in text
    assert "helper_for_day_08" not in text and "SOLUTION ONLY" not in text
    assert "def given():\n    return 1\n" in text
    compile(text, "exercise.py", "exec")


def _load(text, tmp_path):
    """The generated exercise as a module (no kernels compiled: the decorator is dropped)."""
    import importlib.util

    path = tmp_path / "toy_exercise.py"
    path.write_text(text.replace("from course import cuda", "cuda = None").replace("@cuda.jit\n", ""))
    spec = importlib.util.spec_from_file_location("toy_exercise", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hint_is_read_whole_from_a_stub(tmp_path):
    module = _load(exercises.generate(SOLUTION, 7), tmp_path)
    assert stub_hint(module.given) is None
    assert stub_hint(module.twice_kernel) == \
        "Day 07: guard i < out.size (f(x) needs no parentheses), write out[i] (2 lines)"


def test_a_long_hint_is_split_into_string_pieces_within_the_line_length(tmp_path):
    long = SOLUTION.replace("allocate, launch, return", "allocate " + "and launch " * 20 + "and return")
    text = exercises.generate(long, 7)
    assert max(len(line) for line in text.splitlines()) <= exercises.LINE_LENGTH
    module = _load(text, tmp_path)
    with pytest.raises(NotImplementedError, match="and launch and return \\(3 lines\\)$"):
        module.host(None)
    assert stub_hint(module.host).endswith("and launch and return (3 lines)")


@pytest.mark.parametrize("edit, message", [
    (("# EXERCISE: allocate, launch, return", "# EXERCISE: allocate, launch, return (3 lines)"), "line count"),
    (("# EXERCISE: allocate, launch, return", "# EXERCISE: Day 07: allocate"), "Day NN"),
    (("# END SOLUTION ONLY\n", ""), "never closed"),
    (('"""Day 07: a toy', '"""A toy'), "must open with"),
    (("    # EXERCISE: guard", "        # EXERCISE: guard"), "same indentation"),
    (("    # EXERCISE: allocate, launch, return\n", ""), "END EXERCISE' with no"),
])
def test_malformed_markers_are_named(edit, message):
    with pytest.raises(exercises.MarkerError, match=message):
        exercises.generate(SOLUTION.replace(*edit), 7)


def test_check_catches_a_changed_solution(tmp_path):
    solution, exercise = tmp_path / "solution.py", tmp_path / "exercise.py"
    solution.write_text(SOLUTION)
    exercise.write_text(exercises.generate(SOLUTION, 7))
    assert exercises.drift(solution, exercise, 7) is None
    for old, new in [
        ("    return out\n", "    out += 0\n    return out\n"),  # a marked body grows: its count changes
        ("THREADS = 256", "THREADS = 128"),  # given code
        ("write out[i]", "store out[i]"),  # a hint
    ]:
        solution.write_text(SOLUTION.replace(old, new))
        assert "differs" in exercises.drift(solution, exercise, 7)
    exercise.unlink()
    assert exercises.drift(solution, exercise, 7) == "missing"


def test_every_committed_exercise_is_generated_from_its_solution():
    assert exercises.check() == []


def test_no_exercise_imports_its_own_solution():
    import ast

    for info in days.all_days():
        tree = ast.parse(info.exercise_path.read_text())
        imported = {getattr(node, "module", None) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
        assert f"solutions.{info.slug}" not in imported, f"{info.slug}'s exercise imports its own solution"
