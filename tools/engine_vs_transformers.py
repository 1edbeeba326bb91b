"""Day 90's serving engine against Hugging Face transformers' generate(), on a GPU.

Builds a random transformers.LlamaForCausalLM (by default 8 layers, d_model 1024, 16 heads over 4 KV heads
of 64, vocab 32000, fp16), saves it with save_pretrained, loads that directory through
solutions/llama_checkpoint.py into the engine, serves a batch of prompts of mixed lengths, and runs
model.generate(do_sample=False) on the same prompts: once as one left-padded batch with an attention
mask, and once a prompt-length bucket at a time (the padded batch makes every prompt as long as the
longest). Prints tokens/s of each, how often the greedy tokens agree (a divergence where the engine's
top-2 logit gap is under --tie is a near-tie, named, not a failure) and the engine's time split. Both
sides are warmed up on the whole workload's shapes: the engine is timed twice (a first run, which pays
for whatever its shapes still compile, and a second, the figure compared), then once more with every
phase synchronised for the split, and twice with its sublayer edges unfused (Engine(fused=False): the
norms, residual adds and SwiGLU as CuPy expressions) to show what the fusion buys; --profile PATH adds a
cProfile of one more warm run. In fp16 both sides round, each in its own places, so a divergence between
them does not say which one left the model: the judge there is the same weights in float32
(transformers, upcast, greedy on the padded batch, with its own top-2 gaps), and both fp16 runs are
compared with it. Exits 1 where the engine parts from its reference at a clear gap (float32: generate;
fp16: the float32 model).

    python3 tools/engine_vs_transformers.py                       # the default shape
    python3 tools/engine_vs_transformers.py --layers 2 --batch 8 --max-new 16 --json out.json
    COURSE_PREPARED=0 python3 tools/engine_vs_transformers.py     # the engine's launches through Numba's
                                                                  # dispatcher (course.prepared): the A/B

Needs torch and transformers (the GPU machine has them); exits 2 with a message where they, or a GPU,
are missing. Napkin math for the default shape: 8 x (1024 x 1536 + 1024 x 1024 + 3 x 1024 x 2816)
+ 2 x 32000 x 1024 = 155M parameters, 310 MB in fp16: a decode step of the whole batch reads them once,
74 us at 4.2 TB/s; the KV cache of 64 sequences of up to 320 tokens is 64 x 320 x 8 layers x 2 x 4 x 64
x 2 B = 168 MB, read once per decode step at most. A step costs far more than that in launches: 8 layers
x ~12 launches plus the host's scheduling, which is what the time split shows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 tools/engine_vs_transformers.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=8, help="decoder layers (default %(default)s)")
    p.add_argument("--d-model", type=int, default=1024, help="hidden size (default %(default)s)")
    p.add_argument("--heads", type=int, default=16, help="query heads (default %(default)s)")
    p.add_argument("--kv-heads", type=int, default=4, help="key/value heads (default %(default)s)")
    p.add_argument("--head-dim", type=int, default=64, help="head size, a multiple of 32 (default %(default)s)")
    p.add_argument("--hidden", type=int, default=2816, help="MLP intermediate size (default %(default)s)")
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary (default %(default)s)")
    p.add_argument("--batch", type=int, default=64, help="prompts served together (default %(default)s)")
    p.add_argument("--min-prompt", type=int, default=16, help="shortest prompt (default %(default)s)")
    p.add_argument("--max-prompt", type=int, default=256, help="longest prompt (default %(default)s)")
    p.add_argument("--max-new", type=int, default=64, help="tokens generated per prompt (default %(default)s)")
    p.add_argument("--block-size", type=int, default=16, help="the engine's page size (default %(default)s)")
    p.add_argument("--bucket", type=int, default=32,
                   help="prompt-length bucket width for the bucketed generate (default %(default)s)")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16",
                   help="both models' dtype (default %(default)s)")
    p.add_argument("--init", type=float, default=0.05,
                   help="initializer_range of the random weights: larger spreads the logits and makes near-ties "
                        "rarer (default %(default)s)")
    p.add_argument("--tie", type=float, default=None,
                   help="a divergence where the engine's top-2 logit gap is below this is a near-tie (default: 5 x "
                        "the engine's TIES[dtype]; transformers rounds its residual stream and its logits to the "
                        "model's dtype, the engine keeps both in float32)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and the prompts (default %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the numbers to this JSON file")
    p.add_argument("--profile", metavar="PATH",
                   help="also run the engine once more under cProfile (warm, after the timed runs) and write its "
                        "stats here (python -m pstats PATH)")
    return p


def compare(got, expected, margins, tie):
    """(identical requests, tie notes, mismatch notes, tokens agreeing before each request's first divergence)."""
    from solutions import day90_serving_engine as eng

    ties = []
    same, _, bad = eng.compare_tokens(got, expected, margins, tie, ties)
    agree = 0
    for r in range(expected.shape[0]):
        i = eng.first_divergence(list(got[r]), list(expected[r]))
        agree += len(expected[r]) if i is None else i
    return same, ties, bad, agree


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as exc:
        print(f"engine_vs_transformers: needs torch and transformers ({exc}); run it on the GPU machine",
              file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("engine_vs_transformers: torch sees no GPU; the comparison times both on one", file=sys.stderr)
        return 2
    from course import DEVICE, ON_GPU

    if not ON_GPU:
        print("engine_vs_transformers: the course found no GPU (it would run the engine in the simulator)",
              file=sys.stderr)
        return 2
    from solutions import day90_serving_engine as eng
    from solutions import llama_checkpoint as lc

    if a.min_prompt < 1 or a.max_prompt < a.min_prompt or a.max_new < 1 or a.batch < 1:
        print("engine_vs_transformers: need 1 <= --min-prompt <= --max-prompt, --max-new >= 1, --batch >= 1",
              file=sys.stderr)
        return 2
    tie = 5 * eng.TIES[a.dtype] if a.tie is None else a.tie
    tdtype = {"float16": torch.float16, "float32": torch.float32}[a.dtype]
    context = a.max_prompt + a.max_new

    # --- the model, built and saved by transformers --------------------------------------------------
    torch.manual_seed(a.seed)
    config = transformers.LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.d_model, intermediate_size=a.hidden, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
        max_position_embeddings=context, rms_norm_eps=1e-5, initializer_range=a.init, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    hf = transformers.LlamaForCausalLM(config).to(tdtype).eval()
    params = sum(p.numel() for p in hf.parameters())
    tmp = tempfile.TemporaryDirectory()
    hf.save_pretrained(tmp.name)  # safetensors in the model's dtype
    lc.train_tokenizer(300).save(str(Path(tmp.name) / "tokenizer.json"))  # the loader wants one; ids are random
    t0 = time.perf_counter()
    ckpt = lc.load(tmp.name, dtype=a.dtype)
    load_s = time.perf_counter() - t0
    hf = hf.to("cuda")

    # --- the prompts ---------------------------------------------------------------------------------
    rng = np.random.default_rng(a.seed)
    lens = rng.integers(a.min_prompt, a.max_prompt + 1, size=a.batch).astype(np.int32)
    lens[0] = a.max_prompt
    prompts = np.full((a.batch, int(lens.max())), -1, dtype=np.int32)
    for r, n in enumerate(lens):
        prompts[r, :n] = rng.integers(0, a.vocab, size=n)
    outs = np.full(a.batch, a.max_new, dtype=np.int32)
    bs = a.block_size
    kv_blocks = int(np.sum(-(-(lens + outs) // bs)))  # room for every sequence at once: no preemption
    kv_blocks = max(kv_blocks, -(-context // bs))
    print(f"model: {ckpt.model.describe()}, {params / 1e6:.0f}M parameters, {a.dtype}; on {DEVICE.describe()}")
    print(f"requests: {a.batch} prompts of {lens.min()}..{lens.max()} tokens (mean {lens.mean():.0f}), "
          f"{a.max_new} new each; engine KV budget {kv_blocks} pages x {bs}")

    # --- the engine ----------------------------------------------------------------------------------
    def fresh_engine(**kw):
        engine = eng.Engine(ckpt.model, bs, kv_blocks, dtype=a.dtype, **kw)
        for r in range(a.batch):
            engine.add_request(r, prompts[r, :lens[r]], int(outs[r]))
        return engine

    # Served twice, timed both times: the first run compiles what the workload's shapes ask for (Numba
    # specialisations, CuPy's reductions) on top of a tiny warm-up; the second is a server that has
    # been up a while. transformers gets the same: its warm-up is the whole batch too.
    eng.serve(ckpt.model, prompts[:2], lens[:2].copy(), np.full(2, 2, np.int32), bs, kv_blocks, dtype=a.dtype)  # JIT
    engine_runs = []
    for _ in range(2):
        # The engine built (weights to the device, the caches allocated) before the clock starts, as the
        # transformers model is moved to the GPU before its: both times are serving only.
        t0 = time.perf_counter()
        engine = fresh_engine()
        torch.cuda.synchronize()
        setup_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        outputs = engine.run()
        torch.cuda.synchronize()
        engine_runs.append(time.perf_counter() - t0)
    engine_first_s, engine_s = engine_runs
    # The same engine with its sublayer edges as CuPy expressions (Engine(fused=False): RMSNorm, the
    # residual adds and SwiGLU a kernel an operation), warmed the same way: what the fusion buys.
    eng.serve(ckpt.model, prompts[:2], lens[:2].copy(), np.full(2, 2, np.int32), bs, kv_blocks, dtype=a.dtype,
              fused=False)
    unfused_runs = []
    for _ in range(2):
        unfused = fresh_engine(fused=False)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        unfused.run()
        torch.cuda.synchronize()
        unfused_runs.append(time.perf_counter() - t0)
    unfused_s = unfused_runs[1]
    # The split: every phase synchronised on its way in and out (slower than the runs above).
    phased = fresh_engine(profile=True)
    phased.run()
    phases = dict(phased.stats.phases)
    if a.profile:
        import cProfile

        profiled = fresh_engine()
        with cProfile.Profile() as prof:
            profiled.run()
        prof.dump_stats(a.profile)
    got = np.full((a.batch, a.max_new), -1, dtype=np.int32)
    for r, out in outputs.items():
        got[r, :len(out)] = out
    st = engine.stats
    margins = [st.margins[r] for r in range(a.batch)]

    # --- transformers: one left-padded batch, then bucket by bucket ---------------------------------
    def generate(rows, scored=False):
        """The rows' greedy tokens (and, scored, each token's top-2 logit gap: (tokens, gaps))."""
        width = int(lens[rows].max())
        ids = torch.zeros((len(rows), width), dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            n = int(lens[r])
            ids[j, width - n:] = torch.from_numpy(prompts[r, :n].astype(np.int64))
            mask[j, width - n:] = 1
        with torch.no_grad():
            # eos_token_id None: every row generates exactly max_new tokens, as the engine does
            out = hf.generate(ids.cuda(), attention_mask=mask.cuda(), max_new_tokens=a.max_new, do_sample=False,
                              pad_token_id=0, eos_token_id=None, output_scores=scored,
                              return_dict_in_generate=scored)
        seq = out.sequences if scored else out
        tokens = seq[:, width:].cpu().numpy().astype(np.int32)
        if not scored:
            return tokens
        top2 = torch.stack(out.scores, dim=1).float().topk(2, dim=-1).values  # (rows, max_new, 2)
        return tokens, (top2[..., 0] - top2[..., 1]).cpu().numpy()

    every = list(range(a.batch))
    generate(every)  # warm-up: the whole batch, as the engine's
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    hf_batch = generate(every)
    torch.cuda.synchronize()
    hf_batch_s = time.perf_counter() - t0
    buckets = {}
    for r in every:
        buckets.setdefault(int(lens[r] - 1) // a.bucket, []).append(r)
    hf_bucket = np.empty_like(hf_batch)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for rows in buckets.values():
        hf_bucket[rows] = generate(rows)
    torch.cuda.synchronize()
    hf_bucket_s = time.perf_counter() - t0
    # fp16: both sides round, in different places (transformers its residual stream and logits, the
    # engine its activations and cache), so where they part, which one left the model? The arbiter is
    # the same weights in float32 (transformers, upcast), greedy on the padded batch, with its own top-2
    # gaps: the engine is held to it, and transformers' fp16 run is compared with it the same way.
    ref32 = None
    if a.dtype == "float16":
        hf.float()
        ref32, gaps32 = generate(every, scored=True)

    # --- the report ----------------------------------------------------------------------------------
    generated = a.batch * a.max_new
    padded = 1 - float(lens.sum()) / (a.batch * lens.max())
    rows = [("engine, first run", engine_first_s),
            ("engine (paged, continuous batching)", engine_s),
            ("engine, sublayer edges unfused (CuPy)", unfused_s),
            ("transformers generate, one padded batch", hf_batch_s),
            (f"transformers generate, {len(buckets)} buckets of {a.bucket}", hf_bucket_s)]
    print(f"\n{'':44s} {'seconds':>9s} {'tokens/s':>10s}")
    for name, sec in rows:
        print(f"{name:44s} {sec:9.3f} {generated / sec:10,.0f}")
    print(f"(the padded batch is {100 * padded:.0f} % padding in its prompts)")
    rest = st.seconds - st.attention_seconds
    share = 100 * st.attention_seconds / st.seconds
    print(f"engine time split: attention {st.attention_seconds:.3f} s ({share:.0f} %), "
          f"the rest (matmuls, norms, the fused RoPE kernel, scheduling, the host) {rest:.3f} s; "
          f"{st.steps} steps, {st.preemptions} preemptions, peak {st.peak_running} sequences at once; "
          f"checkpoint load {load_s:.2f} s, engine setup (weights to the device, the caches) {setup_s:.2f} s")
    total = sum(phases.values())
    split = sorted(phases.items(), key=lambda kv: -kv[1])
    print(f"engine phases (each synchronised; {total:.3f} s in all): "
          + ", ".join(f"{k} {v:.3f} s ({100 * v / total:.0f} %)" for k, v in split))
    result = {"config": {k: getattr(a, k) for k in ("layers", "d_model", "heads", "kv_heads", "head_dim", "hidden",
                                                    "vocab", "batch", "min_prompt", "max_prompt", "max_new",
                                                    "block_size", "bucket", "dtype", "init", "seed")},
              "parameters": params, "device": DEVICE.describe(), "tie": tie, "prompt_padding": padded,
              "engine": {"seconds": engine_s, "tokens_per_s": generated / engine_s, "run_seconds": st.seconds,
                         "first_run_seconds": engine_first_s, "unfused_seconds": unfused_s, "phases": phases,
                         "setup_seconds": setup_s,
                         "attention_seconds": st.attention_seconds, "rest_seconds": rest, "steps": st.steps,
                         "preemptions": st.preemptions, "peak_running": st.peak_running},
              "transformers_batch": {"seconds": hf_batch_s, "tokens_per_s": generated / hf_batch_s},
              "transformers_buckets": {"seconds": hf_bucket_s, "tokens_per_s": generated / hf_bucket_s,
                                       "buckets": len(buckets)}}
    ok = True
    for name, ref in (("one padded batch", hf_batch), ("by bucket", hf_bucket)):
        same, ties, bad, agree = compare(got, ref, margins, tie)
        print(f"greedy tokens vs generate ({name}): {same}/{a.batch} requests identical, {len(ties)} diverge at a "
              f"near-tie (engine's top-2 gap < {tie:g}), {len(bad)} diverge at a clear gap; {agree}/{generated} "
              f"tokens ({100 * agree / generated:.1f} %) agree before each request's first divergence")
        for note in ties + bad:
            print("     " + note)
        ok &= ref32 is not None or not bad  # in fp16 the float32 model below is the judge
        result[f"match_{'batch' if name.startswith('one') else 'buckets'}"] = {
            "identical": same, "near_ties": ties, "mismatches": bad, "tokens_agreeing": agree}
    if ref32 is not None:
        for name, key, toks in (("the engine in fp16", "engine", got), ("generate in fp16", "transformers", hf_batch)):
            same, ties, bad, agree = compare(toks, ref32, gaps32, tie)
            print(f"greedy tokens, {name} vs the same weights in float32 (transformers): {same}/{a.batch} "
                  f"identical, {len(ties)} diverge at a near-tie (float32 top-2 gap < {tie:g}), {len(bad)} at a "
                  f"clear gap; {agree}/{generated} tokens ({100 * agree / generated:.1f} %) agree before each "
                  "request's first divergence")
            for note in bad:
                print("     " + note)
            if key == "engine":
                ok &= not bad
            result[f"vs_float32_{key}"] = {"identical": same, "near_ties": ties, "mismatches": bad,
                                           "tokens_agreeing": agree}
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2, default=float))
        print(f"wrote {a.json}")
    tmp.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
