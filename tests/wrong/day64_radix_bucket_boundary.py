"""MISTAKE: the digit test off by one at the bucket's upper edge: `excl <= rem < incl` instead of
`excl < rem <= incl`. When the rem-th key is the LAST key of its bucket (rem == the inclusive count), the
pass narrows to the next bucket, whose keys all lie past the k-th: the threshold and the candidates are
wrong (top_k = vocab, or k logits sharing a digit above the rest, put the k-th key exactly there)."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("    if excl < rem and rem <= incl:  # one digit", "    if excl <= rem and rem < incl:  # one digit")]
