"""Day 81, deliberately wrong: day81_paged_attention_v2.py with one classic mistake.

MISTAKE: the reduce weights each partition by l_p * 2^m_p without subtracting the max over partitions: fine for small
         logits, inf / inf = NaN once a partition's max passes ~128 (base 2).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day81_paged_attention_v2"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        w = part_sum[seq, head, p] * math.exp2(part_max[seq, head, p] - m_all)\n',
        '        w = part_sum[seq, head, p] * math.exp2(part_max[seq, head, p])\n',
    ),
]
