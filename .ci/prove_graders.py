"""Prove the graders are real: they fail the untouched exercises and the deliberately wrong kernels.

1. For every day, run its grader with COURSE_TARGET=exercise: every test that runs must fail
   (a test that passes on an untouched exercise cannot tell a right kernel from a stub).
2. For every tests/wrong/dayNN_*.py, run day NN's grader against it: at least one test must fail.
3. For every tests/right/dayNN_*.py (a correct kernel written another way, as edits to the solution),
   run day NN's grader against it: every test that runs must pass (a grader that pins the solution's
   exact instructions would reject it).

A wrong spec that only a GPU can reject (its kernel is CUDA C the simulator cannot run) says so with
a line ``GPU_ONLY = "<why>"``: without a GPU it is listed, not run; on a GPU it runs like the rest.
``--only dayNN`` proves the days (and specs) whose names start with that prefix.

Exit status 1 if either proof fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import course  # noqa: E402,F401
from course import days  # noqa: E402


def run_grader(test_path: Path, target: str, *extra: str) -> dict[str, str]:
    """Outcome per test id: passed / failed / skipped."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "report.xml"
        env = dict(os.environ, COURSE_TARGET=target)
        subprocess.run([sys.executable, "-m", "pytest", str(test_path), "-q", "-p", "no:cacheprovider",
                        f"--junitxml={xml}", "-o", "junit_family=xunit2", *extra], cwd=ROOT, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not xml.exists():
            return {}
        outcomes = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                outcomes[name] = "failed"
            elif case.find("skipped") is not None:
                outcomes[name] = "skipped"
            else:
                outcomes[name] = "passed"
        return outcomes


GPU_ONLY = re.compile(r"^GPU_ONLY\s*=", re.MULTILINE)


def main(argv: list[str]) -> int:
    bad = 0
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    graded = [info for info in days.all_days() if info.test_path.exists() and info.slug.startswith(only)]
    wrongs = sorted((ROOT / "tests" / "wrong").glob(f"{only or 'day[0-9][0-9]'}*.py"))
    rights = sorted((ROOT / "tests" / "right").glob(f"{only or 'day[0-9][0-9]'}*.py"))
    if not course.ON_GPU:
        for w in [w for w in wrongs if GPU_ONLY.search(w.read_text())]:
            print(f"gpu  {w.name}: rejected only on a GPU (proven there: .ci/prove_graders.py --only {w.name[:5]})")
            wrongs.remove(w)
    test_of = lambda spec: days.find(int(re.match(r"day(\d\d)_", spec.name).group(1))).test_path  # noqa: E731
    # Each grader run is its own pytest process: run as many at once as there are cores.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        exercise_runs = pool.map(lambda info: run_grader(info.test_path, "exercise"), graded)
        wrong_runs = pool.map(lambda w: run_grader(test_of(w), str(w), "-x"), wrongs)
        right_runs = pool.map(lambda r: run_grader(test_of(r), str(r)), rights)
        exercise_runs, wrong_runs, right_runs = list(exercise_runs), list(wrong_runs), list(right_runs)
    for info, outcomes in zip(graded, exercise_runs):
        ran = {k: v for k, v in outcomes.items() if v != "skipped"}
        passed = sorted(k for k, v in ran.items() if v == "passed")
        if not ran:
            print(f"FAIL day {info.number:02d}: its grader ran no test against the exercise")
            bad += 1
        elif passed:
            print(f"FAIL day {info.number:02d}: {len(passed)} of {len(ran)} tests pass on the untouched exercise:")
            for k in passed[:10]:
                print(f"       {k}")
            bad += 1
        else:
            print(f"ok   day {info.number:02d}: all {len(ran)} tests fail on the untouched exercise")
    for wrong, outcomes in zip(wrongs, wrong_runs):  # "-x" above: one rejection is enough
        mistake = next((ln.split("MISTAKE:", 1)[1].strip() for ln in wrong.read_text().splitlines()
                        if "MISTAKE:" in ln), "?")
        failed = sorted(k for k, v in outcomes.items() if v == "failed")
        if failed:
            print(f"ok   {wrong.name}: rejected by {len(failed)} test(s) ({mistake})")
        else:
            print(f"FAIL {wrong.name}: the day's grader accepts it ({mistake})")
            bad += 1
    for right, outcomes in zip(rights, right_runs):
        what = next((ln.split("RIGHT:", 1)[1].strip() for ln in right.read_text().splitlines()
                     if "RIGHT:" in ln), "?")
        ran = {k: v for k, v in outcomes.items() if v != "skipped"}
        failed = sorted(k for k, v in ran.items() if v == "failed")
        if not ran:
            print(f"FAIL {right.name}: the day's grader ran no test against it")
            bad += 1
        elif failed:
            print(f"FAIL {right.name}: {len(failed)} of {len(ran)} tests reject a correct kernel ({what}):")
            for k in failed[:10]:
                print(f"       {k}")
            bad += 1
        else:
            print(f"ok   {right.name}: all {len(ran)} tests pass ({what})")
    print("grader proof:", "passed" if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
