"""Day 90 grader: the serving engine, contiguous cache (v1) and paged cache (v2).

Every engine's greedy tokens must equal a plain float64 decode of the same model. make_inputs redraws
the weights until each greedy choice wins by a clear logit gap, so a right float32 engine cannot pick
differently; a wrong one (a read past a context, a page freed too early, a token dropped at
preemption) changes the tokens. The fp16 engine is held to the float64 decode of its fp16-rounded
weights wherever the reference's top-2 gap is at least TIES["float16"]; divergences at a nearer tie are
reported as warnings, never passed silently.
"""

import math
import warnings

import numpy as np
import pytest

from course import checking, launch
from course.grading import Grader

g = Grader(90)
sol = g.solution
Workload = sol.Workload
MAX_LEN = sol.MODELS["tiny"].max_len

test_matches_reference = g.matches_reference()


def _set(xs, i, value):
    return xs[:i] + (value,) + xs[i + 1:]


def _edit(xs, i, fn):
    a = xs[i].copy()
    fn(a)
    return _set(xs, i, a)


test_rejects_bad_inputs = g.rejects_bad_inputs(extra_cases={
    "token-past-vocab": lambda xs: _edit(xs, 1, lambda a: a.__setitem__((0, 0), 256)),
    "token-negative": lambda xs: _edit(xs, 1, lambda a: a.__setitem__((0, 0), -1)),
    "prompt-len-zero": lambda xs: _edit(xs, 2, lambda a: a.__setitem__(0, 0)),
    "prompt-len-past-width": lambda xs: _edit(xs, 2, lambda a: a.__setitem__(0, xs[1].shape[1] + 1)),
    "output-len-zero": lambda xs: _edit(xs, 3, lambda a: a.__setitem__(-1, 0)),
    "longer-than-max-len": lambda xs: _edit(xs, 3, lambda a: a.__setitem__(0, MAX_LEN)),
    "lens-count-mismatch": lambda xs: _set(xs, 3, xs[3][:-1].copy()),
    "budget-below-one-request": lambda xs: _set(xs, 5, 1),
    "block-size-zero": lambda xs: _set(xs, 4, 0),
    "num-blocks-float": lambda xs: _set(xs, 5, 9.0),
    "model-not-a-model": lambda xs: _set(xs, 0, dict(xs[0].weights)),
})


def _engine(version, xs, dtype="float32"):
    """The target's engine for the inputs, requests added, not yet run."""
    model, prompts, prompt_lens, output_lens, block_size, num_blocks = xs
    eng = g.target.Engine(model, block_size, num_blocks, contiguous=(version == "naive"), dtype=dtype)
    for r, (p, n) in enumerate(zip(prompt_lens, output_lens)):
        eng.add_request(r, prompts[r, :p], int(n))
    return eng


def _outputs(eng, width):
    tokens = np.full((len(eng.finished), width), -1, dtype=np.int32)
    for r, seq in eng.finished.items():
        tokens[r, :len(seq.out)] = seq.out
    return tokens


@pytest.mark.parametrize("version", sol.VERSIONS)
def test_pages_held_match_tokens_every_step(version):
    """At every step each running sequence holds exactly ceil(tokens / block_size) pages (its new
    token included), nothing else is allocated, and once all requests finish every page is free."""
    g.require_implemented(version)
    xs, seed = g.inputs(Workload(5, 8, 6, 2, 16), version, "accounting")
    eng = _engine(version, xs)
    forward = eng.forward

    def checked(seqs):
        held = eng.num_blocks - eng.blocks.num_free_blocks
        need = sum(math.ceil(len(s.tokens) / eng.block_size) for s in seqs)
        assert held == need, f"step {eng.stats.steps}: {held} pages allocated, the running tokens need {need} " \
                             f"(seed {seed})"
        assert len(seqs) == len({s.rid for s in seqs})
        return forward(seqs)

    eng.forward = checked
    eng.run()
    assert eng.blocks.num_free_blocks == eng.num_blocks, "pages leaked after every request finished"
    assert eng.stats.peak_blocks <= eng.num_blocks
    np.testing.assert_array_equal(_outputs(eng, xs[3].max()), sol.reference(*xs), err_msg=f"seed {seed}")


