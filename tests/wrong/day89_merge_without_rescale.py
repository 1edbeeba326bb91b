"""Day 89, deliberately wrong: day89_tuning_paged_attention.py with one classic mistake.

MISTAKE: the partition merge adds each part's output weighted by its exp-sum alone, forgetting to rescale by 2^(m_p -
         M): the parts' sums were taken against different maxima.

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day89_tuning_paged_attention"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '        total += exp_sums[seq, head, p] * math.exp2(max_logits[seq, head, p] - m_all)\n',
        '        total += exp_sums[seq, head, p]\n',
    ),
    (
        '            o += tmp_out[seq, head, p, d] * exp_sums[seq, head, p] * math.exp2(max_logits[seq, head, p] - m_all)\n',
        '            o += tmp_out[seq, head, p, d] * exp_sums[seq, head, p]\n',
    ),
]
