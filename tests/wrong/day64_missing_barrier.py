"""MISTAKE: no barrier after the chunk's pairs are stored in shared memory: the network's first step reads
pairs other threads have not written yet (the simulator names the race)."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("""            buf[j] = cand_in[r, i] if i < width else uint64(PAD)
    cuda.syncthreads()""", """            buf[j] = cand_in[r, i] if i < width else uint64(PAD)""")]
