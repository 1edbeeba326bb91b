"""MISTAKE: the merge keeps only the first chunk's candidates: the final block sees kc pairs of chunk 0,
so a row whose likeliest tokens lie past the first chunk samples from the wrong set."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("cand, width, n = nxt, chunks * kc, chunks * kc", "cand, width, n = nxt, kc, kc")]
