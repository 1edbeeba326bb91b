"""Day 75: the block allocator -- hand out fixed-size KV pages in O(1); copy pages on the GPU.

The KV cache is one big pool of pages ("blocks"), each holding block_size tokens of K and V for
every KV head. Who owns which page is host bookkeeping; moving page contents is a kernel.

Host side (graded by its own tests, not timed):
  LinearScanAllocator  naive: a used-flag per block; allocate() scans for the first free one, O(num_blocks).
  BlockAllocator       O(1): a stack of free block ids plus a reference count per block, so a page can
                       be shared by several sequences (prefix sharing, fork) and returns to the pool
                       only when its last owner frees it.

Kernel: copy_blocks(kv_cache, block_mapping) copies page src -> dst for each row (src, dst) of the
mapping, K and V; copy-on-write (a later day) calls it before writing into a shared page.
v1 naive      one thread per (pair, K or V) walks its whole page element by element: the 32 lanes
              of a warp sit in 32 different pages, so every warp store touches 32 separate sectors.
v2 optimized  one CUDA block per (pair, K or V): the page is contiguous, so the block's threads stride
              over it as machine words (8, 4 or 2 bytes, whatever divides the page): a coalesced
              memcpy, dtype-blind, several words in flight per thread.

Why the versions are the kernel's: the allocator's two designs differ in cost, not in result, and the
host functions of the day contract must return the same array; the copy kernel is what a GPU times.

Cache layout (vLLM's FlashAttention layout): kv_cache (2, num_blocks, block_size, num_kv_heads,
head_dim); kv_cache[0] is the key cache, kv_cache[1] the value cache. A page of one of them is
block_size * num_kv_heads * head_dim contiguous elements.

Napkin math: a float16 page of 16 tokens x 8 KV heads x 128 = 32 KB; K and V of 4096 pairs is 268 MB
read + 268 MB written: ~0.13 ms at the H200's ~4.1 TB/s copy rate.
"""

import numpy as np

from course import cuda, launch
from course.launch import as_words

TITLE = "The block allocator and copy_blocks"
MEMORY_SPACE = "global"
VERSIONS = ("naive", "optimized")
# n = number of (src, dst) pairs, or (pairs, block_size, num_kv_heads, head_dim, dtype).
# The last two make pages of 60 and 18 bytes: 4-byte and 2-byte words in the optimized copy.
TEST_SIZES = (1, 7, 33, (5, 4, 2, 8, "float32"), (3, 5, 1, 6, "float16"), (4, 3, 1, 3, "float16"))
BENCH_SIZES = ((4096, 16, 8, 128, "float16"),)
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
        """The lowest free block id, now marked used; NoFreeBlockError when every block is in use."""
        # EXERCISE: scan self._used for the first False, mark it, return its index; NoFreeBlockError if none
        for block, used in enumerate(self._used):
            if not used:
                self._used[block] = True
                return block
        raise NoFreeBlockError(f"all {self.num_blocks} blocks are in use")

    def free(self, block: int) -> None:
        """Mark ``block`` free again; ValueError for an id outside the pool or a block already free."""
        # EXERCISE: reject ids out of range or already free with ValueError, then clear the flag
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block {block} is outside 0..{self.num_blocks - 1}")
        if not self._used[block]:
            raise ValueError(f"block {block} is already free (double free)")
        self._used[block] = False


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
        """A free block with reference count 1, off the top of the stack; NoFreeBlockError when none."""
        # EXERCISE: pop a block id from self._free, set its ref count to 1; NoFreeBlockError when the stack is empty
        if not self._free:
            raise NoFreeBlockError(f"all {self.num_blocks} blocks are in use")
        block = self._free.pop()
        self._ref_counts[block] = 1
        return block

    def incref(self, block: int) -> None:
        """One more owner of an allocated block; ValueError for a bad id or a free block."""
        # EXERCISE: self._check the id, ValueError if its count is 0, else add one
        self._check(block)
        if self._ref_counts[block] == 0:
            raise ValueError(f"block {block} is free: allocate it before sharing it")
        self._ref_counts[block] += 1

    def free(self, block: int) -> None:
        """One owner fewer; the block goes back on the stack when its count reaches 0. ValueError for a
        bad id or a double free (count already 0)."""
        # EXERCISE: self._check, ValueError on a double free, decrement, push back on self._free at zero
        self._check(block)
        if self._ref_counts[block] == 0:
            raise ValueError(f"block {block} is already free (double free)")
        self._ref_counts[block] -= 1
        if self._ref_counts[block] == 0:
            self._free.append(block)

    def _check(self, block: int) -> None:
        if not 0 <= block < self.num_blocks:
            raise ValueError(f"block {block} is outside 0..{self.num_blocks - 1}")


# --- the day contract: copy_blocks ---------------------------------------------------------------------