def test_contiguous_reserves_max_len_per_sequence():
    """v1 carves the same budget into max_len slots: budget // max_len sequences at once, no preemption;
    v2 runs more sequences at once on the same budget."""
    g.require_implemented("naive", "optimized")
    xs, seed = g.inputs(Workload(6, 6, 5, 4, 16), "contiguous")
    dense, paged = _engine("naive", xs), _engine("optimized", xs)
    dense.run()
    paged.run()
    slots = 16 * 4 // MAX_LEN
    assert dense.block_size == MAX_LEN and dense.num_blocks == slots
    assert dense.stats.peak_running <= slots and dense.stats.preemptions == 0
    assert paged.stats.peak_running > dense.stats.peak_running, f"seed {seed}"
    assert paged.stats.generated == dense.stats.generated == int(xs[3].sum())


def test_preemption_under_a_tight_budget_keeps_the_tokens():
    """Five requests of 2 + 12 tokens, pages of 2, a budget of 16 pages (32 slots, 70 tokens wanted):
    all five start, they cannot all grow, the newest are preempted and recomputed, and the tokens
    still equal the reference."""
    g.require_implemented("optimized")
    seed = g.inputs(1, "preempt")[1]
    model, prompts, prompt_lens, output_lens = sol.make_requests([2] * 5, [12] * 5, seed=seed)
    xs = (model, prompts, prompt_lens, output_lens, 2, 16)
    eng = _engine("optimized", xs)
    eng.run()
    assert eng.stats.preemptions > 0, "16 pages for five sequences growing to 7 pages each must preempt"
    assert eng.blocks.num_free_blocks == eng.num_blocks
    np.testing.assert_array_equal(_outputs(eng, 12), sol.reference(*xs), err_msg=f"seed {seed}")


def _assert_fp16_tokens(got, xs, seed, what):
    """got == the float64 decode of the fp16-rounded model, except divergences at a top-2 gap under
    TIES["float16"] (each reported as a warning); at least one request must match outright."""
    expected, margins = sol._decode_all(xs[0].astype("float16"), *xs[1:4])
    notes = []
    same, ties, bad = sol.compare_tokens(got, expected, margins, sol.TIES["float16"], notes)
    assert not bad, f"{what}, seed {seed}: " + "; ".join(bad)
    assert same >= 1 and same + ties == got.shape[0], f"{what}, seed {seed}: {same} identical, {ties} near-ties"
    for note in notes:
        warnings.warn(f"{what}, seed {seed}: {note}", stacklevel=2)


@pytest.mark.parametrize("version", sol.VERSIONS)
@pytest.mark.parametrize("n", sol.TEST_SIZES[1:], ids=[str(s) for s in sol.TEST_SIZES[1:]])
def test_fp16_engine_matches_reference_on_rounded_weights(version, n):
    """dtype="float16": matrices held in fp16, fp16 activations between matmuls, an fp16 KV cache, fp32
    logits. The tokens follow the float64 decode of the fp16-rounded weights."""
    g.require_implemented(version)
    xs, seed = g.inputs(n, version, "fp16")
    eng = _engine(version, xs, dtype="float16")
    assert all(c.dtype == np.float16 for c in eng.key_cache + eng.value_cache), "the KV cache must be fp16"
    assert all(eng.W[k].dtype == (np.float16 if sol.holds_fp16(k) else np.float32) for k in eng.W)
    eng.run()
    assert eng.blocks.num_free_blocks == eng.num_blocks
    _assert_fp16_tokens(_outputs(eng, xs[3].max()), xs, seed, f"{version} fp16 {n}")


def test_fp16_engine_keeps_the_tokens_across_preemption():
    """The tight budget of test_preemption_under_a_tight_budget_keeps_the_tokens, in fp16: preempted
    sequences recompute their K/V into an fp16 cache and still follow the reference."""
    g.require_implemented("optimized")
    seed = g.inputs(1, "preempt-fp16")[1]
    model, prompts, prompt_lens, output_lens = sol.make_requests([2] * 5, [12] * 5, seed=seed)
    xs = (model, prompts, prompt_lens, output_lens, 2, 16)
    eng = _engine("optimized", xs, dtype="float16")
    eng.run()
    assert eng.stats.preemptions > 0
    _assert_fp16_tokens(_outputs(eng, 12), xs, seed, "optimized fp16 under preemption")


