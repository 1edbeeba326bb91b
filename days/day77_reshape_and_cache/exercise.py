"""Day 77 exercise: reshape-and-cache -- write new tokens' K and V into their pages by slot_mapping.

Token i goes to slot slot_mapping[i] = page * block_size + offset; a negative slot is padding and
writes nothing. Write the two kernels; validation, the word views and the host functions are given.
kv_cache is (2, num_blocks, block_size, num_kv_heads, head_dim): kv_cache[0] keys, kv_cache[1] values.
Grade with:  make check DAY=77
"""

import numpy as np

from course import cuda, launch
from course.launch import word_dtype

TITLE = "Reshape-and-cache"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
THREADS = 256
TOKEN_THREADS = 128
PAD_SLOT = -1


@cuda.jit
def reshape_and_cache_naive_kernel(key, value, key_cache, value_cache, slot_mapping):
    # key, value: (num_tokens, row); key_cache, value_cache: (num_blocks, block_size, row)
    """One thread per element of key: i = t * row + e. Guard i < num_tokens * row, skip a negative slot,
    split the slot into page = slot // block_size and offset = slot % block_size, and write
    key[t, e] into key_cache[page, offset, e] and value[t, e] into value_cache[page, offset, e]."""
    raise NotImplementedError("Day 77: t, e from i with // and -; guard i and padding; page, offset = "
                              "divmod of the slot by block_size; write K and V (12 lines)")


@cuda.jit
def reshape_and_cache_kernel(key_words, value_words, cache_words, slot_mapping):
    # key_words, value_words: (num_tokens, row_words); cache_words: (2, num_slots, row_words)
    # One block per token. Seen as rows of slots, the cache needs no (page, offset) split.
    """One CUDA block per token t = blockIdx.x. The cache is seen as rows of slots, so token t's K row goes
    to cache_words[0, slot] and its V row to cache_words[1, slot], word by word: w = threadIdx.x, then
    w += blockDim.x. A padding token (slot < 0) makes the whole block return at once.
    Stretch: two words of K and two of V per trip, all four loads before the stores."""
    raise NotImplementedError("Day 77: t = blockIdx.x; read the slot once, return if negative; threads "
                              "stride over the row's words writing K to cache_words[0, slot] and V to [1, "
                              "slot] (8-20 lines)")


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


