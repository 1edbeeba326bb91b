"""Day 78, deliberately wrong: day78_paged_attention_v1.py with one classic mistake.

MISTAKE: query heads are matched to KV heads by h % num_kv_heads (interleaved) instead of h // group (contiguous
         groups, the convention of Llama, vLLM and PyTorch's enable_gqa).

The grader run against it must fail (.ci/prove_graders.py checks). COURSE_TARGET=<this file>
grades the solution with these edits applied (course.days.load_target).
"""

SOLUTION = "day78_paged_attention_v1"
EDITS = [  # (text in the solution, what the mistake puts there)
    (
        "        kv_head = head // (query.shape[1] // num_kv_heads)\n",
        "        kv_head = head % num_kv_heads\n",
    ),
]
