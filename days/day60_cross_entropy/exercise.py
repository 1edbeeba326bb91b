"""Day 60 exercise: cross-entropy over a large vocabulary -- the language-model head's loss and its gradient,
loss = mean over the tokens r with targets[r] != -100 of  logsumexp(logits[r, :]) - logits[r, targets[r]],
grad[r, :] = (softmax(logits[r, :]) - onehot(targets[r])) / n_valid  (0 for an ignored token's row),
logits float32 (tokens, vocab), targets int64 (tokens,), as torch.nn.functional.cross_entropy(logits,
targets, ignore_index=-100) and its backward. naive(logits, targets) and optimized(logits, targets) both
return (loss, grad): a float32 scalar and a float32 (tokens, vocab) array (NumPy in, NumPy out; device
arrays in, device arrays out, the loss a 0-d device array).

v1 naive      what a framework does op by op: a log-softmax kernel (three passes over the row: max, sum of
              exp, write logp = x - max - log(sum), a (tokens, vocab) tensor), a gather kernel (the loss of
              each token, -logp[r, target]), a one-block mean kernel (the sum over the non-ignored tokens,
              n_valid, 1 / n_valid), and a gradient kernel (exp(logp) - onehot, times 1 / n_valid, reading
              logp again). The logits are read three times, logp written once and read once more.
v2 optimized  one block per row, two passes: ONE read pass with day 56's online max and rescaled sum (16-byte
              loads, the block's (m, s) pairs merged with day 56's block_merge), then ONE pass that reads
              the row again and writes grad = (exp(x - m) / s - onehot) / n_valid with 16-byte stores,
              while thread 0 adds the row's loss term ((m - x_target) + log s) / n_valid to the mean with
              one float32 atomic add. A 256-thread kernel in front counts n_valid (the targets only,
              8 bytes a token) and zeroes the accumulator. An ignored token's row is written as zeros
              without being read.
library       torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100) and
              torch.autograd.grad for the gradient (a row of the benchmark table where torch is installed).

Choices. targets are int64: what torch's cross_entropy takes (a user's targets tensor is already int64), and
the 8 bytes a token are nothing next to the 3 x 4 x vocab bytes a token of logits and gradient (0.002 % at a
128k vocabulary). The mean is an atomic add, one a row, not a second kernel over a (tokens,) array of
terms: 4096 atomics to one address over a kernel of a few hundred microseconds cost nothing measurable, and
the terms array's write, read and extra launch go away. The price: the order of the float32 additions
depends on which block finishes first, so the loss differs from run to run in its last bits; every term is
positive (a loss term is >= 0), so the sum's relative error stays below tokens x 2^-24 (2.4e-4 at 4096
tokens, typically ~1e-6), inside the grader's 1e-4 for the sizes it runs, and the gradient, written by one
thread an element, is deterministic. When every token is ignored, n_valid = 0: torch's mean is 0 / 0 = NaN;
here the loss is 0 and the gradient all zeros (a batch of pure padding teaches nothing, and a NaN would
poison the optimizer's state for every later step). Targets outside [0, vocab) other than -100 raise
ValueError when they come from the host; from a device array the check would cost a copy back and a sync
in every call, so the kernel makes that token's loss term NaN instead: the loss says so, never silently.
The logits must be finite (a -inf logit that is not the target is allowed: its probability is exactly 0).

Napkin math (H200, device copy ~4.2 TB/s read + write; traffic() counts what the fused kernel must move).
Per element: the gradient written once (4 bytes) and the logits read twice (8 bytes): 12 bytes; ~6 FLOPs
(exp counted as one). The row must be read twice because the first gradient element needs the row's max
and sum, and a row of 128256 floats (501 KB) does not fit in an SM (256 KB of registers, 228 KB of shared
memory). Per element through L1/L2:
  naive      3 logit reads + logp write + logp read + grad write = 24 bytes, plus the logp tensor itself:
             a second (tokens, vocab) float32 array, 2 GB at 4096 x 128256
  optimized  2 logit reads + grad write = 12 bytes, no intermediate tensor
(4096, 32000): 524 MB of logits; 12 bytes an element is 1.57 GB, ~0.37 ms at the copy rate; the naive
version's 24 bytes ~0.75 ms. (1024, 128256): 525 MB, the same. The optimized second read may come from L2
where the rows in flight fit (4 blocks x 132 SMs x 128 KB = 68 MB at 32000, about the L2's size; 264 MB at
128256, several times it): then it runs past 100 % of the copy rate on traffic()'s count.
Targets: the optimized version >= 90 % of the copy rate on its 12 bytes an element at both BENCH_SIZES,
and faster than torch's forward + backward (the guide measured torch's forward alone at 24 % of copy at
4096 x 128256; its backward reads the logits or the saved log-softmax again and writes the gradient).
Both met on the H200 (device copy 4192 GB/s in the same run):
  (4096, 32000)    396.3 us, 3,969 GB/s, 94.7 % of copy, 3.46x naive, 2.8x faster than torch (1,121.1 us)
  (1024, 128256)   397.9 us, 3,961 GB/s, 94.6 %, 3.45x naive, 3.0x faster than torch (1,201.1 us)
The same 95 % at both vocabularies: no run past 100 % at 32000 (the L2 hit rate was not measured).

What you write (each raises NotImplementedError with its hint until you do):
  gather_loss_kernel          r = cuda.grid(1); guard r; terms[r] = 0 when ignored, NaN when out of range, else
                              -logp[r, target] (9 lines)
  softmax_grad_kernel         per row: c = targets[r]; zeros when ignored, else (exp(logp) - onehot(c)) * scale[0]
                              (15 lines)
  cross_entropy_fused_kernel  the read pass: trips of two 16-byte loads, the sum rescaled as the max grows; the rest
                              by merge (22 lines)
  cross_entropy_fused_kernel  grad = (exp(x - m) / s - onehot(c)) * inv_n, 16-byte stores; thread 0 atomically adds
                              the loss (23 lines)
Everything else in this file is given. Grade with:  make check DAY=60
"""

