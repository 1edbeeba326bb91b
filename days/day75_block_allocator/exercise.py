"""Day 75 exercise: the block allocator (host) and copy_blocks (kernel).

Write, in this order:
  1. LinearScanAllocator.allocate / free   -- a used-flag per block, scan for the first free one.
  2. BlockAllocator.allocate / incref / free -- a stack of free ids and a reference count per block.
  3. copy_blocks_naive_kernel              -- one thread copies one whole page.
  4. copy_blocks_kernel                    -- one CUDA block copies one page as machine words.

The cache is kv_cache (2, num_blocks, block_size, num_kv_heads, head_dim): kv_cache[0] holds keys,
kv_cache[1] values. block_mapping (pairs, 2) int32 lists (src, dst) page copies. Host functions,
validation and the word view (as_words) are given.
Grade with:  make check DAY=75
"""

import numpy as np

from course import cuda, launch
from course.launch import as_words

TITLE = "The block allocator and copy_blocks"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
BOUND = "memory"
THREADS = 256
NAIVE_THREADS = 64
UNROLL = 4


# --- host side: who owns which block -----------------------------------------------------------------

class NoFreeBlockError(RuntimeError):
    """allocate() was called with every block in use."""


class LinearScanAllocator:
    """v1: one used-flag per block; allocate() scans from block 0 for the first free block.

    Cost grows with the pool: with 100k blocks mostly in use, each decode step that opens a new page
    walks most of the list.
    """

    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self._used = [False] * num_blocks

    @property
    def num_free_blocks(self) -> int:
        return self._used.count(False)  # O(num_blocks) as well

    def allocate(self) -> int:
        raise NotImplementedError("Day 75: scan self._used for the first False, mark it, return its "
                                  "index; raise NoFreeBlockError if none (5 lines)")

    def free(self, block: int) -> None:
        raise NotImplementedError("Day 75: reject ids out of range or already free with ValueError, then "
                                  "clear the flag (5 lines)")


class BlockAllocator:
    """v2: free blocks on a stack, a reference count per block; every operation O(1).

    allocate() pops a block with count 1; incref() adds an owner (a forked sequence sharing the
    page); free() drops one owner and pushes the block back when none is left. The stack hands out
    the most recently freed block first: its page is the likeliest to still sit in L2.
    """

    def __init__(self, num_blocks: int):
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self._ref_counts = [0] * num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() gives block 0 first

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def ref_count(self, block: int) -> int:
        self._check(block)
        return self._ref_counts[block]

    def allocate(self) -> int:
        raise NotImplementedError("Day 75: pop a block id from self._free, set its ref count to 1; "
                                  "NoFreeBlockError when the stack is empty (5 lines)")

    def incref(self, block: int) -> None:
        raise NotImplementedError("Day 75: self._check the id, ValueError if its count is 0, else add one "
                                  "(4 lines)")

    def free(self, block: int) -> None:
        raise NotImplementedError("Day 75: self._check, ValueError on a double free, decrement, push back "
                                  "on self._free at zero (6 lines)")

    def _check(self, block: int) -> None:
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block {block} is outside 0..{self.num_blocks - 1}")


# --- the day contract: copy_blocks ---------------------------------------------------------------------

@cuda.jit
def copy_blocks_naive_kernel(key_cache, value_cache, block_mapping):
    # key_cache, value_cache: (num_blocks, block_size, num_kv_heads, head_dim); block_mapping: (pairs, 2)
    """One thread per (pair, K or V): thread i handles pair i // 2 of key_cache (i even) or value_cache
    (i odd) and copies every element of page src into page dst. Guard i < 2 * pairs."""
    raise NotImplementedError("Day 75: thread i copies pair i // 2, K if i is even else V: guard, read "
                              "src and dst, three nested loops over the page (12 lines)")


@cuda.jit
def copy_blocks_kernel(key_words, value_words, block_mapping):
    # key_words, value_words: (num_blocks, words_per_page) -- each page is one contiguous row.
    # grid: (pairs, 2); blockIdx.y picks K or V.
    """One CUDA block per (pair, K or V): grid (pairs, 2). Pages are rows of machine words
    (num_blocks, words_per_page), so the copy is a strided loop: word w = threadIdx.x, then
    w += blockDim.x, each thread copying cache[src, w] to cache[dst, w]. Consecutive threads touch
    consecutive words (coalesced). Stretch: issue four loads before their four stores."""
    raise NotImplementedError("Day 75: pair = blockIdx.x, cache by blockIdx.y; threads stride over the "
                              "page's words by blockDim.x; stretch: four loads before four stores (10-20 "
                              "lines)")


_NAIVE_SIG = "void(float16[:, :, :, ::1], float16[:, :, :, ::1], int32[:, ::1])"
_OPT_SIG = "void(uint64[:, ::1], uint64[:, ::1], int32[:, ::1])"
KERNELS = {"naive": (copy_blocks_naive_kernel, _NAIVE_SIG), "optimized": (copy_blocks_kernel, _OPT_SIG)}


def _check(kv_cache, block_mapping):
    launch.check_array("kv_cache", kv_cache, dtype=(np.float16, np.float32), ndim=5)
    if kv_cache.shape[0] != 2:
        raise ValueError(f"kv_cache: expected shape (2, num_blocks, block_size, num_kv_heads, head_dim), "
                         f"got {tuple(kv_cache.shape)}")
    launch.check_array("block_mapping", block_mapping, dtype=np.int32, shape=(None, 2))
    if isinstance(block_mapping, np.ndarray):  # device mappings are trusted: checking them costs a copy
        num_blocks = kv_cache.shape[1]
        if block_mapping.size and (block_mapping.min() < 0 or block_mapping.max() >= num_blocks):
            raise ValueError(f"block_mapping: block ids must lie in 0..{num_blocks - 1}")
        dst = block_mapping[:, 1]
        if len(set(dst.tolist())) != len(dst):
            raise ValueError("block_mapping: two pairs write the same destination block")
        if set(dst.tolist()) & set(block_mapping[:, 0].tolist()):
            raise ValueError("block_mapping: a destination is also a source (the copy order would matter)")


def naive(kv_cache, block_mapping):
    _check(kv_cache, block_mapping)
    d_cache, d_map = launch.to_device(kv_cache, block_mapping)
    pairs = block_mapping.shape[0]
    if pairs:
        copy_blocks_naive_kernel[launch.blocks(2 * pairs, NAIVE_THREADS), NAIVE_THREADS](
            d_cache[0], d_cache[1], d_map)
    return launch.result(d_cache, kv_cache, block_mapping)


def optimized(kv_cache, block_mapping):
    _check(kv_cache, block_mapping)
    d_cache, d_map = launch.to_device(kv_cache, block_mapping)
    pairs, num_blocks = block_mapping.shape[0], kv_cache.shape[1]
    if pairs:
        keys, values = as_words(d_cache[0], num_blocks), as_words(d_cache[1], num_blocks)
        threads = min(THREADS, 32 * -(-keys.shape[1] // 32))  # no idle warps on small pages
        copy_blocks_kernel[(pairs, 2), threads](keys, values, d_map)
    return launch.result(d_cache, kv_cache, block_mapping)


