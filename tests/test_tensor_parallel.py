"""Tensor parallelism for day 90's engine (solutions/tensor_parallel.py).

Without GPUs the split itself is proved: the shards' shapes and contents, a layer's partial outputs
summed in float64 equal the whole layer, and N in-process ranks (LocalComm: the all-reduce a plain
sum) decode the same greedy tokens as the one-GPU engine and the float64 reference, under preemption
too. The NCCL path (one process per GPU) is gpu-marked and needs at least 2 GPUs.
"""

import math

import numpy as np
import pytest

import course
from solutions import day90_serving_engine as sol
from solutions import tensor_parallel as tp

# 8 query heads over 4 KV heads (groups of 2), hidden 128: N = 1, 2 and 4 divide all three.
TP4 = sol.ModelConfig(vocab=256, d_model=64, num_layers=2, num_heads=8, num_kv_heads=4, head_dim=32, hidden=128,
                      max_len=32)


@pytest.fixture
def tp4(monkeypatch):
    """make_requests draws weights of the "tp4" preset until every greedy choice wins by sol.MARGIN."""
    monkeypatch.setitem(sol.MODELS, "tp4", TP4)
    return "tp4"


def _inputs(model_name, prompt_lens, output_lens, block_size, num_blocks, seed):
    model, prompts, plens, olens = sol.make_requests(prompt_lens, output_lens, model=model_name, seed=seed)
    return model, prompts, plens, olens, block_size, num_blocks


def _with_bias(model, seed):
    """The model with Qwen2-style q/k/v biases on every layer."""
    rng = np.random.default_rng(seed)
    c = model.cfg
    cols = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
    w = dict(model.weights)
    for i in range(c.num_layers):
        w[f"bqkv.{i}"] = (0.3 * rng.standard_normal(cols)).astype(np.float32)
    return sol.Model.from_weights(c, w, model.cos_sin)


# --- the split ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 4])
def test_shards_hold_their_slices(n):
    """Shapes per rank, and the shards put back together are the model: q, k and v column blocks of
    wqkv (and bqkv) in rank order, wo and wdown rows, wgate and wup columns; the rest replicated."""
    model = _with_bias(sol.Model(TP4, seed=2), seed=3)
    c, D = TP4, TP4.head_dim
    H, G, F = c.num_heads // n, c.num_kv_heads // n, c.hidden // n
    shards = [tp.shard_weights(model, r, n) for r in range(n)]
    for s in shards:
        assert (s.cfg.num_heads, s.cfg.num_kv_heads, s.cfg.hidden) == (H, G, F)
        assert s.cfg.num_heads // s.cfg.num_kv_heads == c.num_heads // c.num_kv_heads, "a rank keeps whole groups"
        assert s.weights["wqkv.0"].shape == (c.d_model, (H + 2 * G) * D)
        assert s.weights["bqkv.1"].shape == ((H + 2 * G) * D,)
        assert s.weights["wo.1"].shape == (H * D, c.d_model)
        assert s.weights["wgate.0"].shape == s.weights["wup.0"].shape == (c.d_model, F)
        assert s.weights["wdown.1"].shape == (F, c.d_model)
        for name in ("embed", "norm_f", "lm_head", "norm1.0", "norm2.1"):
            np.testing.assert_array_equal(s.weights[name], model.weights[name])
        assert all(w.flags.c_contiguous for w in s.weights.values())
    for i in range(c.num_layers):
        for name in (f"wqkv.{i}", f"bqkv.{i}"):
            full = model.weights[name]
            parts = [s.weights[name] for s in shards]
            q = np.concatenate([p[..., :H * D] for p in parts], axis=-1)
            k = np.concatenate([p[..., H * D:(H + G) * D] for p in parts], axis=-1)
            v = np.concatenate([p[..., (H + G) * D:] for p in parts], axis=-1)
            np.testing.assert_array_equal(np.concatenate([q, k, v], axis=-1), full, err_msg=name)
        for name, axis in ((f"wo.{i}", 0), (f"wdown.{i}", 0), (f"wgate.{i}", 1), (f"wup.{i}", 1)):
            np.testing.assert_array_equal(np.concatenate([s.weights[name] for s in shards], axis=axis),
                                          model.weights[name], err_msg=name)


