"""MISTAKE: RoPE reads the positions in the wrong token order: (batch, seq) flattened sequence-major, as
if the tokens were laid out (seq, batch) like the reordered attention layout's rows, so token s of a
sequence is turned by the position of flat index s in the transposed table (s // batch in a prefill).
RoPE depends only on q's position minus k's, so a constant offset would go unnoticed; this mapping is
not an offset, and with two sequences every score changes (one sequence alone hides it)."""

SOLUTION = "day72_transformer_block"
EDITS = [
    ('day61.optimized(q3, k3, positions.reshape(tokens), cos_sin_cache, "neox")',
     'day61.optimized(q3, k3, launch.to_device(np.ascontiguousarray(positions.copy_to_host().T).reshape(tokens))'
     '[0], cos_sin_cache, "neox")'),
]
