"""On a GPU, let Numba allocate device memory from CuPy's memory pool.

Numba's default allocator calls cuMemAlloc for every ``cuda.device_array`` and frees lazily in
batches (a device-wide synchronisation). A benchmark that allocates its output each call would then
time the allocator as much as the kernel. CuPy keeps a caching pool; Numba's External Memory
Management (EMM) interface lets us hand its allocations to that pool, so an output array costs a
free-list lookup, as it does in PyTorch. Both libraries share the device's primary context.
"""

from __future__ import annotations

import ctypes

from numba import cuda


class CupyPoolMemoryManager(cuda.GetIpcHandleMixin, cuda.HostOnlyCUDAMemoryManager):
    def initialize(self):
        import cupy

        self._cupy = cupy

    def memalloc(self, size):
        holder = [self._cupy.cuda.alloc(size)]  # a block from CuPy's default pool
        ptr = ctypes.c_void_p(int(holder[0].ptr))

        def release():  # numba calls this when the array dies: the block goes back to the pool
            holder.clear()

        return cuda.MemoryPointer(self.context, ptr, size, finalizer=release)

    def get_memory_info(self):
        free, total = self._cupy.cuda.runtime.memGetInfo()
        return cuda.MemoryInfo(free=free, total=total)

    def reset(self):
        super().reset()
        self._cupy.get_default_memory_pool().free_all_blocks()

    @property
    def interface_version(self):
        return 1


def install() -> bool:
    """Use CuPy's pool for Numba's device arrays; False (and Numba's own allocator) without CuPy."""
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()  # a CuPy built for another CUDA fails here, not at import
    except Exception:  # no usable CuPy: Numba keeps its own allocator
        return False
    cuda.set_memory_manager(CupyPoolMemoryManager)
    return True