import math

import numpy as np

from course import cuda, launch, wide
from numba import float32, int64
from solutions.day25_reduction_last_warp import THREADS, WARPS
from solutions.day26_reduction_grid_stride import _address
from solutions.day56_softmax_online import (
    BLOCKS_PER_SM,
    NEG_INF,
    VEC,
    block_max,
    block_merge,
    block_sum,
    max_or_zero,
    merge,
    row_layout,
)

TITLE = "Cross-entropy over a large vocabulary"
MEMORY_SPACE = "register + shared"
VERSIONS = ("naive", "optimized")
# (tokens, vocab): a vocabulary of 1 (every loss 0), of 3 and 5 (rows shorter than a warp, off the 16-byte
# grid), a block -1 and +1 times 4 (1023, 1025: odd, no row but the first starts aligned), a long row of
# 4097 (several trips of the optimized loop, a one-element tail); token counts prime.
TEST_SIZES = ((7, 1), (5, 3), (3, 5), (3, 1023), (2, 1025), (1, 4097))
# Llama 2's vocabulary at 4096 tokens and Llama 3's at 1024: ~525 MB of logits each, ~9x the L2.
BENCH_SIZES = ((4096, 32000), (1024, 128256))
BOUND = "memory"
RTOL = 1e-4
IGNORE_INDEX = -100  # torch's default ignore_index: padding and prompt tokens carry no loss
IGNORE_SHARE = 0.25  # of make_inputs' tokens


