"""Day 10, deliberately wrong: day10_stencil3d_register_tiling.py with one classic mistake.

MISTAKE: the barrier before the stores is dropped but the plane is not double-buffered: plane z is written into the
         slots other warps may still be reading plane z - 1 from (a write-after-read race on shared memory).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day10_stencil3d_register_tiling"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '    half = uint64(0)  # the half plane z uses: 0 or PLANE_SLOTS, switched every plane\n',
        '    half = uint64(0)  # MISTAKE: one buffer, never switched\n',
    ),
    (
        '        _stencil_plane(plane, flat_out, at, half + mine, half + duty, on_duty, inside, q[1], q[0], q[2],\n'
        '                       hq[0], c, cx, cy, cz)\n'
        '        half = uint64(PLANE_SLOTS) - half\n'
        '        for k in range(LEAD + 1):\n'
        '            q[k] = q[k + 1]\n'
        '        q[LEAD + 1] = ahead\n'
        '        for k in range(LEAD - 1):\n'
        '            hq[k] = hq[k + 1]\n'
        '        hq[LEAD - 1] = halo_ahead\n'
        '        at += step\n'
        '        ahead_at += step\n'
        '        halo_ahead_at += step\n'
        '    # The last',
        '        _stencil_plane(plane, flat_out, at, half + mine, half + duty, on_duty, inside, q[1], q[0], q[2],\n'
        '                       hq[0], c, cx, cy, cz)\n'
        '        for k in range(LEAD + 1):\n'
        '            q[k] = q[k + 1]\n'
        '        q[LEAD + 1] = ahead\n'
        '        for k in range(LEAD - 1):\n'
        '            hq[k] = hq[k + 1]\n'
        '        hq[LEAD - 1] = halo_ahead\n'
        '        at += step\n'
        '        ahead_at += step\n'
        '        halo_ahead_at += step\n'
        '    # The last',
    ),
]
