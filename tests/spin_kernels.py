"""Kernels for tests/test_course.py's compiler check of course.flags: a spin on a word another block
publishes, read three ways. Not a test module (no test_ prefix): course.compiler imports it by path."""

from course import cuda, flags


@cuda.jit
def spin_relaxed(status, out):  # status (1,), out (1,)
    w = flags.load_relaxed(status, 0)
    while w == 0:
        w = flags.load_relaxed(status, 0)
    out[0] = w


@cuda.jit
def spin_plain(status, out):
    w = status[0]
    while w == 0:
        w = status[0]
    out[0] = w


_SIG = "void(uint64[::1], uint64[::1])"
KERNELS = {"relaxed": (spin_relaxed, _SIG), "plain": (spin_plain, _SIG)}