def make_inputs(n, seed: int = 0):
    """(logits, targets) for n = (tokens, vocab): logits of very different spreads row to row (a spread
    of 0.5 gives a nearly flat softmax, 100 a nearly one-hot one, so a max or sum taken from the wrong
    row shows), targets uniform in [0, vocab) with about a quarter of the tokens ignored (-100); token 0
    is never ignored, so n_valid >= 1 (all tokens ignored is a hard input of the grader)."""
    tokens, vocab = n
    rng = np.random.default_rng(seed)
    spread = np.float32(2.0) ** rng.integers(-1, 7, size=(tokens, 1)).astype(np.float32)  # 0.5 .. 64
    logits = rng.standard_normal((tokens, vocab), dtype=np.float32) * spread + rng.standard_normal(
        (tokens, 1)).astype(np.float32) * np.float32(5.0)
    targets = rng.integers(0, vocab, size=tokens).astype(np.int64)
    ignored = rng.random(tokens) < IGNORE_SHARE
    ignored[0] = False
    targets[ignored] = IGNORE_INDEX
    return np.ascontiguousarray(logits, dtype=np.float32), targets


HARD_KINDS = ("large", "target-max", "target-min", "constant", "all-ignored")


def hard_inputs(kind: str, n):
    """(logits, targets) of shape n = (tokens, vocab) for one of HARD_KINDS: "large" logits of +-1e4 (exp
    without the max subtraction overflows), "target-max" (every target at its row's max: the loss near 0,
    the target's gradient p - 1 a difference of nearly equal numbers), "target-min" (every target at its
    row's min, logits of spread 1e3: a loss term near 2e3, the target's probability exp(-2e3) = 0),
    "constant" rows (loss log(vocab) each, gradient 1/vocab - onehot), "all-ignored" (every target -100:
    loss 0 and a zero gradient here; torch gives NaN)."""
    tokens, vocab = n
    rng = np.random.default_rng(vocab * 7919 + tokens)
    targets = rng.integers(0, vocab, size=tokens).astype(np.int64)
    if kind == "large":
        x = rng.choice(np.array([-1e4, 1e4, 9999.0, -9999.5, 0.0], np.float32), size=(tokens, vocab))
    elif kind in ("target-max", "target-min"):
        x = rng.standard_normal((tokens, vocab)).astype(np.float32) * np.float32(1e3)
        targets = (x.argmax(axis=1) if kind == "target-max" else x.argmin(axis=1)).astype(np.int64)
    elif kind == "constant":
        x = np.repeat(rng.standard_normal((tokens, 1)).astype(np.float32) * np.float32(1e4), vocab, axis=1)
    elif kind == "all-ignored":
        x = rng.standard_normal((tokens, vocab)).astype(np.float32)
        targets[:] = IGNORE_INDEX
    else:
        raise ValueError(f"kind: expected one of {HARD_KINDS}, got {kind!r}")
    return np.ascontiguousarray(x, dtype=np.float32), targets


def reference(logits, targets):
    """(loss, grad) in float64, returned as float32: the mean over the non-ignored tokens of
    logsumexp - logit of the target, and (softmax - onehot) / n_valid with ignored rows 0. No token
    left (n_valid = 0): loss 0 and grad 0 (see the docstring)."""
    x = logits.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))
    valid = targets != IGNORE_INDEX
    n_valid = int(valid.sum())
    rows = np.nonzero(valid)[0]
    grad = np.zeros_like(x)
    loss = 0.0
    if n_valid:
        loss = float((lse[rows, 0] - x[rows, targets[rows]]).sum()) / n_valid
        grad[rows] = np.exp(x[rows] - lse[rows])
        grad[rows, targets[rows]] -= 1.0
        grad /= n_valid
    return np.float32(loss), grad.astype(np.float32)


def traffic(logits, targets):
    """(bytes the fused kernel must move, FLOPs): the logits read twice and the gradient written once
    (12 bytes an element: a 128k row does not fit on chip, see the docstring), the targets read once;
    ~6 FLOPs an element (a max, a subtraction, an exp counted as one, an add, two multiplies)."""
    return 3 * logits.size * 4 + targets.size * 8, 6 * logits.size