def _geometry(n):
    if isinstance(n, (tuple, list)):
        pairs, block_size, heads, head_dim, dtype = n
        return int(pairs), int(block_size), int(heads), int(head_dim), np.dtype(dtype)
    return int(n), 4, 2, 8, np.dtype(np.float16)


def make_inputs(n, seed: int = 0):
    """A random cache and `pairs` copies whose destinations are distinct and never a source."""
    pairs, block_size, heads, head_dim, dtype = _geometry(n)
    rng = np.random.default_rng(seed)
    num_blocks = 2 * pairs + 3
    kv_cache = rng.standard_normal((2, num_blocks, block_size, heads, head_dim)).astype(dtype)
    ids = rng.permutation(num_blocks)
    dst = ids[:pairs]
    # Sources come from the other blocks, with repeats: one shared page copied to several new owners.
    src = rng.choice(ids[pairs:], size=pairs, replace=True)
    block_mapping = np.stack([src, dst], axis=1).astype(np.int32)  # (pairs, 2): (src, dst)
    kv_cache[:, dst] = np.nan  # fresh pages hold garbage: a copy that never lands stays NaN
    return kv_cache, block_mapping


def reference(kv_cache, block_mapping):
    out = kv_cache.copy()
    for src, dst in block_mapping:
        out[:, dst] = kv_cache[:, src]
    return out


def traffic(kv_cache, block_mapping):
    """Each pair reads and writes one K page and one V page."""
    page_bytes = int(np.prod(kv_cache.shape[2:])) * kv_cache.itemsize
    return 2 * 2 * page_bytes * block_mapping.shape[0], 0


@cuda.jit
def copy_blocks_naive_kernel(key_cache, value_cache, block_mapping):
    # key_cache, value_cache: (num_blocks, block_size, num_kv_heads, head_dim); block_mapping: (pairs, 2)
    """One thread per (pair, K or V): thread i handles pair i // 2 of key_cache (i even) or value_cache
    (i odd) and copies every element of page src into page dst. Guard i < 2 * pairs."""
    # EXERCISE: thread i copies pair i // 2, K if i is even else V: guard, read src, dst; nested loops over the page
    i = cuda.grid(1)
    pairs = block_mapping.shape[0]
    if i >= 2 * pairs:
        return
    pair = i >> 1
    cache = key_cache if (i & 1) == 0 else value_cache
    src = block_mapping[pair, 0]
    dst = block_mapping[pair, 1]
    # One thread copies a whole page: neighbouring lanes are a page apart, so no two lanes of a warp
    # ever share a memory sector, and each thread has one load in flight at a time.
    for t in range(cache.shape[1]):
        for h in range(cache.shape[2]):
            for d in range(cache.shape[3]):
                cache[dst, t, h, d] = cache[src, t, h, d]


@cuda.jit
def copy_blocks_kernel(key_words, value_words, block_mapping):
    # key_words, value_words: (num_blocks, words_per_page) -- each page is one contiguous row.
    """One CUDA block per (pair, K or V): grid (pairs, 2), pair = blockIdx.x, blockIdx.y picks K or V.
    Pages are rows of machine words (num_blocks, words_per_page), so the copy is a strided loop: word
    w = threadIdx.x, then w += blockDim.x, each thread copying cache[src, w] to cache[dst, w].
    Consecutive threads touch consecutive words (coalesced). Stretch: issue four loads before their
    four stores."""
    # EXERCISE: pair = blockIdx.x, cache by blockIdx.y; threads stride over the page's words by blockDim.x
    pair = cuda.blockIdx.x
    cache = key_words if cuda.blockIdx.y == 0 else value_words
    # Uniform across the block: one load, served to every thread from the same cache line.
    src = block_mapping[pair, 0]
    dst = block_mapping[pair, 1]
    words = cache.shape[1]
    step = cuda.blockDim.x
    w = cuda.threadIdx.x
    # Four loads issued before their stores: more bytes in flight per thread hides HBM latency.
    while w + 3 * step < words:
        a0 = cache[src, w]
        a1 = cache[src, w + step]
        a2 = cache[src, w + 2 * step]
        a3 = cache[src, w + 3 * step]
        cache[dst, w] = a0
        cache[dst, w + step] = a1
        cache[dst, w + 2 * step] = a2
        cache[dst, w + 3 * step] = a3
        w += 4 * step
    while w < words:
        cache[dst, w] = cache[src, w]
        w += step


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


def library(kv_cache, block_mapping):
    """The same copy as CuPy fancy indexing (a gather then a scatter)."""
    import cupy

    cache, mapping = cupy.asarray(kv_cache), cupy.asarray(block_mapping)
    cache[:, mapping[:, 1]] = cache[:, mapping[:, 0]]
    return cache
