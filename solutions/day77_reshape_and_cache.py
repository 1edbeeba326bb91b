"""Day 77: reshape-and-cache -- write new tokens' K and V into their pages through the slot mapping.

Every forward pass ends its attention layers' input side the same way: the new tokens' keys and
values (num_tokens, num_kv_heads, head_dim) are scattered into the paged cache, token i into slot
slot_mapping[i] = page * block_size + offset (day 76). A negative slot marks a padding token: skip it.

v1 naive      one thread per element: div/mod to find (token, element), another div/mod to turn the
              slot into (page, offset), for every 2-byte element of K and of V.
v2 optimized  one CUDA block per token: the slot is read once and the whole block skips a padding
              token together; a token's row (num_kv_heads * head_dim elements) is contiguous in the
              input and in the cache, so the block copies K's and V's rows as machine words,
              coalesced, four words in flight per thread and no division.

Cache layout: kv_cache (2, num_blocks, block_size, num_kv_heads, head_dim), kv_cache[0] keys and
kv_cache[1] values; the host function writes it in place (device arrays) and returns it.

Napkin math: a float16 token row of 8 KV heads x 128 is 2 KB; K and V of 65,536 tokens are 268 MB
read and 268 MB written: ~0.13 ms at the H200's ~4.1 TB/s copy rate. A decode step writes one token
per sequence (256 sequences: 1 MB): there the launch, not the copy, sets the time.
"""

import numpy as np

from course import cuda, launch
from course.launch import word_dtype
from solutions.day76_block_tables import BlockManager

TITLE = "Reshape-and-cache"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
# n = num_tokens, or (num_tokens, block_size, num_kv_heads, head_dim, dtype).
TEST_SIZES = (1, 4, 5, 37, (13, 3, 1, 6, "float16"), (19, 8, 2, 4, "float32"), (9, 2, 1, 3, "float16"))
BENCH_SIZES = ((65536, 16, 8, 128, "float16"),)
BOUND = "memory"
THREADS = 256
TOKEN_THREADS = 128
PAD_SLOT = -1


def _geometry(n):
    if isinstance(n, (tuple, list)):
        tokens, block_size, heads, head_dim, dtype = n
        return int(tokens), int(block_size), int(heads), int(head_dim), np.dtype(dtype)
    return int(n), 4, 2, 8, np.dtype(np.float16)