def check_inputs(logits, targets):
    launch.check_array("logits", logits, dtype=np.float32, ndim=2)
    tokens, vocab = logits.shape
    if tokens == 0 or vocab == 0:
        raise ValueError(f"logits: expected at least one token and one class, got shape {tuple(logits.shape)}")
    if vocab >= 2**31:
        raise ValueError(f"logits: expected a vocabulary below 2^31, got {vocab}")
    launch.check_array("targets", targets, dtype=np.int64, shape=(tokens,))
    if isinstance(targets, np.ndarray):  # from a device array this check is the kernel's (a NaN loss)
        bad = (targets != IGNORE_INDEX) & ((targets < 0) | (targets >= vocab))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"targets: expected class indices in [0, {vocab}) or {IGNORE_INDEX} (ignored), "
                             f"got {int(targets[i])} at token {i}")


# ---- v1: log-softmax, gather, mean, gradient -------------------------------------------------------

@cuda.jit
def log_softmax_kernel(x, logp):  # x (tokens, vocab), logp (tokens, vocab)
    """Day 56's three passes with a log at the end: block-stride over the rows, 256 threads a row,
    thread t takes the elements t, t + 256, ...: the row max (block_max), the sum of exp(x - max)
    (block_sum), then logp = (x - max) - log(sum). Three reads of the row, one write of a tensor as
    large as the logits."""
    slots = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    cols = x.shape[1]
    r = cuda.blockIdx.x
    while r < x.shape[0]:
        xr = x[r]
        v = NEG_INF
        k = t
        while k < cols:
            v = max(v, xr[k])
            k += THREADS
        base = max_or_zero(block_max(v, slots))
        v = float32(0.0)
        k = t
        while k < cols:
            v += math.exp(xr[k] - base)
            k += THREADS
        log_s = math.log(block_sum(v, slots))
        k = t
        while k < cols:
            # (x - max) first: exact for nearby values; x - (max + log s) would round max + log s to
            # float32 at 1e4's spacing (~1e-3) first and lose the small log-probabilities' digits.
            logp[r, k] = (xr[k] - base) - log_s
            k += THREADS
        r += cuda.gridDim.x


@cuda.jit
def gather_loss_kernel(logp, targets, terms):  # logp (tokens, vocab), targets (tokens,), terms (tokens,)
    """One thread a token: terms[r] = -logp[r, targets[r]], 0 for an ignored token (-100), NaN for a
    target outside [0, vocab) (a device array's bad target must not pass silently)."""
    raise NotImplementedError("Day 60: r = cuda.grid(1); guard r; terms[r] = 0 when ignored, NaN when out of range, "
                              "else -logp[r, target] (9 lines)")


@cuda.jit
def mean_kernel(terms, targets, loss, scale):  # terms (tokens,), targets (tokens,), loss (1,), scale (1,)
    """One block: the sum of the terms and the count of non-ignored tokens (block_sum twice), then
    loss[0] = sum / n_valid and scale[0] = 1 / n_valid (both 0 when n_valid is 0)."""
    slots = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    acc = float32(0.0)
    count = float32(0.0)
    i = t
    while i < terms.size:
        acc += terms[i]
        if targets[i] != IGNORE_INDEX:
            count += float32(1.0)
        i += THREADS
    acc = block_sum(acc, slots)
    count = block_sum(count, slots)  # float32 counts are exact up to 2^24 tokens
    if t == 0:
        inv = float32(1.0) / count if count > float32(0.0) else float32(0.0)
        loss[0] = acc * inv
        scale[0] = inv


@cuda.jit
def softmax_grad_kernel(logp, targets, scale, grad):  # logp, grad (tokens, vocab), targets (tokens,), scale (1,)
    """Block-stride over the rows, thread t takes the elements t, t + 256, ...: grad[r, k] =
    (exp(logp[r, k]) - (1 if k == targets[r] else 0)) * scale[0], and a row of zeros for an ignored
    token. The fourth full read of a (tokens, vocab) tensor (logp) and the gradient's write."""
    raise NotImplementedError("Day 60: per row: c = targets[r]; zeros when ignored, else (exp(logp) - onehot(c)) * "
                              "scale[0] (15 lines)")


