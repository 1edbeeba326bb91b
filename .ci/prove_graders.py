"""Prove the graders are real: they fail the untouched exercises and the deliberately wrong kernels.

1. For each day, run its grader with COURSE_TARGET=exercise: every test that runs must fail
   (a test that passes on an untouched exercise cannot tell a right kernel from a stub).
2. For every tests/wrong/dayNN_*.py, run day NN's grader against it: at least one test must fail.
3. For every tests/right/dayNN_*.py (a correct kernel written another way, as edits to the solution),
   run day NN's grader against it: every test that runs must pass (a grader that pins the solution's
   exact instructions would reject it).

A wrong spec that only a GPU can reject (its kernel is CUDA C the simulator cannot run) says so with
a line ``GPU_ONLY = "<why>"``: without a GPU it is listed, not run; on a GPU it runs like the rest.
``--only dayNN`` proves the days (and specs) whose names start with that prefix.

Which days run. The three steps run for a day when its files have changed since its proof last passed,
and for the ROTATION days whose proofs are the oldest: `.ci/proven.json` holds, per day, the digest of
the files its proof depends on (its solution and every solution the files name, its exercise, its
grader, its wrong and right specs) and when that proof passed. A day whose digest differs, or that has
no entry, runs; the oldest ROTATION others run too, so a change in `course/` (which no digest holds)
reaches every day within ceil(90 / ROTATION) recorded proofs. ``--all`` runs every day (what a GPU
run does with ``--only``); ``--record`` writes the digest and the time of every day whose proof passed
in this run into `.ci/proven.json` (run it before committing: CI itself records nothing).

Exit status 1 if either proof fails.
"""

from __future__ import annotations

import datetime
import hashlib
import json
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


