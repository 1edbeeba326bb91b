"""Day 58, deliberately wrong: day58_layernorm_welford.py with one classic mistake.

MISTAKE: the naive version takes the variance in one pass as E[x^2] - E[x]^2 in float32 (the sum and the
         sum of squares in the same pass): at mean 1e4 both terms are ~1e8, float32's spacing there is 8,
         and a variance of 1 cancels away catastrophically (it comes out anywhere in -50 .. 50, or NaN).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day58_layernorm_welford"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        v = ZERO\n        k = t\n        while k < cols:  # pass 1: read the row for its sum\n"
        "            v += xr[k]\n            k += THREADS\n        mean = block_stat_sum(v, slots, cols)\n",
        "        v = ZERO\n        sq = ZERO\n        k = t\n        while k < cols:  # one pass: sum and sum of squares\n"
        "            v += xr[k]\n            sq += xr[k] * xr[k]\n            k += THREADS\n"
        "        mean = block_stat_sum(v, slots, cols)\n"
        "        var = block_stat_sum(sq, slots, cols) - mean * mean  # MISTAKE: cancels at large means\n",
    ),
    (
        "        q = ZERO\n        k = t\n        while k < cols:  # pass 2: read it again for the squared deviations\n"
        "            d = xr[k] - mean\n            q += d * d\n            k += THREADS\n"
        "        var = block_stat_sum(q, slots, cols)\n",
        "",
    ),
]
