"""Day 38, deliberately wrong: day38_checkpoint_topk.py with one classic mistake.

MISTAKE: an equal key's rank counts only the equal keys before it in its own tile, not those of earlier
         tiles (the look-back's equal count dropped): every tile takes its own first r equal keys, so the
         wrong ones (not the r smallest indices overall) land in the top k.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day38_checkpoint_topk"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "            e = tile_sm[2] + eq_cnt[slot] + cuda.popc(ems[row] & below)\n",
        "            e = eq_cnt[slot] + cuda.popc(ems[row] & below)  # MISTAKE: no carry from earlier tiles\n",
    ),
]