def run_grader_files(test_paths: list[Path], target: str, *extra: str) -> dict[str, str]:
    """Outcome per test id (module classname::name): passed / failed / skipped."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "report.xml"
        env = dict(os.environ, COURSE_TARGET=target)
        subprocess.run([sys.executable, "-m", "pytest", *map(str, test_paths), "-q", "-p", "no:cacheprovider",
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


def run_grader(test_path: Path, target: str, *extra: str) -> dict[str, str]:
    return run_grader_files([test_path], target, *extra)


GPU_ONLY = re.compile(r"^GPU_ONLY\s*=", re.MULTILINE)
PROVEN = ROOT / ".ci" / "proven.json"
ROTATION = 15  # the days with the oldest proofs that run besides the changed ones
def proof_files(info) -> list[Path]:
    """The files a day's proof depends on (course/ aside): its solution, its grader and every solution
    they name (course.days.solution_closure), its exercise, its wrong and right specs."""
    specs = [*(ROOT / "tests" / "wrong").glob(f"{info.slug[:5]}_*.py"),
             *(ROOT / "tests" / "right").glob(f"{info.slug[:5]}_*.py")]
    return sorted({*days.solution_closure(info.solution_path, info.test_path), info.exercise_path, *specs})


def digest(info) -> str:
    h = hashlib.sha256()
    for path in proof_files(info):
        if path.exists():
            h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def spec_day(spec: Path) -> int:
    return int(re.match(r"day(\d\d)_", spec.name).group(1))


def run_exercises(graded) -> dict[int, dict[str, str]]:
    """Every grader against its untouched exercise in one pytest session (COURSE_TARGET is global):
    outcomes per day, by test id."""
    if not graded:
        return {}
    by_module = {info.test_path.stem: info.number for info in graded}
    workers = ("-n", str(os.cpu_count() or 2), "--dist", "loadfile") if len(graded) > 1 else ()
    outcomes = run_grader_files([info.test_path for info in graded], "exercise", *workers)
    per_day: dict[int, dict[str, str]] = {info.number: {} for info in graded}
    for name, outcome in outcomes.items():
        module = name.split("::", 1)[0].split(".")
        day = next((by_module[m] for m in module if m in by_module), None)
        if day is not None:
            per_day[day][name] = outcome
    return per_day


def main(argv: list[str]) -> int:
    bad = 0
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    graded = [info for info in days.all_days() if info.test_path.exists() and info.slug.startswith(only)]
    wrongs = sorted((ROOT / "tests" / "wrong").glob(f"{only or 'day[0-9][0-9]'}*.py"))
    rights = sorted((ROOT / "tests" / "right").glob(f"{only or 'day[0-9][0-9]'}*.py"))
    digests = {info.number: digest(info) for info in graded}
    proven = json.loads(PROVEN.read_text()) if PROVEN.exists() else {}
    entry = lambda n: proven.get(f"day{n:02d}") or {}  # noqa: E731
    changed = [n for n in digests if entry(n).get("digest") != digests[n]]
    oldest = sorted((n for n in digests if n not in changed), key=lambda n: (entry(n).get("proven", ""), n))
    rotating = sorted(oldest[:ROTATION])
    chosen = set(digests) if "--all" in argv else {*changed, *rotating}
    print(f"proofs run for {len(chosen)} of {len(digests)} days: changed since proven {changed or 'none'}; "
          f"the {len(rotating)} oldest proofs of the rest {rotating}"
          + ("; --all: every day" if "--all" in argv else ""))
    graded = [info for info in graded if info.number in chosen]
    wrongs = [w for w in wrongs if spec_day(w) in chosen]
    rights = [r for r in rights if spec_day(r) in chosen]
    if not course.ON_GPU:
        for w in [w for w in wrongs if GPU_ONLY.search(w.read_text())]:
            print(f"gpu  {w.name}: rejected only on a GPU (proven there: .ci/prove_graders.py --only {w.name[:5]})")
            wrongs.remove(w)
    test_of = lambda spec: days.find(spec_day(spec)).test_path  # noqa: E731
    exercise_runs = run_exercises(graded)
    # Each spec's grader run is its own pytest process: run as many at once as there are cores.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        wrong_runs = pool.map(lambda w: run_grader(test_of(w), str(w), "-x"), wrongs)
        right_runs = pool.map(lambda r: run_grader(test_of(r), str(r)), rights)
        wrong_runs, right_runs = list(wrong_runs), list(right_runs)
    failed_days: set[int] = set()
    for info in graded:
        outcomes = exercise_runs[info.number]
        ran = {k: v for k, v in outcomes.items() if v != "skipped"}
        passed = sorted(k for k, v in ran.items() if v == "passed")
        if not ran:
            print(f"FAIL day {info.number:02d}: its grader ran no test against the exercise")
            failed_days.add(info.number)
            bad += 1
        elif passed:
            print(f"FAIL day {info.number:02d}: {len(passed)} of {len(ran)} tests pass on the untouched exercise:")
            for k in passed[:10]:
                print(f"       {k}")
            failed_days.add(info.number)
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
            failed_days.add(spec_day(wrong))
            bad += 1
    for right, outcomes in zip(rights, right_runs):
        what = next((ln.split("RIGHT:", 1)[1].strip() for ln in right.read_text().splitlines()
                     if "RIGHT:" in ln), "?")
        ran = {k: v for k, v in outcomes.items() if v != "skipped"}
        failed = sorted(k for k, v in ran.items() if v == "failed")
        if not ran:
            print(f"FAIL {right.name}: the day's grader ran no test against it")
            failed_days.add(spec_day(right))
            bad += 1
        elif failed:
            print(f"FAIL {right.name}: {len(failed)} of {len(ran)} tests reject a correct kernel ({what}):")
            for k in failed[:10]:
                print(f"       {k}")
            failed_days.add(spec_day(right))
            bad += 1
        else:
            print(f"ok   {right.name}: all {len(ran)} tests pass ({what})")
    if "--record" in argv:
        gpu_left = {spec_day(w) for w in (ROOT / "tests" / "wrong").glob("day[0-9][0-9]*.py")
                    if GPU_ONLY.search(w.read_text())} if not course.ON_GPU else set()
        done = {n: digests[n] for n in chosen if n not in failed_days}
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        proven.update({f"day{n:02d}": {"digest": d, "proven": stamp} for n, d in done.items()})
        PROVEN.write_text(json.dumps(dict(sorted(proven.items())), indent=1) + "\n")
        on_gpu = sorted(gpu_left & set(done))
        print(f"recorded {len(done)} days' digests in {PROVEN.relative_to(ROOT)}"
              + (f" (the GPU-only specs of days {on_gpu} are proven on a GPU)" if on_gpu else ""))
    print("grader proof:", "passed" if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