# ---- v2: the fused kernel: one read pass, one read + write pass --------------------------------------

@cuda.jit
def count_valid_kernel(targets, scale, loss):  # targets (tokens,), scale (1,), loss (1,)
    """One block over the targets only (8 bytes a token): scale[0] = 1 / n_valid (0 when every token is
    ignored) and loss[0] = 0, the accumulator the fused kernel's atomics add into. It runs first on the
    same stream, so every block of the fused kernel sees both."""
    slots = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    count = float32(0.0)
    i = t
    while i < targets.size:
        if targets[i] != IGNORE_INDEX:
            count += float32(1.0)
        i += THREADS
    count = block_sum(count, slots)
    if t == 0:
        scale[0] = float32(1.0) / count if count > float32(0.0) else float32(0.0)
        loss[0] = float32(0.0)


@cuda.jit
def cross_entropy_fused_kernel(xf, targets, rows, cols, shift, scale, loss, gradf):
    """xf (rows * cols,) the logits flat, targets (rows,), scale (1,) = 1 / n_valid, loss (1,) the
    accumulator (0 on entry), gradf (rows * cols,) the gradient flat at the same position in its
    16 bytes as xf (so a group's load and store are aligned together; see day 56's row_layout).

    Block-stride over the rows, 256 threads a row. c = targets[r] is the same for the whole block, so the
    branch below is uniform and every thread reaches block_merge's barriers.
    - An ignored row (c == -100): the row of zeros, 16-byte stores, the logits not read.
    - Otherwise the read pass: thread t's running (m, s) = (-inf, 0) over the body's groups of 4 (groups
      g = t + 256 j), two 16-byte loads a trip before any arithmetic, the sum rescaled by exp(m_old -
      m_new) whenever the max grows (exponents against b = max_or_zero(m_new)); the leftover group and
      the head/tail elements (threads t < head, t < tail) each as merge(m, s, v, 1). Then block_merge
      gives every thread the row's (m, s).
    - The write pass reads the row again: grad = exp(x - m) * (1 / s) * inv_n, minus inv_n at column c,
      16-byte stores; thread 0 adds ((m - x[c]) + log s) * inv_n to loss[0] with one atomic (NaN
      when c is outside [0, cols)).
    """
    slot_m = cuda.shared.array(WARPS, float32)
    slot_s = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    inv_n = scale[0]
    zero = float32(0.0)
    r = cuda.blockIdx.x
    while r < rows:
        start, head, vecs = row_layout(r, cols, shift)
        body = start + head
        tail = body + VEC * vecs
        c = targets[r]
        if c == IGNORE_INDEX:
            # No loss and no gradient: write the zeros the caller's buffer needs, read nothing.
            g = int64(t)
            while g < vecs:
                wide.store4(gradf, body + VEC * g, (zero, zero, zero, zero))
                g += THREADS
            if t < head:
                gradf[start + t] = zero
            if tail + t < start + cols:
                gradf[tail + t] = zero
        else:
            m = NEG_INF
            s = float32(0.0)
            raise NotImplementedError("Day 60: the read pass: trips of two 16-byte loads, the sum rescaled as the max "
                                      "grows; the rest by merge (22 lines)")
            m, s = block_merge(m, s, slot_m, slot_s)
            raise NotImplementedError("Day 60: grad = (exp(x - m) / s - onehot(c)) * inv_n, 16-byte stores; thread 0 "
                                      "atomically adds the loss (23 lines)")
        r += cuda.gridDim.x


