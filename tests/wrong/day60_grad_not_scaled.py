"""Day 60, deliberately wrong: day60_cross_entropy.py with one classic mistake.

MISTAKE: the gradient is softmax - onehot without the 1 / n_valid of the mean: the loss is right, but
         the gradient is the gradient of the SUM of the token losses, n_valid times too large (an
         optimizer fed it takes steps n_valid times too long; the loss curve still looks fine).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day60_cross_entropy"
EDITS = [  # (text in the solution, what the mistake puts there)
    ("p_scale = inv_n / s", "p_scale = float32(1.0) / s  # MISTAKE: should be inv_n / s"),
    ("(inv_n if d == 0 else zero)", "(float32(1.0) if d == 0 else zero)"),
    ("(inv_n if d == 1 else zero)", "(float32(1.0) if d == 1 else zero)"),
    ("(inv_n if d == 2 else zero)", "(float32(1.0) if d == 2 else zero)"),
    ("(inv_n if d == 3 else zero)", "(float32(1.0) if d == 3 else zero)"),
    ("(inv_n if t == c else zero)", "(float32(1.0) if t == c else zero)"),
    ("(inv_n if k == c else zero)", "(float32(1.0) if k == c else zero)"),
]
