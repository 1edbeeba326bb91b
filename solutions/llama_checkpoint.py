"""Hugging Face Llama and Qwen2 checkpoints for the day-90 serving engine.

A checkpoint is a directory on disk (nothing is fetched): ``config.json``, the weights in ``*.safetensors``
(one ``model.safetensors`` or shards listed by ``model.safetensors.index.json``; float32, float16 or
bfloat16) and ``tokenizer.json``. :func:`load` checks the config against what the engine runs, checks
every tensor's name, dtype and shape before reading any of them, and maps them onto day 90's layout:

    HF (out_features, in_features), y = x @ W.T        engine (in, out), y = x @ W
    q_proj, k_proj, v_proj                          -> wqkv.{i} = [q.T | k.T | v.T]  (d_model, (H + 2 KVH) D)
    q/k/v_proj.bias (Qwen2)                         -> bqkv.{i} = [q | k | v]
    o_proj, gate_proj, up_proj, down_proj           -> wo, wgate, wup, wdown, transposed
    input_layernorm, post_attention_layernorm, norm -> norm1.{i}, norm2.{i}, norm_f
    embed_tokens, lm_head (embed_tokens when tied)  -> embed (vocab, d_model), lm_head (d_model, vocab)

No permutation of q and k: Hugging Face's Llama checkpoints are stored for rotate-half RoPE (pair p is
(x[p], x[p + D/2])), the convention of day 90's kernel. Weights are read in their file's dtype and held in
the dtype the engine will run (``load(..., dtype=...)``):

- float32: every tensor widened (fp16 and bf16 widen to fp32 exactly).
- float16: the matrices in fp16, the norm gains and q/k/v biases in float32 (day 90's ``holds_fp16``).
  An fp16 file is kept as it is. A bf16 value has 8 significant bits to fp16's 11, so it converts exactly
  in fp16's normal range (6.1e-5 <= |x| <= 65504); smaller ones lose low bits (under 6e-8 they become 0).
  bf16 reaches 3.4e38 like fp32: a value past 65504 would become inf in fp16, and the loader refuses it,
  naming the tensor and the index, rather than serve a model that turns rows of activations into inf and
  NaN; such a checkpoint is served in float32. Each tensor is converted once, at load.

Napkin math: SmolLM2-135M is 135M parameters, 0.54 GB in float32, 0.27 GB in fp16; its K/V take 2 x 30
layers x 3 KV heads x 64 x 4 B = 46 KB per token in float32, 23 KB in fp16.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from solutions.day78_paged_attention_v1 import HEAD_DIMS
from solutions.day90_serving_engine import DTYPES as ENGINE_DTYPES
from solutions.day90_serving_engine import Model, ModelConfig, rope_table, to_float16

ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM")
DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}  # safetensors' names -> NumPy's
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # older checkpoints store RoPE's frequencies; they are recomputed


class Checkpoint(NamedTuple):
    model: Model
    tokenizer: object  # tokenizers.Tokenizer
    architecture: str
    eos_token_ids: tuple  # generation stops being meaningful after one of these
    path: Path


# --- config.json -----------------------------------------------------------------------------------


def _read_json(path: Path, what: str) -> dict:
    if not path.is_file():
        raise ValueError(f"{path}: no {what} (expected a Hugging Face model directory)")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: malformed JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _field(cfg: dict, key: str, kind, default=None):
    """cfg[key] (or the default), which must be a positive int (kind int) or number (kind (int, float))."""
    value = cfg.get(key, default)
    if value is None:
        raise ValueError(f"config.json: missing {key!r}")
    if not isinstance(value, kind) or isinstance(value, bool) or value <= 0:
        what = "integer" if kind is int else "number"
        raise ValueError(f"config.json: {key!r} must be a positive {what}, got {value!r}")
    return value


def rope_inv_freq(head_dim: int, theta: float, rope_scaling: dict | None) -> np.ndarray:
    """RoPE's per-pair frequencies (head_dim // 2,) float64: theta ** (-2p / head_dim), rescaled by
    Llama-3's rope_scaling (rope_type "llama3") when given: wavelengths beyond the original context
    / low_freq_factor slow down by factor, those under / high_freq_factor stay, the band between blends."""
    inv_freq = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if rope_scaling is None:
        return inv_freq
    if not isinstance(rope_scaling, dict):
        raise ValueError(f"config.json: 'rope_scaling' must be an object or null, got {rope_scaling!r}")
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind == "default" or (kind is None and "factor" not in rope_scaling):  # e.g. {"rope_theta": ...} only
        return inv_freq
    if kind != "llama3":
        raise ValueError(f"config.json: rope_scaling type {kind!r} is not supported (the engine takes 'llama3' "
                         f"or none)")
    try:
        factor, low, high, old = (float(rope_scaling[k]) for k in (
            "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
    except KeyError as exc:
        raise ValueError(f"config.json: rope_scaling 'llama3' lacks {exc.args[0]!r}") from None
    except (TypeError, ValueError):
        raise ValueError(f"config.json: rope_scaling 'llama3' values must be numbers, got {rope_scaling!r}") from None
    if factor <= 0 or low <= 0 or high <= low or old <= 0:
        raise ValueError(f"config.json: rope_scaling 'llama3' needs factor > 0 and 0 < low_freq_factor < "
                         f"high_freq_factor, got {rope_scaling!r}")
    wavelen = 2 * math.pi / inv_freq
    low_wavelen, high_wavelen = old / low, old / high
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return np.where(wavelen > low_wavelen, inv_freq / factor, np.where(wavelen < high_wavelen, inv_freq, blended))


def read_config(path, *, max_len: int | None = None) -> tuple[ModelConfig, dict]:
    """(ModelConfig, facts) from a checkpoint's config.json; ValueError naming whatever the engine does not
    run. facts: architecture, tie_word_embeddings, qkv_bias, inv_freq, eos_token_ids.
    max_len: serve a shorter context than max_position_embeddings (a smaller RoPE table and cache)."""
    cfg = _read_json(Path(path) / "config.json", "config.json")
    archs = cfg.get("architectures")
    if not (isinstance(archs, list) and len(archs) == 1 and isinstance(archs[0], str)):
        raise ValueError(f"config.json: 'architectures' must list one architecture, got {archs!r}")
    arch = archs[0]
    if arch not in ARCHITECTURES:
        raise ValueError(f"config.json: architecture {arch!r} is not supported (the engine runs "
                         f"{', '.join(ARCHITECTURES)})")
    d_model = _field(cfg, "hidden_size", int)
    num_heads = _field(cfg, "num_attention_heads", int)
    num_kv_heads = _field(cfg, "num_key_value_heads", int, num_heads)
    if d_model % num_heads and "head_dim" not in cfg:
        raise ValueError(f"config.json: hidden_size {d_model} is not a multiple of num_attention_heads {num_heads}")
    head_dim = _field(cfg, "head_dim", int, d_model // num_heads)
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"config.json: head size {head_dim} is not supported (the attention kernels take "
                         f"{', '.join(map(str, HEAD_DIMS))})")
    if num_heads % num_kv_heads:
        raise ValueError(f"config.json: num_attention_heads {num_heads} is not a multiple of num_key_value_heads "
                         f"{num_kv_heads}")
    act = cfg.get("hidden_act", "silu")
    if act != "silu":
        raise ValueError(f"config.json: hidden_act {act!r} is not supported (the engine's MLP is SwiGLU: 'silu')")
    if arch == "LlamaForCausalLM":
        for key in ("attention_bias", "mlp_bias"):
            if cfg.get(key, False):
                raise ValueError(f"config.json: {key} true is not supported on a Llama (its projections are "
                                 f"bias-free in the engine)")
        if cfg.get("sliding_window") is not None:
            raise ValueError(f"config.json: a sliding window ({cfg['sliding_window']}) is not supported (the engine "
                             f"attends over the whole context)")
    elif cfg.get("use_sliding_window", False):
        raise ValueError(f"config.json: a sliding window (use_sliding_window, {cfg.get('sliding_window')}) is not "
                         f"supported (the engine attends over the whole context)")
    context = _field(cfg, "max_position_embeddings", int)
    if max_len is not None:
        if not isinstance(max_len, int) or isinstance(max_len, bool) or not 0 < max_len <= context:
            raise ValueError(f"max_len: expected 1..{context} (the checkpoint's max_position_embeddings), got "
                             f"{max_len!r}")
        context = max_len
    rope = cfg.get("rope_parameters")  # newer transformers keep rope_theta and the scaling here
    if rope is not None and not isinstance(rope, dict):
        raise ValueError(f"config.json: 'rope_parameters' must be an object, got {rope!r}")
    scaling = cfg.get("rope_scaling") if rope is None else rope
    theta = float(_field(rope if rope is not None and "rope_theta" in rope else cfg, "rope_theta", (int, float),
                         10000.0))
    eps = float(_field(cfg, "rms_norm_eps", (int, float), 1e-6))
    eos = cfg.get("eos_token_id")
    eos = () if eos is None else tuple(eos) if isinstance(eos, list) else (eos,)
    model_cfg = ModelConfig(vocab=_field(cfg, "vocab_size", int), d_model=d_model,
                            num_layers=_field(cfg, "num_hidden_layers", int), num_heads=num_heads,
                            num_kv_heads=num_kv_heads, head_dim=head_dim,
                            hidden=_field(cfg, "intermediate_size", int), max_len=context, rope_base=theta,
                            norm_eps=eps)
    facts = {"architecture": arch, "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
             "qkv_bias": arch == "Qwen2ForCausalLM",
             "inv_freq": rope_inv_freq(head_dim, theta, scaling), "eos_token_ids": eos}
    return model_cfg, facts


# --- the weights --------------------------------------------------------------------------------------


def expected_tensors(cfg: ModelConfig, *, tie_word_embeddings: bool, qkv_bias: bool) -> dict[str, tuple]:
    """Hugging Face tensor name -> shape, for every tensor the engine needs."""
    H, G, D, E = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.d_model
    shapes = {"model.embed_tokens.weight": (cfg.vocab, E), "model.norm.weight": (E,)}
    if not tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab, E)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
                       p + "self_attn.q_proj.weight": (H * D, E), p + "self_attn.k_proj.weight": (G * D, E),
                       p + "self_attn.v_proj.weight": (G * D, E), p + "self_attn.o_proj.weight": (E, H * D),
                       p + "mlp.gate_proj.weight": (cfg.hidden, E), p + "mlp.up_proj.weight": (cfg.hidden, E),
                       p + "mlp.down_proj.weight": (E, cfg.hidden)})
        if qkv_bias:
            shapes.update({p + "self_attn.q_proj.bias": (H * D,), p + "self_attn.k_proj.bias": (G * D,),
                           p + "self_attn.v_proj.bias": (G * D,)})
    return shapes


def _weight_files(path: Path) -> dict[str, Path]:
    """Tensor name -> the safetensors file that holds it."""
    from safetensors import safe_open

    index = path / INDEX
    if index.is_file():
        weight_map = _read_json(index, INDEX).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(f, str) for f in weight_map.values()):
            raise ValueError(f"{index}: expected a 'weight_map' of tensor name -> file name")
        files = {f: path / f for f in set(weight_map.values())}
        for f in sorted(files):
            if not files[f].is_file():
                raise ValueError(f"{index}: lists {f}, which is not in {path}")
        where = {}
        for f in sorted(files):
            with safe_open(files[f], framework="numpy") as fh:
                for name in fh.keys():
                    where[name] = files[f]
        for name, f in weight_map.items():
            if where.get(name) != files[f]:
                raise ValueError(f"{index}: says {name} is in {f}, which does not hold it")
        return where
    single = path / SINGLE
    if not single.is_file():
        raise ValueError(f"{path}: no {SINGLE} or {INDEX} (expected safetensors weights)")
    with safe_open(single, framework="numpy") as fh:
        return {name: single for name in fh.keys()}


def _kept_float32(name: str) -> bool:
    """Norm gains and biases: float32 in the fp16 engine too (day 90's holds_fp16, by Hugging Face name)."""
    return name.endswith(("norm.weight", ".bias"))


def read_weights(path, cfg: ModelConfig, *, tie_word_embeddings: bool, qkv_bias: bool,
                 dtype: str = "float32") -> dict[str, np.ndarray]:
    """Every tensor the engine needs by its Hugging Face name: float32, or for dtype float16 the matrices
    in fp16 (see the module's notes: a value past fp16's range raises ValueError naming the tensor). The
    names, dtypes and shapes of all of them are checked before any is read: a bad checkpoint raises
    ValueError and loads nothing."""
    from safetensors import safe_open

    if dtype not in ENGINE_DTYPES:
        raise ValueError(f"dtype: expected one of {ENGINE_DTYPES}, got {dtype!r}")
    path = Path(path)
    want = expected_tensors(cfg, tie_word_embeddings=tie_word_embeddings, qkv_bias=qkv_bias)
    where = _weight_files(path)
    missing = [n for n in want if n not in where]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ValueError(f"{path}: missing weight {missing[0]}{more}")
    unused = [n for n in where if n not in want and not n.endswith(IGNORED_SUFFIXES)
              and not (tie_word_embeddings and n == "lm_head.weight")]
    if unused:
        raise ValueError(f"{path}: unexpected weight {unused[0]} (the engine has no place for it: is the config "
                         f"right?)")
    by_file: dict[Path, list[str]] = {}
    for name in want:
        by_file.setdefault(where[name], []).append(name)
    for f, names in by_file.items():
        with safe_open(f, framework="numpy") as fh:
            for name in names:
                sl = fh.get_slice(name)
                stored, shape = sl.get_dtype(), tuple(sl.get_shape())
                if stored not in DTYPES:
                    raise ValueError(f"{f.name}: {name} is {stored}; the loader reads {', '.join(DTYPES)}")
                if shape != want[name]:
                    raise ValueError(f"{f.name}: {name} has shape {shape}, expected {want[name]} from config.json")
    tensors = {}
    for f, names in by_file.items():
        with safe_open(f, framework="numpy") as fh:
            for name in names:
                a = fh.get_tensor(name)
                if dtype == "float16" and not _kept_float32(name):
                    tensors[name] = np.ascontiguousarray(to_float16(f"{f.name}: {name}", a))
                else:
                    tensors[name] = np.ascontiguousarray(a, dtype=np.float32)
    return tensors


def engine_weights(tensors: dict, cfg: ModelConfig, *, tie_word_embeddings: bool, qkv_bias: bool) -> dict:
    """Hugging Face tensors (as read_weights gives them) -> day 90's weight dict (see the module's table)."""
    def t(a):
        return np.ascontiguousarray(a.T)

    embed = tensors["model.embed_tokens.weight"]
    w = {"embed": embed, "norm_f": tensors["model.norm.weight"],
         "lm_head": t(embed if tie_word_embeddings else tensors["lm_head.weight"])}
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        qkv = [tensors[p + f"self_attn.{n}_proj.weight"] for n in "qkv"]
        w.update({f"norm1.{i}": tensors[p + "input_layernorm.weight"],
                  f"wqkv.{i}": t(np.concatenate(qkv, axis=0)),  # columns [q heads | k heads | v heads]
                  f"wo.{i}": t(tensors[p + "self_attn.o_proj.weight"]),
                  f"norm2.{i}": tensors[p + "post_attention_layernorm.weight"],
                  f"wgate.{i}": t(tensors[p + "mlp.gate_proj.weight"]),
                  f"wup.{i}": t(tensors[p + "mlp.up_proj.weight"]),
                  f"wdown.{i}": t(tensors[p + "mlp.down_proj.weight"])})
        if qkv_bias:
            w[f"bqkv.{i}"] = np.concatenate([tensors[p + f"self_attn.{n}_proj.bias"] for n in "qkv"])
    return w


# --- tokenizer.json and text -------------------------------------------------------------------------


def load_tokenizer(path, vocab: int):
    from tokenizers import Tokenizer

    f = Path(path) / "tokenizer.json"
    if not f.is_file():
        raise ValueError(f"{Path(path)}: no tokenizer.json")
    try:
        tok = Tokenizer.from_file(str(f))
    except Exception as exc:  # the Rust side raises its own Exception type
        raise ValueError(f"{f}: not a tokenizers file ({str(exc).splitlines()[0]})") from None
    if tok.get_vocab_size() > vocab:
        raise ValueError(f"{f}: {tok.get_vocab_size()} tokens, more than the model's vocab_size {vocab}")
    return tok


def load(path, *, max_len: int | None = None, dtype: str = "float32") -> Checkpoint:
    """The engine's Model and the tokenizer of a Hugging Face checkpoint directory. ``dtype``: the engine's
    (day 90's DTYPES); float16 holds the matrices in fp16 (see the module's notes on bf16)."""
    path = Path(path)
    if not path.is_dir():
        raise ValueError(f"{path}: not a directory (the loader reads a checkpoint on disk; nothing is downloaded)")
    cfg, facts = read_config(path, max_len=max_len)
    tokenizer = load_tokenizer(path, cfg.vocab)
    tied, bias = facts["tie_word_embeddings"], facts["qkv_bias"]
    tensors = read_weights(path, cfg, tie_word_embeddings=tied, qkv_bias=bias, dtype=dtype)
    weights = engine_weights(tensors, cfg, tie_word_embeddings=tied, qkv_bias=bias)
    model = Model.from_weights(cfg, weights, rope_table(cfg, facts["inv_freq"]))
    return Checkpoint(model, tokenizer, facts["architecture"], facts["eos_token_ids"], path)


def encode_prompts(ckpt: Checkpoint, texts, max_new: int) -> list[list[int]]:
    """Token ids of each prompt (with the tokenizer's own special tokens, e.g. a BOS); ValueError when one
    is empty or its tokens plus max_new exceed the model's context."""
    out = []
    limit = ckpt.model.cfg.max_len
    for r, text in enumerate(texts):
        ids = ckpt.tokenizer.encode(text).ids
        if not ids:
            raise ValueError(f"prompt {r}: {text!r} encodes to no tokens")
        if len(ids) + max_new > limit:
            raise ValueError(f"prompt {r}: {len(ids)} tokens + {max_new} new exceed the model's context of "
                             f"{limit} tokens")
        out.append(ids)
    return out


def decode(ckpt: Checkpoint, tokens) -> tuple[str, int]:
    """(text, tokens used): the generated tokens up to the first end-of-sequence token, as text."""
    tokens = [int(t) for t in tokens]
    n = next((i for i, t in enumerate(tokens) if t in ckpt.eos_token_ids), len(tokens))
    return ckpt.tokenizer.decode(tokens[:n], skip_special_tokens=True), n


# --- a tiny checkpoint, for tests and the simulator ----------------------------------------------------

SENTENCES = (
    "Once upon a time there was a little cache that held the keys and values of every token.",
    "The kernel reads each page of the block table once, and the warp shares the softmax.",
    "A paged cache takes one more page only when the last one fills.",
    "Greedy decoding picks the token with the largest logit at every step.",
    "The quick brown fox jumps over the lazy dog.",
)
EOS = "<|endoftext|>"


def train_tokenizer(vocab: int, sentences=SENTENCES):
    """A byte-level BPE of at most ``vocab`` tokens (256 bytes, the end-of-text token, merges) trained on
    the sentences: any text encodes, and decodes back to itself."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab < 257:
        raise ValueError(f"vocab: a byte-level BPE needs at least 257 tokens (256 bytes + {EOS}), got {vocab}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[EOS], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(sentences), trainer)
    return tok


def write_tiny_checkpoint(path, *, dtype: str = "float32", seed: int = 0, architecture: str = "LlamaForCausalLM",
                          tie_word_embeddings: bool = False, shards: int = 1, num_layers: int = 2, d_model: int = 128,
                          num_heads: int = 4, num_kv_heads: int = 2, head_dim: int | None = None,
                          hidden: int = 256, vocab: int = 300, max_position_embeddings: int = 64,
                          rope_theta: float = 10000.0, rms_norm_eps: float = 1e-5, rope_scaling: dict | None = None,
                          scale: float = 1.0) -> dict[str, np.ndarray]:
    """Write a random Hugging Face-format checkpoint (config.json, safetensors in ``dtype``, split over
    ``shards`` files with an index when shards > 1, tokenizer.json) to ``path``; return its tensors by
    name, as float32 after rounding to ``dtype`` (what a loader should read back)."""
    import ml_dtypes
    from safetensors.numpy import save_file

    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture: expected one of {ARCHITECTURES}, got {architecture!r}")
    np_dtype = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(dtype)
    if np_dtype is None:
        raise ValueError(f"dtype: expected float32, float16 or bfloat16, got {dtype!r}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(vocab)
    tok.save(str(path / "tokenizer.json"))
    eos = tok.token_to_id(EOS)
    head_dim = head_dim or d_model // num_heads
    cfg = ModelConfig(vocab, d_model, num_layers, num_heads, num_kv_heads, head_dim, hidden,
                      max_position_embeddings, rope_theta, rms_norm_eps)
    qkv_bias = architecture == "Qwen2ForCausalLM"
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in expected_tensors(cfg, tie_word_embeddings=tie_word_embeddings, qkv_bias=qkv_bias).items():
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            a = 1 + 0.1 * rng.standard_normal(shape)
        elif name == "model.embed_tokens.weight":
            a = rng.standard_normal(shape)
        elif name.endswith(".bias"):
            a = 0.2 * rng.standard_normal(shape)
        else:  # (out, in): activations stay O(1) through every layer
            a = scale * rng.standard_normal(shape) / math.sqrt(shape[1])
        tensors[name] = a.astype(np_dtype)
    names = list(tensors)
    if shards > 1:
        parts = np.array_split(np.arange(len(names)), shards)
        weight_map = {}
        for k, part in enumerate(parts):
            f = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
            save_file({names[j]: tensors[names[j]] for j in part}, str(path / f), metadata={"format": "pt"})
            weight_map.update({names[j]: f for j in part})
        total = sum(a.nbytes for a in tensors.values())
        (path / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    else:
        save_file(tensors, str(path / SINGLE), metadata={"format": "pt"})
    config = {"architectures": [architecture], "model_type": "llama" if not qkv_bias else "qwen2",
              "hidden_size": d_model, "intermediate_size": hidden, "num_hidden_layers": num_layers,
              "num_attention_heads": num_heads, "num_key_value_heads": num_kv_heads, "hidden_act": "silu",
              "max_position_embeddings": max_position_embeddings, "rms_norm_eps": rms_norm_eps,
              "rope_theta": rope_theta, "rope_scaling": rope_scaling, "tie_word_embeddings": tie_word_embeddings,
              "vocab_size": vocab, "bos_token_id": eos, "eos_token_id": eos, "torch_dtype": dtype}
    if head_dim != d_model // num_heads:
        config["head_dim"] = head_dim
    if qkv_bias:
        config.update(use_sliding_window=False, sliding_window=None)
    else:
        config.update(attention_bias=False, mlp_bias=False)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return {name: a.astype(np.float32) for name, a in tensors.items()}
