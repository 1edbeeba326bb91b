"""course.notebook: a notebook's TARGET switch runs the learner's kernels, and a stub shows its hint."""

import json

import pytest

import course
from course import days, notebook

nbformat = pytest.importorskip("nbformat", reason="executing notebooks needs nbformat and nbclient (requirements.txt)")
NotebookClient = pytest.importorskip("nbclient", reason="executing notebooks needs nbclient").NotebookClient


def _run(number, target):
    """Execute day ``number``'s notebook with its TARGET line set; the executed notebook."""
    info = days.find(number)
    nb = nbformat.read(info.notebook_path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert 'TARGET = "solution"' in first.source, "the first code cell offers the switch"
    first.source = first.source.replace('TARGET = "solution"', f"TARGET = {target!r}")
    NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(info.notebook_path.parent)}}).execute()
    return nb


def _errors(nb):
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]


def _text(nb):
    return "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_every_notebook_offers_the_switch_and_runs_the_kernels_through_it():
    for info in days.all_days():
        source = "\n".join(c.source for c in nbformat.read(info.notebook_path, as_version=4).cells
                           if c.cell_type == "code")
        assert 'TARGET = "solution"' in source and f"notebook.load({info.number}, TARGET)" in source, info.slug


def test_every_notebook_is_valid_nbformat_with_cell_ids():
    """nbformat 4.5 cells carry ids; nbformat only warns today that it will refuse a notebook without."""
    for info in days.all_days():
        raw = json.loads(info.notebook_path.read_text())
        missing = [i for i, c in enumerate(raw["cells"]) if "id" not in c]
        assert not missing, f"{info.notebook_path.name}: cells {missing[:5]} have no id (nbformat.validator.normalize)"
        nbformat.validate(nbformat.reads(json.dumps(raw), as_version=4))


def test_the_untouched_exercise_shows_the_hint_not_a_traceback():
    nb = _run(8, "exercise")
    errors = _errors(nb)
    assert errors, "the stub must stop the cell that runs it"
    first = errors[0]
    assert first.ename == "NotWritten"
    assert len(first.traceback) == 1 and first.traceback[0].startswith(f"NotWritten: {first.evalue}"), \
        first.traceback  # one line: no frames through course/
    assert "is not written yet: Day 08:" in first.evalue and "lines)" in first.evalue


def test_the_learners_own_file_runs_in_the_notebook(tmp_path):
    mine = tmp_path / "my_day08.py"
    # a learner who has written everything, in a file of their own
    mine.write_text(days.find(8).solution_path.read_text() + '\nprint("my day 08 file is loaded")\n')
    nb = _run(8, str(mine))
    assert not _errors(nb), _errors(nb)
    text = _text(nb)
    assert "my day 08 file is loaded" in text and text.count(": matches") >= 2, text


def test_load_checks_versions_before_launching(tmp_path):
    ex = notebook.load(1, "exercise")
    inputs = days.load_solution(1).make_inputs(5, seed=0)
    with pytest.raises(notebook.NotWritten, match="naive is not written yet: Day 01:"):
        ex.naive(*inputs)
    assert ex.__file__ == str(days.find(1).exercise_path)
    assert notebook.load(1) is days.load_solution(1)
    with pytest.raises(ValueError, match="TARGET must be"):
        notebook.load(1, "mine")


if course.ON_GPU:  # notebooks are executed by CI without a GPU; the GPU visit runs the kernels' own tests
    pytestmark = pytest.mark.sim


def test_a_stubbed_method_shows_its_hint_in_one_line_too():
    nb = _run(75, "exercise")  # day 75's allocator methods are Python stubs: NotImplementedError itself
    first = _errors(nb)[0]
    assert first.ename in ("NotImplementedError", "NotWritten")
    assert len(first.traceback) == 1 and "Day 75:" in first.traceback[0], first.traceback
