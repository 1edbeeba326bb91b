"""Where day 90's engine spends its host time: one serve() under cProfile, the functions that cost most.

    python3 tools/engine_profile.py                                # on a GPU: make run's default workload
    python3 tools/engine_profile.py --requests 64 --max-prompt 64 --max-output 128 --out engine.prof
    python3 tools/engine_profile.py --contiguous                   # the contiguous-cache engine instead

`make run`'s time split says which phase of a step is long (with the device synchronised at each
phase's edges); this says which Python functions make it long, with the device left to run ahead as
in an unprofiled run. A step that costs ~10 ms for microseconds of kernels is host-bound, and the
rows here are what to cut: a check repeated every layer, an array built a sequence at a time, a
launch's argument conversions. It first serves a two-token request, so Numba's and CuPy's compilers
stay out of the profile. Prints the top functions by their own time and by cumulative time, and
writes the whole profile where --out says (read it with `python -m pstats FILE` or snakeviz). In
the simulator it runs too, on the tiny model: the kernels then dominate and say nothing of a GPU.
"""

from __future__ import annotations

import argparse
import cProfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import course  # noqa: E402  (first: GPU or simulator before numba loads)
from course.profiling import print_top  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from solutions import day90_serving_engine as eng

    d = eng.default_args()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=d["model"], choices=sorted(eng.MODELS))
    p.add_argument("--requests", type=int, default=d["requests"])
    p.add_argument("--max-prompt", type=int, default=d["max_prompt"])
    p.add_argument("--max-output", type=int, default=d["max_output"])
    p.add_argument("--block-size", type=int, default=d["block_size"])
    p.add_argument("--kv-blocks", type=int, default=d["kv_blocks"])
    p.add_argument("--dtype", default="float32", choices=eng.DTYPES)
    p.add_argument("--contiguous", action="store_true", help="profile the contiguous-cache engine")
    p.add_argument("--top", type=int, default=30, help="rows of each table (default %(default)s)")
    p.add_argument("--out", type=Path, help="also write the whole profile here")
    return p


def main(argv=None) -> int:
    from solutions import day90_serving_engine as eng

    a = build_parser().parse_args(argv)
    for name in ("requests", "max_prompt", "max_output", "block_size", "kv_blocks", "top"):
        if getattr(a, name) < 1:
            print(f"engine_profile: --{name.replace('_', '-')} must be >= 1", file=sys.stderr)
            return 2
    if a.max_prompt + a.max_output > eng.MODELS[a.model].max_len:
        print(f"engine_profile: --max-prompt + --max-output must fit the {a.model} model's context of "
              f"{eng.MODELS[a.model].max_len} tokens", file=sys.stderr)
        return 2
    wl = eng.Workload(a.requests, a.max_prompt, a.max_output, a.block_size, a.kv_blocks, a.model)
    try:
        inputs = eng.make_inputs(wl, seed=0)
        model, prompts, plens, olens, bs, nb = inputs
        eng.serve(model, prompts[:1], plens[:1].copy(), olens[:1].clip(max=2), bs, nb,  # compile, untimed
                  contiguous=a.contiguous, dtype=a.dtype)
    except ValueError as exc:
        print(f"engine_profile: {exc}", file=sys.stderr)
        return 2
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    _, engine = eng.serve(*inputs, contiguous=a.contiguous, dtype=a.dtype)
    prof.disable()
    seconds = time.perf_counter() - t0
    st = engine.stats
    print(f"{'contiguous' if a.contiguous else 'paged'} engine on {course.DEVICE.describe()}: {st.steps} steps, "
          f"{st.generated} tokens in {seconds:.2f} s under the profiler ({1e3 * seconds / max(st.steps, 1):.2f} ms "
          f"a step; cProfile adds its own cost to every Python call)")
    print_top(prof, a.top, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
