"""Day 05, deliberately wrong: day05_coalescing.py with one classic mistake.

MISTAKE: the SoA kernel indexes soa[i, field], the AoS order, on a (fields, n) array: wrong particles, and past the end
         of the first axis as soon as i >= 8.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day05_coalescing"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        ('        vx = soa[VX, i]\n'
         '        vy = soa[VY, i]\n'
         '        vz = soa[VZ, i]\n'
         '        out[i] = HALF * soa[M, i] * (vx * vx + vy * vy + vz * vz)\n'),
        ('        vx = soa[i, VX]\n'
         '        vy = soa[i, VY]\n'
         '        vz = soa[i, VZ]\n'
         '        out[i] = HALF * soa[i, M] * (vx * vx + vy * vy + vz * vz)\n'),
    ),
]
