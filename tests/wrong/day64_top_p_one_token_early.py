"""MISTAKE: the top-p cut one token too early: keeping only the tokens whose cumulative mass is below
top_p drops the token that crosses it (the shortest prefix that REACHES top_p includes it)."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("keep = min(n_below + 1, top_k)", "keep = max(min(n_below, top_k), 1)")]
