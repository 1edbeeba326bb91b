"""Day 90, deliberately wrong: day90_serving_engine.py with one classic mistake.

MISTAKE: a preempted sequence is readmitted as if its K/V were still cached: only its newest token goes through the
         model, so attention reads freshly allocated pages that nobody wrote.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day90_serving_engine"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '            seq.new_tokens = len(seq.tokens)  # the prompt, or everything again after a preemption\n',
        '            seq.new_tokens = 1 if seq.out else len(seq.tokens)\n',
    ),
]
