"""Day 87, deliberately wrong: day87_chunked_prefill.py with one classic mistake.

MISTAKE: the optimized kernel's causal mask is off by one (key <= position + 1): every new token also sees the token
         after it, a peek at the future that the cache already holds for all but a chunk's last.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day87_chunked_prefill"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                x = s[qq] if k0 + lane <= my_pos + qq else -math.inf  # the causal mask\n',
        '                x = s[qq] if k0 + lane <= my_pos + qq + 1 else -math.inf  # the causal mask\n',
    ),
]