def test_fp16_rounding_refuses_what_overflows():
    """A weight past fp16's range is refused by name, not stored as inf; an unknown dtype is refused."""
    g.require_implemented("optimized")
    model = sol.Model(seed=3)
    weights = dict(model.weights)
    weights["wup.1"] = weights["wup.1"].copy()
    weights["wup.1"][7, 2] = 1e5
    big = sol.Model.from_weights(model.cfg, weights)
    with pytest.raises(ValueError, match=r"wup.1: value 100000 at index \(7, 2\) is outside float16's range"):
        big.astype("float16")
    with pytest.raises(ValueError, match="dtype: expected one of"):
        g.target.Engine(model, 4, 8, dtype="bfloat16")


def test_rope_and_cache_writes_only_the_slots():
    """The fused kernel: q rotated, k rotated into its slot, v copied into its slot, nothing else touched."""
    g.require_implemented("optimized")
    rng = np.random.default_rng(g.inputs(1, "rope")[1])
    heads, kv_heads, dim, block_size, num_blocks, tokens = 4, 2, 32, 4, 6, 7
    model = sol.Model(seed=1)
    qkv = rng.standard_normal((tokens, (heads + 2 * kv_heads) * dim), dtype=np.float32)
    positions = rng.integers(0, MAX_LEN, size=tokens).astype(np.int32)
    slots = rng.permutation(num_blocks * block_size)[:tokens].astype(np.int32)
    shape = (num_blocks, block_size, kv_heads, dim)
    key_cache, value_cache = np.full(shape, np.nan, np.float32), np.full(shape, np.nan, np.float32)
    from course import cuda

    d_k, d_v = cuda.to_device(key_cache), cuda.to_device(value_cache)
    q = g.target.rope_and_cache(qkv, positions, slots, model.cos_sin, d_k, d_v, heads)
    got_k, got_v = d_k.copy_to_host().reshape(-1, kv_heads, dim), d_v.copy_to_host().reshape(-1, kv_heads, dim)
    for t in range(tokens):
        row = qkv[t].astype(np.float64)
        want_q = sol._rope64(row[:heads * dim].reshape(heads, dim), positions[t], model.cos_sin)
        want_k = sol._rope64(row[heads * dim:(heads + kv_heads) * dim].reshape(kv_heads, dim), positions[t],
                             model.cos_sin)
        np.testing.assert_allclose(q[t], want_q, rtol=1e-5, atol=1e-5, err_msg=f"query of token {t}")
        np.testing.assert_allclose(got_k[slots[t]], want_k, rtol=1e-5, atol=1e-5, err_msg=f"key of token {t}")
        np.testing.assert_array_equal(got_v[slots[t]], qkv[t, (heads + kv_heads) * dim:].reshape(kv_heads, dim))
    untouched = np.setdiff1d(np.arange(num_blocks * block_size), slots)
    assert np.isnan(got_k[untouched]).all() and np.isnan(got_v[untouched]).all(), "a slot no token owns was written"


