"""MISTAKE: the keys equal to the threshold taken from the wrong end: the compaction keeps the `take` equal
keys of the HIGHEST ids (rank counted from the last equal key) instead of the lowest, so a row with many
copies of the k-th largest logit samples from a different set than the stable sort's top-k."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("    thr, take, _ = find_bucket(hist, PASSES - 1, r, nb,", "    thr, take, n_eq = find_bucket(hist, PASSES - 1, r, nb,"),
         ("    ranks = hist[PASSES - 1, r, b, d] > 0 and running < take  # the same in every thread",
          "    ranks = hist[PASSES - 1, r, b, d] > 0  # the same in every thread"),
         ("                    if e < take:\n", "                    if n_eq - 1 - e < take:\n"),
         ("cand[r, less + e] = pack(", "cand[r, less + n_eq - 1 - e] = pack(")]
