"""MISTAKE: the second RMSNorm reads the pre-attention residual x instead of h = x + o: the residual add
still happens (h is right), but the MLP sees norm(x), as if the attention sublayer had not run."""

SOLUTION = "day72_transformer_block"
EDITS = [
    ("n2, h = day59.optimized(o_proj, x2, w_norm2, EPS)",
     "h = add(o_proj, x2)\n    n2 = rms_norm(x2, w_norm2)"),
]
