"""A benchmark's host work made ahead, in worker processes, while the GPU times other days.

Before a day's first launch its benchmark makes the inputs at the benchmark size and computes the plain
NumPy reference (float64 where it matters) on one CPU thread: 1 to 20 s a day, measured on a CPU, and
about a quarter of a benchmark visit's time on the H200. None of it needs the GPU, so
``tools/bench_all.py`` starts ``python -m course.prepare OUTDIR DAY`` for the next few days while it
times the current one; each worker writes one pickle a benchmark size, and the benchmark loads it
instead of making it again.

The worker imports the day exactly as the benchmark does (the same device choice, so the same constants)
and calls the same :func:`course.bench.prepare`: the inputs are the ones ``make bench`` times
(``make_inputs(n, seed=1234)``). It never launches a kernel.

    python -m course.prepare OUTDIR DAY [DAY ...]

writes OUTDIR/dayNN_topic.K.pkl for each size K of each day (OUTDIR/dayNN_topic.error if it failed).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from course import bench, days

PROTOCOL = 5  # out-of-band buffers: large NumPy arrays pickle at memory speed
BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def path_for(outdir: Path, slug: str, k: int) -> Path:
    return Path(outdir) / f"{slug}.{k}.pkl"


def error_path(outdir: Path, slug: str) -> Path:
    return Path(outdir) / f"{slug}.error"


def _dump(value, final: Path) -> None:
    """Pickled whole, then renamed into place: a reader never sees half a file."""
    partial = final.with_suffix(".partial")
    with open(partial, "wb") as f:
        pickle.dump(value, f, protocol=PROTOCOL)
    os.replace(partial, final)


def shared_references(outdir: Path):
    """A store for course.bench's references shared by the workers: the days that share a problem (the
    attention days 65-70, the same shapes and seed) compute its float64 reference once. The first worker
    to take a key's lock computes and writes it; another asking meanwhile waits on the lock, then loads."""
    outdir = Path(outdir)

    def store(key: str, compute):
        path = outdir / f"reference-{key}.pkl"
        with open(outdir / f"reference-{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
            if path.exists():
                with open(path, "rb") as f:
                    return pickle.load(f)
            value = compute()
            _dump(value, path)
            return value

    return store


def write(outdir: Path, day) -> None:
    """Every benchmark size of ``day``: its Prepared, pickled (written whole, then renamed into place);
    then, with COURSE_JIT_CACHE set (bench_all --compile-ahead), its KERNELS compiled into that disk
    cache (course.jit_cache), where the timing process finds them."""
    from course import jit_cache

    info = days.find(day)
    sol = days.load_solution(info.number)
    store = shared_references(outdir)
    for k, n in enumerate(sol.BENCH_SIZES):
        _dump(bench.prepare(sol, n, store=store), path_for(outdir, info.slug, k))
    compiled = jit_cache.compile_day(sol)
    if compiled:
        print(f"{info.slug}: compiled ahead: " + ", ".join(f"{k} {v}" for k, v in compiled.items()), flush=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python -m course.prepare OUTDIR DAY [DAY ...]", file=sys.stderr)
        return 2
    outdir = Path(argv[0])
    outdir.mkdir(parents=True, exist_ok=True)
    from course import jit_cache

    jit_cache.enable()  # before any day is imported: its kernels cache on disk (COURSE_JIT_CACHE only)
    failed = 0
    for day in argv[1:]:
        info = days.find(int(day))
        try:
            write(outdir, info.number)
        except Exception:
            failed += 1
            error_path(outdir, info.slug).write_text(traceback.format_exc())
    return 1 if failed else 0


class Ahead:
    """Workers making the host side of the days to come, in the order they are timed (a day flagged
    BENCH_PREPARE_EARLY first).

    ``get(info)`` waits for that day's worker and returns a function of the size index giving its
    Prepared, or None where the worker failed (the benchmark then makes it itself, and ``notes`` says
    why). At most ``jobs`` workers run at once, and at most ``keep`` days (default 3 x jobs) are ahead
    of the GPU, made or being made: a day's files are deleted once it has been timed. A day flagged
    early is not counted in ``keep``: it is made minutes before its turn on purpose, and counted it
    would hold two of the places the first days need (a visit's day 16 waited 41 s for it). A finished
    day does not hold a worker's place, so the workers run as far ahead as ``keep`` lets them: a day
    whose reference takes minutes (the attention days') starts while the days before it are timed, not
    only when the one before it has its turn. :meth:`refill` starts workers in the places that came
    free (``get`` and ``done`` call it; bench_all also between the versions of a day). ``seconds``
    holds each finished worker's wall time (seen from here: to within the few seconds between two
    looks)."""

    def __init__(self, infos, outdir: Path, jobs: int, keep: int | None = None):
        self.queue = list(infos)
        self.outdir = Path(outdir)
        self.outdir.mkdir(parents=True, exist_ok=True)
        self.jobs = max(1, jobs)
        self.keep = max(self.jobs, keep if keep is not None else 3 * self.jobs)
        self.running: dict[str, subprocess.Popen] = {}  # started and not yet timed: running or finished
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}  # slug -> the worker's wall time, once it has finished
        self.notes: dict[str, str] = {}
        self.waited_s = 0.0  # how long the last get() waited for its worker
        # A day whose solution sets BENCH_PREPARE_EARLY (days 65 and 69: the float64 attention references
        # that days 65-70 share, minutes on two threads) gets a worker first, whatever its place: it runs
        # while the days before it are timed, and the days that share its references then only load them.
        early = [i for i in self.queue if days.constants(i.solution_path).get("BENCH_PREPARE_EARLY")]
        self.early = {i.slug for i in early}
        self.queue = early + [i for i in self.queue if i not in early]
        self.refill()

    def _start(self, info) -> None:
        log = open(self.outdir / f"{info.slug}.log", "wb")
        cmd = [sys.executable, "-m", "course.prepare", str(self.outdir), str(info.number)]
        # The cores shared out between the workers (the float64 references are mostly BLAS: an attention
        # reference is ~2 TFLOP), at a lower priority: the process timing the GPU keeps a core of its own
        # for its launches (a version timed by the wall clock counts its host time).
        # A day flagged early (a float64 attention reference, minutes of BLAS) gets twice the share.
        share = max(1, (os.cpu_count() or 2) // (self.jobs + 1))
        threads = str(2 * share if info.slug in self.early else share)
        env = dict(os.environ, **{k: threads for k in BLAS_THREADS})
        self.started[info.slug] = time.perf_counter()
        self.running[info.slug] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=days.ROOT,
                                                   env=env, preexec_fn=lambda: os.nice(10))
        log.close()

    def _active(self) -> int:
        """Workers still running; a finished one's wall time goes into ``seconds``."""
        active = 0
        for slug, proc in self.running.items():
            if proc.poll() is None:
                active += 1
            elif slug not in self.seconds:
                self.seconds[slug] = time.perf_counter() - self.started[slug]
        return active

    def refill(self) -> None:
        """Start workers in the places that came free since the last look (a worker that finished)."""
        active = self._active()
        ahead = sum(slug not in self.early for slug in self.running)
        while self.queue and (ahead < self.keep or self.queue[0].slug in self.early) and active < self.jobs:
            info = self.queue.pop(0)
            self._start(info)
            active += 1
            ahead += info.slug not in self.early

    def get(self, info, timeout: float | None = None, heartbeat=None, every: float = 30.0):
        """Wait for ``info``'s worker (at most ``timeout`` seconds; ``heartbeat(seconds)`` called every
        ``every`` seconds while it runs); then start the next day's."""
        self.waited_s = 0.0
        proc = self.running.get(info.slug)
        if proc is None and info in self.queue:  # its turn came before a worker's place did: start it now
            self.queue.remove(info)
            self._start(info)
            proc = self.running[info.slug]
        if proc is None:  # not queued ahead (a day given twice, or asked out of order): made in-process
            return None
        waited = time.perf_counter()
        beat = waited
        poll = min(every, 2.0)  # how often a worker that finished meanwhile is replaced
        while True:
            left = None if timeout is None else timeout - (time.perf_counter() - waited)
            try:
                proc.wait(timeout=poll if left is None else max(0.0, min(poll, left)))
                break
            except subprocess.TimeoutExpired:
                if left is not None and left <= poll:
                    proc.kill()
                    proc.wait()
                    self.notes[info.slug] = f"its worker was still making the inputs after {timeout:.0f} s"
                    break
                self.refill()
                if heartbeat and time.perf_counter() - beat >= every:
                    beat = time.perf_counter()
                    heartbeat(beat - waited)
        self._active()  # its wall time, before it leaves the list
        del self.running[info.slug]
        self.refill()
        error = error_path(self.outdir, info.slug)
        if error.exists():
            self.notes[info.slug] = "its worker failed: " + error.read_text().strip().splitlines()[-1]
        self.waited_s = time.perf_counter() - waited

        def prepared(k: int):
            path = path_for(self.outdir, info.slug, k)
            if not path.exists():
                return None
            with open(path, "rb") as f:
                return pickle.load(f)

        return prepared

    @contextlib.contextmanager
    def paused(self):
        """The workers still running stopped (SIGSTOP) for the block, then continued: a version timed by
        the wall clock counts the host's time, and is timed on a host not also making inputs. A stopped
        worker keeps its place and its memory; only its progress waits."""
        procs = [p for p in self.running.values() if p.poll() is None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGSTOP)
        try:
            yield len(procs)
        finally:
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGCONT)

    def done(self, info) -> None:
        """The day has been timed (or given up on): its worker, if it still runs, and its files go."""
        proc = self.running.pop(info.slug, None)
        if proc is not None:
            proc.kill()
            proc.wait()
        for path in self.outdir.glob(f"{info.slug}.*"):
            path.unlink(missing_ok=True)
        self.refill()

    def close(self) -> None:
        for proc in self.running.values():
            proc.kill()
            proc.wait()
        self.running.clear()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