@pytest.mark.parametrize("n", [2, 4])
def test_partial_outputs_sum_to_the_layer(n):
    """In float64: each rank's attention (its heads, its KV heads) through its rows of wo, and its SwiGLU
    slice through its rows of wdown, summed over the ranks, are the whole layer's two outputs."""
    model = _with_bias(sol.Model(TP4, seed=4), seed=5)
    c = TP4
    rng = np.random.default_rng(6)
    tokens, start = 5, 3
    x = rng.standard_normal((tokens, c.d_model))
    past = rng.standard_normal((2, start, c.num_kv_heads, c.head_dim))  # cache rows before the new tokens

    def layer(m, past_kv):
        cc, W = m.cfg, {k: v.astype(np.float64) for k, v in m.weights.items()}
        Hh, Gg, D = cc.num_heads, cc.num_kv_heads, cc.head_dim
        pos = start + np.arange(tokens)
        qkv = sol._rmsnorm64(x, W["norm1.0"], cc.norm_eps) @ W["wqkv.0"] + W["bqkv.0"]
        q = sol._rope64(qkv[:, :Hh * D].reshape(-1, Hh, D), pos, m.cos_sin)
        k = sol._rope64(qkv[:, Hh * D:(Hh + Gg) * D].reshape(-1, Gg, D), pos, m.cos_sin)
        v = qkv[:, (Hh + Gg) * D:].reshape(-1, Gg, D)
        o = sol._attend64(q, np.concatenate([past_kv[0], k]), np.concatenate([past_kv[1], v]), start)
        attn = o.reshape(tokens, -1) @ W["wo.0"]
        h = sol._rmsnorm64(x + attn, W["norm2.0"], cc.norm_eps)  # the summed residual, as every rank has it
        gate = h @ W["wgate.0"]
        return attn, (gate / (1 + np.exp(-gate)) * (h @ W["wup.0"])) @ W["wdown.0"]

    whole_attn, whole_mlp = layer(model, past)
    G = c.num_kv_heads // n
    parts = [layer(tp.shard_weights(model, r, n), past[:, :, r * G:(r + 1) * G]) for r in range(n)]
    np.testing.assert_allclose(sum(p[0] for p in parts), whole_attn, rtol=1e-12, atol=1e-12)
    # the MLP input of a rank is the whole residual (after the all-reduce): its slices sum to the MLP
    mlp_parts = []
    for r in range(n):
        s = tp.shard_weights(model, r, n)
        W = {k: v.astype(np.float64) for k, v in s.weights.items()}
        h = sol._rmsnorm64(x + whole_attn, W["norm2.0"], c.norm_eps)
        gate = h @ W["wgate.0"]
        mlp_parts.append((gate / (1 + np.exp(-gate)) * (h @ W["wup.0"])) @ W["wdown.0"])
    np.testing.assert_allclose(sum(mlp_parts), whole_mlp, rtol=1e-12, atol=1e-12)
    assert not np.allclose(mlp_parts[0], whole_mlp), "one rank alone must not already be the whole"


@pytest.mark.parametrize("cfg_change, n, match", [
    (dict(), 3, "cannot split num_heads = 8"),
    (dict(num_heads=8, num_kv_heads=2), 4, "cannot split num_kv_heads = 2"),
    (dict(hidden=130), 4, "cannot split hidden = 130"),
    (dict(), 0, "ranks: expected a positive int"),
    (dict(), 2.0, "ranks: expected a positive int"),
], ids=["heads", "kv-heads", "hidden", "zero", "float"])
def test_refuses_a_split_that_does_not_divide(cfg_change, n, match):
    cfg = TP4._replace(**cfg_change)
    model = sol.Model(cfg, seed=1)
    with pytest.raises(ValueError, match=match):
        tp.shard_weights(model, 0, n)
    if isinstance(n, int) and n > 0:
        xs = sol.make_inputs(sol.Workload(1, 2, 1, 4, 8), seed=1)
        with pytest.raises(ValueError, match=match):
            tp.serve_local(model, *xs[1:], n)


def test_refuses_a_rank_outside_the_group_and_requests_off_rank_0():
    model = sol.Model(TP4, seed=1)
    with pytest.raises(ValueError, match=r"rank: expected 0..1, got 2"):
        tp.shard_weights(model, 2, 2)
    comm = tp.LocalComm(tp._LockStep(2), 1)
    eng = tp.TPEngine(tp.shard_weights(model, 1, 2), 4, 8, comm)
    with pytest.raises(ValueError, match="rank 0 holds the requests"):
        eng.add_request(0, [1, 2], 1)