def test_rope_and_cache_fp16_rounds_on_store():
    """The fp16 specialization: fp16 qkv in, q out in float32, k rotated in float32 and rounded once into
    the fp16 cache, v copied bit for bit."""
    g.require_implemented("optimized")
    rng = np.random.default_rng(g.inputs(1, "rope-fp16")[1])
    heads, kv_heads, dim, block_size, num_blocks, tokens = 4, 2, 32, 4, 6, 7
    model = sol.Model(seed=1)
    qkv = rng.standard_normal((tokens, (heads + 2 * kv_heads) * dim)).astype(np.float16)
    positions = rng.integers(0, MAX_LEN, size=tokens).astype(np.int32)
    slots = rng.permutation(num_blocks * block_size)[:tokens].astype(np.int32)
    shape = (num_blocks, block_size, kv_heads, dim)
    from course import cuda

    d_k, d_v = cuda.to_device(np.full(shape, np.nan, np.float16)), cuda.to_device(np.full(shape, np.nan, np.float16))
    q = g.target.rope_and_cache(qkv, positions, slots, model.cos_sin, d_k, d_v, heads)
    assert q.dtype == np.float32
    got_k, got_v = d_k.copy_to_host().reshape(-1, kv_heads, dim), d_v.copy_to_host().reshape(-1, kv_heads, dim)
    for t in range(tokens):
        row = qkv[t].astype(np.float64)
        want_q = sol._rope64(row[:heads * dim].reshape(heads, dim), positions[t], model.cos_sin)
        want_k = sol._rope64(row[heads * dim:(heads + kv_heads) * dim].reshape(kv_heads, dim), positions[t],
                             model.cos_sin)
        np.testing.assert_allclose(q[t], want_q, rtol=1e-5, atol=1e-5, err_msg=f"query of token {t}")
        # one rounding to fp16: within half a unit in the last place (2^-11 relative), plus float32's error
        np.testing.assert_allclose(got_k[slots[t]], want_k, rtol=2.0 ** -11 + 1e-5, atol=1e-6,
                                   err_msg=f"key of token {t}")
        np.testing.assert_array_equal(got_v[slots[t]], qkv[t, (heads + kv_heads) * dim:].reshape(kv_heads, dim))
    untouched = np.setdiff1d(np.arange(num_blocks * block_size), slots)
    assert np.isnan(got_k[untouched]).all() and np.isnan(got_v[untouched]).all(), "a slot no token owns was written"
    with pytest.raises(ValueError, match="qkv: expected dtype float16"):
        g.target.rope_and_cache(qkv.astype(np.float32), positions, slots, model.cos_sin, d_k, d_v, heads)


@pytest.mark.parametrize("label", ["optimized", "optimized.fp16"])
def test_fused_kernel_stays_in_registers(label):
    """One thread per (token, pair): cos/sin and the pair live in registers; no local or shared memory."""
    rep = g.report(label)
    assert rep.stack_bytes == 0 and not rep.uses_local_memory, f"{rep.stack_bytes} B of stack"
    assert rep.count("ld.shared") == rep.count("st.shared") == rep.count("bar.sync") == 0
    assert rep.count("atom") == 0, "every slot has one writer: no atomics needed"