def make_inputs(n, seed: int = 0):
    """A batch of prompts placed by day 76's BlockManager, about one token in eight padding.

    The cache holds old tokens everywhere except the new tokens' slots, which hold NaN: a token that
    never lands stays NaN, and a write to a wrong slot clobbers an old token.
    """
    num_tokens, block_size, heads, head_dim, dtype = _geometry(n)
    rng = np.random.default_rng(seed)
    is_pad = rng.random(num_tokens) < 0.125
    is_pad[rng.integers(num_tokens)] = False  # at least one real token
    real = int((~is_pad).sum())
    # Split the real tokens into a few sequences and let a BlockManager place them.
    cuts = np.sort(rng.choice(np.arange(1, real), size=min(3, real - 1), replace=False)) if real > 1 else []
    lengths = np.diff(np.concatenate([[0], cuts, [real]])).astype(int)
    num_blocks = int(sum(-(-n_ // block_size) for n_ in lengths)) * 2 + 2
    bm = BlockManager(num_blocks, block_size)
    for i in range(num_blocks):  # a pool that has seen traffic: its free pages come out shuffled
        bm.allocate(("old", i), 1)
    for i in rng.permutation(num_blocks):
        bm.free(("old", int(i)))
    slots = []
    for seq, length in enumerate(lengths):
        bm.allocate(seq, int(length))
        slots += bm.slot_mapping(seq)
    slot_mapping = np.full(num_tokens, PAD_SLOT, dtype=np.int64)
    slot_mapping[~is_pad] = slots
    key = rng.standard_normal((num_tokens, heads, head_dim)).astype(dtype)
    value = rng.standard_normal((num_tokens, heads, head_dim)).astype(dtype)
    kv_cache = rng.standard_normal((2, num_blocks, block_size, heads, head_dim)).astype(dtype)
    rows = kv_cache.reshape(2, num_blocks * block_size, heads, head_dim)
    rows[:, slot_mapping[~is_pad]] = np.nan
    return key, value, kv_cache, slot_mapping


def reference(key, value, kv_cache, slot_mapping):
    out = kv_cache.copy()
    rows = out.reshape((2, -1) + kv_cache.shape[3:])  # (2, num_slots, num_kv_heads, head_dim)
    for i, slot in enumerate(slot_mapping):
        if slot >= 0:
            rows[0, slot] = key[i]
            rows[1, slot] = value[i]
    return out


def traffic(key, value, kv_cache, slot_mapping):
    real = int((np.asarray(slot_mapping) >= 0).sum())
    row_bytes = int(np.prod(key.shape[1:])) * key.itemsize
    return 2 * 2 * row_bytes * real + slot_mapping.nbytes, 0


@cuda.jit
def reshape_and_cache_naive_kernel(key, value, key_cache, value_cache, slot_mapping):
    # key, value: (num_tokens, row); key_cache, value_cache: (num_blocks, block_size, row)
    """One thread per element of key: i = t * row + e. Guard i < num_tokens * row, skip a negative slot,
    split the slot into page = slot // block_size and offset = slot % block_size, and write
    key[t, e] into key_cache[page, offset, e] and value[t, e] into value_cache[page, offset, e]."""
    # EXERCISE: t, e from i with // and -; guard i and padding; page, offset from the slot by block_size; K and V
    i = cuda.grid(1)
    row = key.shape[1]
    if i >= key.shape[0] * row:
        return
    t = i // row
    e = i - t * row
    slot = slot_mapping[t]
    if slot < 0:  # padding: a negative index would write before the start of the cache
        return
    block_size = key_cache.shape[1]
    # Two divisions per element, again for every element of the same token: 64-bit integer division
    # is a software routine on the GPU, so this index math costs more than the 2-byte copy it guards.
    page = slot // block_size
    offset = slot % block_size
    key_cache[page, offset, e] = key[t, e]
    value_cache[page, offset, e] = value[t, e]


@cuda.jit
def reshape_and_cache_kernel(key_words, value_words, cache_words, slot_mapping):
    # key_words, value_words: (num_tokens, row_words); cache_words: (2, num_slots, row_words)
    """One CUDA block per token t = blockIdx.x. Seen as rows of slots, the cache needs no (page, offset)
    split: token t's K row goes to cache_words[0, slot] and its V row to cache_words[1, slot], word by
    word: w = threadIdx.x, then w += blockDim.x. A padding token (slot < 0) makes the whole block
    return at once. Stretch: two words of K and two of V per trip, all four loads before the stores."""
    # EXERCISE: read the slot once, return if negative; threads stride over the row's words writing K and V
    t = cuda.blockIdx.x
    slot = slot_mapping[t]  # one address for the whole block: a single broadcast load
    if slot < 0:
        return  # the whole block leaves together: no divergence inside a warp
    words = key_words.shape[1]
    step = cuda.blockDim.x
    w = cuda.threadIdx.x
    # K and V rows side by side, two words of each per trip: four independent loads in flight.
    while w + step < words:
        k0 = key_words[t, w]
        k1 = key_words[t, w + step]
        v0 = value_words[t, w]
        v1 = value_words[t, w + step]
        cache_words[0, slot, w] = k0
        cache_words[0, slot, w + step] = k1
        cache_words[1, slot, w] = v0
        cache_words[1, slot, w + step] = v1
        w += 2 * step
    if w < words:
        cache_words[0, slot, w] = key_words[t, w]
        cache_words[1, slot, w] = value_words[t, w]


_NAIVE_SIG = ("void(float16[:, ::1], float16[:, ::1], float16[:, :, ::1], float16[:, :, ::1], "
              "int64[::1])")
_OPT_SIG = "void(uint64[:, ::1], uint64[:, ::1], uint64[:, :, ::1], int64[::1])"
KERNELS = {"naive": (reshape_and_cache_naive_kernel, _NAIVE_SIG),
           "optimized": (reshape_and_cache_kernel, _OPT_SIG)}


def _check(key, value, kv_cache, slot_mapping):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError("kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    _, num_blocks, block_size, heads, head_dim = kv_cache.shape
    launch.check_array("key", key, dtype=kv_cache.dtype, shape=(None, heads, head_dim))
    launch.check_array("value", value, dtype=kv_cache.dtype, shape=key.shape)
    launch.check_array("slot_mapping", slot_mapping, dtype=np.int64, shape=(key.shape[0],))
    if isinstance(slot_mapping, np.ndarray):  # a device mapping is trusted: checking it costs a copy
        real = slot_mapping[slot_mapping >= 0]
        if real.size and real.max() >= num_blocks * block_size:
            raise ValueError(f"slot_mapping: slots must be < {num_blocks * block_size} "
                             f"({num_blocks} blocks of {block_size}), got {int(real.max())}")
        if len(np.unique(real)) != real.size:
            raise ValueError("slot_mapping: two tokens write the same slot")


def naive(key, value, kv_cache, slot_mapping):
    _check(key, value, kv_cache, slot_mapping)
    d_key, d_value, d_cache, d_slots = launch.to_device(key, value, kv_cache, slot_mapping)
    _, num_blocks, block_size, heads, head_dim = d_cache.shape
    num_tokens, row = key.shape[0], heads * head_dim
    if num_tokens:
        caches = d_cache.reshape(2, num_blocks, block_size, row)
        reshape_and_cache_naive_kernel[launch.blocks(num_tokens * row, THREADS), THREADS](
            d_key.reshape(num_tokens, row), d_value.reshape(num_tokens, row), caches[0], caches[1], d_slots)
    return launch.result(d_cache, key, value, kv_cache, slot_mapping)


def optimized(key, value, kv_cache, slot_mapping):
    _check(key, value, kv_cache, slot_mapping)
    d_key, d_value, d_cache, d_slots = launch.to_device(key, value, kv_cache, slot_mapping)
    _, num_blocks, block_size, heads, head_dim = d_cache.shape
    num_tokens, row = key.shape[0], heads * head_dim
    if num_tokens:
        word = word_dtype(row * d_cache.dtype.itemsize)
        cache_words = d_cache.reshape(2, num_blocks * block_size, row).view(word)
        key_words = d_key.reshape(num_tokens, row).view(word)
        value_words = d_value.reshape(num_tokens, row).view(word)
        threads = min(TOKEN_THREADS, 32 * -(-key_words.shape[1] // 64))  # two words per thread
        reshape_and_cache_kernel[num_tokens, max(32, threads)](key_words, value_words, cache_words, d_slots)
    return launch.result(d_cache, key, value, kv_cache, slot_mapping)


def library(key, value, kv_cache, slot_mapping):
    """The same scatter as CuPy fancy indexing (the padding filter costs an extra pass)."""
    import cupy

    cache, slots = cupy.asarray(kv_cache), cupy.asarray(slot_mapping)
    rows = cache.reshape((2, -1) + cache.shape[3:])
    real = slots >= 0
    rows[0, slots[real]] = cupy.asarray(key)[real]
    rows[1, slots[real]] = cupy.asarray(value)[real]
    return cache