# --- the in-process communicator ------------------------------------------------------------------


def test_local_comm_sums_and_broadcasts():
    def body(comm):
        x = np.full(3, comm.rank + 1, dtype=np.float16)
        total = comm.all_reduce(x)
        plan = comm.broadcast({"step": 7, "rows": np.arange(3)} if comm.rank == 0 else None)
        return x, total, plan

    out = tp.run_local(3, body)
    for r, (x, total, plan) in enumerate(out):
        np.testing.assert_array_equal(x, r + 1, err_msg="the partial itself stays untouched")
        assert total.dtype == np.float16 and (total == 6).all()
        assert plan["step"] == 7 and plan["rows"].tolist() == [0, 1, 2]
    assert out[1][1] is not out[2][1] and out[1][2] is not out[2][2], "every rank gets its own copy"


def test_local_comm_raises_a_failed_ranks_error():
    def body(comm):
        comm.all_reduce(np.ones(2, np.float32))
        if comm.rank == 1:
            raise KeyError("rank 1 broke")
        return comm.all_reduce(np.ones(2, np.float32))  # ranks 0 and 2 would wait for rank 1 forever

    with pytest.raises(KeyError, match="rank 1 broke"):
        tp.run_local(3, body)


# --- the engine over N in-process ranks -----------------------------------------------------------


def _check_tokens_and_pages(xs, n, seed, **kw):
    model = xs[0]
    ref = sol.reference(*xs)
    single_tokens, single = sol.serve(*xs, **kw)
    got, engines = tp.serve_local(*xs, n, **kw)  # RuntimeError if any rank's picks differ from rank 0's
    np.testing.assert_array_equal(got, ref, err_msg=f"{n} ranks vs the float64 decode, seed {seed}")
    np.testing.assert_array_equal(got, single_tokens, err_msg=f"{n} ranks vs the one-GPU engine, seed {seed}")
    lead = engines[0]
    assert lead.stats.steps == single.stats.steps and lead.stats.preemptions == single.stats.preemptions
    assert all(e.stats.steps == lead.stats.steps for e in engines), "every rank runs every step"
    assert all(len(e.picks) == lead.stats.steps for e in engines)
    assert lead.blocks.num_free_blocks == lead.num_blocks
    # Same block tables, other heads: rank r's cache is the one-GPU cache's KV heads r*G/N.., page for page.
    G = model.cfg.num_kv_heads // n
    for r, e in enumerate(engines):
        assert e.cfg.num_heads == model.cfg.num_heads // n
        for i in range(model.cfg.num_layers):
            for mine, whole in ((e.key_cache[i], single.key_cache[i]), (e.value_cache[i], single.value_cache[i])):
                np.testing.assert_allclose(mine.copy_to_host(), whole.copy_to_host()[:, :, r * G:(r + 1) * G],
                                           rtol=1e-4, atol=1e-5, equal_nan=True, err_msg=f"rank {r} layer {i}")
    return lead


@pytest.mark.parametrize("n", [1, 2, 4])
def test_ranks_decode_the_single_engines_tokens(tp4, n):
    """Five requests of 2 + 12 tokens, pages of 2, a budget of 16 pages (32 slots for 70 tokens): the
    paged engine preempts; N ranks follow it token for token, page for page."""
    seed = 11
    xs = _inputs(tp4, [2] * 5, [12] * 5, 2, 16, seed)
    lead = _check_tokens_and_pages(xs, n, seed)
    assert lead.stats.preemptions > 0, "the budget is meant to force a preemption"


def test_ranks_with_qkv_bias_and_the_contiguous_cache(tp4):
    """Qwen2's q/k/v biases split with their columns; the contiguous (v1) engine over 2 ranks too."""
    seed = 12
    model, *rest = _inputs(tp4, [4, 2, 5], [3, 4, 2], 4, 16, seed)
    model = _with_bias(model, seed)
    margins = sol._decode_all(model, *rest[:3])[1]
    assert margins.min() > 1e-4, f"seed {seed}: the biased model's greedy choices must not be near-ties"
    xs = (model, *rest)
    _check_tokens_and_pages(xs, 2, seed)
    _check_tokens_and_pages(xs, 2, seed, contiguous=True)


