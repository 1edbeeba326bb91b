"""Day 90, deliberately wrong: day90_serving_engine.py with one classic mistake.

MISTAKE: the fp16 engine keeps its KV cache in float32: weights and activations halved, but the cache, the bytes
         attention reads every step, still takes 4 B an element.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day90_serving_engine"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        nan = np.full(shape, np.nan, dtype=self.dtype)\n',
        '        nan = np.full(shape, np.nan, dtype=np.float32)\n',
    ),
]
