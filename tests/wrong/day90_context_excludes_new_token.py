"""Day 90, deliberately wrong: day90_serving_engine.py with one classic mistake.

MISTAKE: a token's context length is its position, not position + 1: it never attends to itself (and the first token of
         a prompt attends to nothing).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day90_serving_engine"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        return np.repeat(self.tables, np.diff(self.query_start), axis=0), self.positions + 1\n',
        '        return np.repeat(self.tables, np.diff(self.query_start), axis=0), self.positions\n',
    ),
    (
        '            context_lens[i] = len(seq.tokens)  # the new tokens attend to themselves too\n',
        '            context_lens[i] = len(seq.tokens) - 1\n',
    ),
]