def test_ranks_in_fp16_follow_the_rounded_reference(tp4):
    """dtype float16: each rank's partial is rounded to fp16 before the sum, one rounding more than the
    one-GPU engine's: held to the float64 decode of the fp16 weights at TIES["float16"], as day 90 is."""
    seed = 13
    xs = _inputs(tp4, [5, 3, 4], [4, 3, 4], 2, 16, seed)
    got, engines = tp.serve_local(*xs, 2, dtype="float16")
    assert all(c.dtype == np.float16 for e in engines for c in e.key_cache)
    expected, margins = sol._decode_all(xs[0].astype("float16"), *xs[1:4])
    same, ties, bad = sol.compare_tokens(got, expected, margins, sol.TIES["float16"])
    assert not bad, "; ".join(bad)
    assert same >= 1 and same + ties == got.shape[0]


def test_tiny_model_over_two_ranks_under_preemption():
    """Day 90's own tiny preset (4 heads over 2 KV heads) split in two, under the preemption test's budget."""
    model, prompts, plens, olens = sol.make_requests([2] * 5, [12] * 5, seed=5)
    xs = (model, prompts, plens, olens, 2, 16)
    lead = _check_tokens_and_pages(xs, 2, 5)
    assert lead.stats.preemptions > 0


# --- make run --gpus N ----------------------------------------------------------------------------


def test_main_gpus_says_in_one_line_what_is_missing(capsys):
    why = tp.nccl_problem(2)
    if why is None:
        pytest.skip("NCCL and 2 GPUs are here: test_nccl_ranks_match_one_gpu runs the path")
    rc = sol.main(["--gpus", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--gpus 2" in err and why in err, err
    assert sol.main(["--gpus", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err


def test_main_gpus_wiring_with_in_process_ranks(monkeypatch, capsys):
    """make run --gpus 2's report, with the NCCL launcher stood in for by in-process ranks: the paged
    engine split in two, its tokens against the one-GPU engine's, the ranks agreeing."""
    def serve_in_process(*xs, dtype="float32"):
        *inputs, n = xs
        tokens, engines = tp.serve_local(*inputs, n, dtype=dtype)
        lead = engines[0]
        return tokens, tp.TPRun(lead.stats, n, [e.reduce_seconds for e in engines],
                                tp.ranks_disagree([e.picks for e in engines]))

    monkeypatch.setattr(tp, "nccl_problem", lambda n: None)
    monkeypatch.setattr(tp, "serve_nccl", serve_in_process)
    rc = sol.main(["--requests", "3", "--max-prompt", "4", "--max-output", "3", "--kv-blocks", "16",
                   "--block-size", "2", "--model", "tiny", "--gpus", "2"])
    out = capsys.readouterr().out
    assert rc == 0, out
    for needle in ("tensor parallel over 2 GPU(s), 2 heads over 1 KV heads per GPU", "all-reduce",
                   "OK   generated tokens: paged == dense-cache decode",
                   "OK   tensor parallel == one-GPU engine for 3/3 requests; every rank picked the same tokens"):
        assert needle in out, f"missing {needle!r} in:\n{out}"
    rc = sol.main(["--max-prompt", "4", "--max-output", "3", "--model", "tiny", "--gpus", "4"])  # tiny: 2 KV heads
    assert rc == 2 and "cannot split num_kv_heads = 2" in capsys.readouterr().err


def _nccl_skip_reason(n):
    if not course.ON_GPU:
        return f"needs {n} CUDA GPUs; running on {course.DEVICE.describe()}"
    return tp.nccl_problem(n)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 2])
def test_nccl_ranks_match_one_gpu(n):
    """One process per GPU, NCCL all-reduce and broadcast: the tokens of the one-GPU engine and of the
    float64 decode, the ranks agreeing at every step. n = 1 is the same path with a communicator of one
    (it runs on a one-GPU machine; n = 2 is skipped below 2 GPUs)."""
    why = _nccl_skip_reason(n)
    if why:
        pytest.skip(why)
    model, prompts, plens, olens = sol.make_requests([2] * 5, [12] * 5, seed=5)
    xs = (model, prompts, plens, olens, 2, 16)
    got, run = tp.serve_nccl(*xs, n)
    assert run.disagree is None, run.disagree
    np.testing.assert_array_equal(got, sol.reference(*xs))
    np.testing.assert_array_equal(got, sol.serve(*xs)[0])
    assert run.stats.preemptions > 0 and len(run.reduce_seconds) == n
    assert all(math.isfinite(s) for s in run.reduce_seconds)
