"""MISTAKE: the attention's residual add uses the first norm's output instead of x (the residual taken
after the norm, as when x is normalised in place before it was kept): h = RMSNorm(x) + o, not x + o. The
residual stream loses its scale at every block."""

SOLUTION = "day72_transformer_block"
EDITS = [
    ("n2, h = day59.optimized(o_proj, x2, w_norm2, EPS)", "n2, h = day59.optimized(o_proj, a, w_norm2, EPS)"),
]
