"""Day 79, deliberately wrong: day79_paged_attention_gqa.py with one classic mistake.

MISTAKE: query heads are matched to KV heads by h % num_kv_heads (interleaved) instead of h // group (contiguous
         groups, the convention of Llama, vLLM and PyTorch's enable_gqa).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day79_paged_attention_gqa"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        '                q[g, j] = query[seq, head0 + g, lane + WARP * j] * scale\n',
        '                q[g, j] = query[seq, kv_head + num_kv_heads * (head0 - kv_head * group + g), lane + WARP * j] * scale\n',
    ),
    (
        '        out[seq, head0 + g, d] = o / total\n',
        '        out[seq, kv_head + num_kv_heads * (head0 - kv_head * group + g), d] = o / total\n',
    ),
]