_SIG_LOGSOFTMAX = "void(float32[:, ::1], float32[:, ::1])"
_SIG_GATHER = "void(float32[:, ::1], int64[::1], float32[::1])"
_SIG_MEAN = "void(float32[::1], int64[::1], float32[::1], float32[::1])"
_SIG_GRAD = "void(float32[:, ::1], int64[::1], float32[::1], float32[:, ::1])"
_SIG_COUNT = "void(int64[::1], float32[::1], float32[::1])"
_SIG_FUSED = "void(float32[::1], int64[::1], int64, int64, int64, float32[::1], float32[::1], float32[::1])"
KERNELS = {
    "naive": (log_softmax_kernel, _SIG_LOGSOFTMAX),
    "naive.gather": (gather_loss_kernel, _SIG_GATHER),
    "naive.mean": (mean_kernel, _SIG_MEAN),
    "naive.grad": (softmax_grad_kernel, _SIG_GRAD),
    "optimized": (cross_entropy_fused_kernel, _SIG_FUSED),
    "optimized.count": (count_valid_kernel, _SIG_COUNT),
}


def _grid(rows: int) -> int:
    """A block per row, as many blocks as the GPU holds at once (day 56's occupancy); each block strides
    over the rows."""
    return launch.grid_stride_blocks(rows * THREADS, THREADS, BLOCKS_PER_SM)


def _result(loss, grad, *inputs):
    """(loss, grad) as the caller expects them: a NumPy float32 and array from NumPy inputs; a 0-d
    device array and a device array from device inputs (nothing copied back, no sync)."""
    if launch.on_host(*inputs):
        return np.float32(loss.copy_to_host()[0]), grad.copy_to_host()
    return loss.reshape(()), grad


def naive(logits, targets):
    check_inputs(logits, targets)
    d_x, d_t = launch.to_device(logits, targets)
    tokens, vocab = logits.shape
    logp = launch.empty((tokens, vocab), np.float32)
    terms = launch.empty((tokens,), np.float32)
    loss = launch.empty((1,), np.float32)
    scale = launch.empty((1,), np.float32)
    grad = launch.empty((tokens, vocab), np.float32)
    log_softmax_kernel[_grid(tokens), THREADS](d_x, logp)
    gather_loss_kernel[launch.blocks(tokens, THREADS), THREADS](logp, d_t, terms)
    mean_kernel[1, THREADS](terms, d_t, loss, scale)
    softmax_grad_kernel[_grid(tokens), THREADS](logp, d_t, scale, grad)
    return _result(loss, grad, logits, targets)


def optimized(logits, targets):
    check_inputs(logits, targets)
    d_x, d_t = launch.to_device(logits, targets)
    tokens, vocab = logits.shape
    # shift: where the logits' first float sits in its 16 bytes (0 for a fresh allocation, 1..3 for a
    # device view such as x[1:] of odd rows); the gradient is placed at the same shift in a buffer 4
    # floats longer, so an element's load and its store are 16-byte aligned together (day 56).
    shift = (_address(d_x) // 4) % VEC
    buf = launch.empty((tokens * vocab + VEC,), np.float32)
    gradf = buf[shift:shift + tokens * vocab]
    scale = launch.empty((1,), np.float32)
    loss = launch.empty((1,), np.float32)
    count_valid_kernel[1, THREADS](d_t, scale, loss)
    cross_entropy_fused_kernel[_grid(tokens), THREADS](d_x.reshape(tokens * vocab), d_t, tokens, vocab, shift,
                                                       scale, loss, gradf)
    return _result(loss, gradf.reshape(tokens, vocab), logits, targets)


def library(logits, targets):
    """torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100) and its gradient by
    torch.autograd.grad, on the GPU: the forward + backward a PyTorch user's training step runs
    (zero-copy from device arrays; torch gives NaN when every token is ignored)."""
    import torch

    x = torch.as_tensor(logits, device="cuda").detach().requires_grad_(True)
    t = torch.as_tensor(targets, device="cuda")
    loss = torch.nn.functional.cross_entropy(x, t, ignore_index=IGNORE_INDEX)
    (grad,) = torch.autograd.grad(loss, x)
    if isinstance(logits, np.ndarray):
        return np.float32(loss.item()), grad.cpu().numpy()
    return cuda.as_cuda_array(loss.detach()), cuda.as_cuda_array(grad)