@pytest.mark.parametrize("argv", [
    ["--requests", "0"], ["--block-size", "0"], ["--kv-blocks", "1"],
    ["--model", "tiny", "--max-prompt", "30", "--max-output", "10"],  # tiny's max_len is 32
    ["--model", "huge"], ["--requests", "two"],
], ids=["no-requests", "block-size-0", "budget-too-small", "past-max-len", "unknown-model", "not-a-number"])
def test_main_rejects_bad_arguments(argv, capsys):
    g.require_implemented("optimized")
    with pytest.raises(SystemExit) as exc:
        g.target.main(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_main_serves_and_reports(capsys):
    """make run's report: per-request tokens, both caches' concurrency, preemptions, tokens/s, the peak
    pages against the contiguous reservation, and the check against the dense-cache decode."""
    g.require_implemented("naive", "optimized")
    rc = g.target.main(["--requests", "3", "--max-prompt", "4", "--max-output", "3", "--kv-blocks", "16",
                        "--block-size", "2", "--model", "tiny"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for needle in ("sequences at once", "preemptions", "tokens/s", "peak KV used", "contiguous cache would have "
                   "reserved", "OK   generated tokens: paged == dense-cache decode", "time split", "attention",
                   "matmuls + norms", "other"):
        assert needle in out, f"missing {needle!r} in:\n{out}"


def test_profile_splits_the_time_by_phase():
    """Engine(profile=True): every phase of a step timed, inside the run's time; without it, no phases
    (and no extra synchronisation); the tokens are the same either way."""
    g.require_implemented("optimized")
    inputs = sol.make_inputs((3, 5, 4, 4, 16), seed=2)
    plain_tokens, plain = g.target.serve(*inputs)
    tokens, eng = g.target.serve(*inputs, profile=True)
    np.testing.assert_array_equal(tokens, plain_tokens)
    s = eng.stats
    assert plain.stats.phases == {}
    assert set(s.phases) == set(sol.PHASES) - {"all-reduce"}, s.phases
    assert all(t > 0 for t in s.phases.values()), s.phases
    assert sum(s.phases.values()) <= s.seconds, (s.phases, s.seconds)


def test_main_serves_in_fp16(capsys):
    g.require_implemented("naive", "optimized")
    rc = g.target.main(["--requests", "3", "--max-prompt", "4", "--max-output", "3", "--kv-blocks", "16",
                        "--block-size", "2", "--model", "tiny", "--dtype", "float16"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "engine dtype float16" in out and "OK   generated tokens" in out, out


@pytest.mark.gpu
@pytest.mark.parametrize("version", sol.VERSIONS)
def test_small_model_on_gpu(version):
    """The 'small' model (4 layers, head_dim 64) with day 78's optimized kernel: 32 requests, prompts up to
    128, outputs up to 64, block 16. Too many tokens for make_inputs' margin guard, so a divergence is
    accepted only where the reference's top two logits are within TIE."""
    g.require_implemented(version)
    xs, seed = g.inputs(Workload(32, 128, 64, 16, 96, "small"), version, "gpu")
    got = getattr(g.target, version)(*xs)
    expected, margins = sol._decode_all(*xs[:4])
    same, ties, bad = sol.compare_tokens(got, expected, margins)
    assert not bad, f"seed {seed}: " + "; ".join(bad)
    assert same >= 30, f"seed {seed}: only {same} of 32 requests identical ({ties} near-ties)"


def test_gpu_attention_mixes_decodes_and_prompts_in_one_step():
    """The attention the engine runs on a GPU (attention_mixed: the step's decodes through day 89's tuned
    launch, its prompts through day 87's chunked-prefill kernel), here in the simulator on a smaller
    preemption workload, whose preempted sequences come back as prompts beside the decodes: the tokens equal
    the reference, and some step carried both kinds at once."""
    g.require_implemented("optimized")
    seed = g.inputs(1, "mixed")[1]
    # 5 pages of 2: at the second step the third sequence is preempted (each needs a second page), the
    # second finishes there, and the third comes back at the next step as a prompt beside the first's decode
    model, prompts, prompt_lens, output_lens = sol.make_requests([2] * 3, [6, 2, 6], seed=seed)
    xs = (model, prompts, prompt_lens, output_lens, 2, 5)
    kinds = []

    def spy(rows):
        q_lens = np.diff(rows.query_start)
        kinds.append((int((q_lens == 1).sum()), int((q_lens > 1).sum())))
        return g.target.attention_mixed(rows)

    eng = g.target.Engine(model, 2, 5, attention=spy)
    for r, (p, n) in enumerate(zip(prompt_lens, output_lens)):
        eng.add_request(r, prompts[r, :p], int(n))
    eng.run()
    assert eng.stats.preemptions > 0
    assert any(d and p for d, p in kinds), f"no step held decodes and prompts together: {kinds} (seed {seed})"
    np.testing.assert_array_equal(_outputs(eng, 6), sol.reference(*xs), err_msg=f"seed {seed}")


def test_greedy_picks_match_a_sort():
    """A step's picks and top-2 gaps (greedy_picks: argmax, then the max with it masked) equal a sort's:
    the first index on a tie at the top, with a gap of 0."""
    g.require_implemented("optimized")
    rng = np.random.default_rng(g.inputs(1, "picks")[1])
    logits = rng.standard_normal((7, 33)).astype(np.float32)
    logits[2, [4, 9]] = logits[2].max() + 1  # a tie at the top
    picks, gaps = g.target.greedy_picks(logits)
    top2 = np.sort(logits, axis=1)[:, -2:]
    np.testing.assert_array_equal(picks, logits.argmax(axis=1))
    np.testing.assert_array_equal(gaps, (top2[:, 1] - top2[:, 0]).astype(np.float64))
    assert picks[2] == 4 and gaps[2] == 0


@pytest.mark.parametrize("cfg", [(3, 4, 2, 32, 4, 9, "float32"),  # three sequences: no split
                                 (1, 2, 1, 32, 4, 29, "float16")])  # one block a partition: split and reduced
def test_decode_plan_equals_the_tuned_launch_in_every_layer(cfg):
    """decode_attention plans day 89's launch at a step's first layer and repeats it (prepared launches,
    buffers reused): each layer's output, read before the next layer's call as the engine reads it, equals
    tuned.optimized on that layer's caches; the split path (partitions and day 81's reduce) included."""
    from solutions import day78_paged_attention_v1 as pa
    from solutions import day89_tuning_paged_attention as tuned

    g.require_implemented("optimized")
    seed = g.inputs(1, f"plan{cfg}")[1]
    q, k, v, tables, lens, scale = pa.make_inputs(pa.Config(*cfg), seed=seed)
    # a second layer on the same pages (one step: the same tables and lengths), other values; NaN stays
    # where no token was written
    layers = [(q, k, v), (q[:, ::-1].copy(), (k * np.float32(-1.5)).astype(k.dtype), (v + 1).astype(v.dtype))]
    attend = g.target.decode_attention(tables, lens)
    for q, k, v in layers:
        d_q, d_k, d_v = launch.to_device(q, k, v)
        got = checking.to_host(attend(d_q, d_k, d_v, scale))
        expected = tuned.optimized(q, k, v, tables, lens, scale)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"seed {seed}")
        assert np.isfinite(got).all()


@pytest.mark.parametrize("dtype", sol.DTYPES)
def test_fused_sublayer_edges_keep_the_tokens(dtype):
    """Engine(fused=True), what a GPU runs: day 59's fused add + RMSNorm at each residual add, the gate and
    up projections as one GEMM over concatenated weights, and swiglu_kernel after it. The tokens follow the
    float64 reference (the fp16-rounded one in float16) through prompt steps and decode steps, and the
    weights it holds are the concatenated ones. (Small: day 59's blocks are 256 simulated threads.)"""
    g.require_implemented("optimized")
    seed = g.inputs(1, f"fused-{dtype}")[1]
    model, prompts, prompt_lens, output_lens = sol.make_requests([3, 1], [3, 4], seed=seed)
    xs = (model, prompts, prompt_lens, output_lens, 2, 8)
    eng = g.target.Engine(model, 2, 8, dtype=dtype, fused=True)
    for r, (p, n) in enumerate(zip(prompt_lens, output_lens)):
        eng.add_request(r, prompts[r, :p], int(n))
    assert "wgu.0" in eng.W and "wgate.0" not in eng.W
    eng.run()
    got = _outputs(eng, 4)
    if dtype == "float16":
        _assert_fp16_tokens(got, xs, seed, "fused fp16")
    else:
        expected, margins = sol._decode_all(*xs[:4])
        same, ties, bad = sol.compare_tokens(got, expected, margins)
        assert not bad and same + ties == 2, f"seed {seed}: " + "; ".join(bad)


def test_swiglu_kernel_is_silu_of_the_gate_times_up():
    """swiglu_kernel against float64 NumPy at an awkward width, gates from -100 (exp(-g) overflows float32:
    silu's limit, -0) to 30, in float32 and into float16 (float16 gate and up, float32 arithmetic)."""
    g.require_implemented("optimized")  # the fused engine's kernel
    rng = np.random.default_rng(g.inputs(1, "swiglu")[1])
    gate = np.concatenate([[-100.0, -30.0, 0.0, 30.0], rng.uniform(-8, 8, 3 * 37 - 4)]).reshape(3, 37)
    gu = np.concatenate([gate, rng.standard_normal((3, 37))], axis=1)
    for t in ("float32", "float16"):
        held = gu.astype(t)
        g64, u64 = held[:, :37].astype(np.float64), held[:, 37:].astype(np.float64)
        out = launch.empty((3, 37), t)
        with warnings.catch_warnings():  # the simulator's float32 exp(100) overflows to inf, as the GPU's does
            warnings.simplefilter("ignore", RuntimeWarning)
            g.target.swiglu_kernel[2, 32](launch.to_device(held)[0], out)
        got = out.copy_to_host().astype(np.float64)
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, g64 / (1 + np.exp(-g64)) * u64, rtol=2e-3 if t == "float16" else 1e-5,
                                   atol=1e-6)
