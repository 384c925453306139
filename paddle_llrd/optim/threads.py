"""Elementwise kernels on CPU flat buffers, split into contiguous chunks run on a small thread pool.

Paddle's CPU ``adamw`` kernel (and ``scale_``, ``add_``, ``zero_``) runs on
one core, and its op calls release the GIL: two Python threads each calling
``_C_ops.adamw_`` on one half of the same flat buffers take about half the
time of one call, and an elementwise op gives the same bits however its range
is split. The multi-tensor step (:mod:`~paddle_llrd.optim.multi_tensor`)
and the EMA's flat update (:mod:`~paddle_llrd.optim.ema`) hand their
large CPU ranges to :class:`FlatThreads`, and ``AdamWDL.clear_grad`` its
large CPU gradients where the operators are not there
(:func:`~paddle_llrd.optim.gradient_clearing.clear_gradients`: Paddle
zeroes each on one core too); ranges under the crossover, and every range on
another place (GPU kernels are parallel already), stay on the calling
thread, as before.

The thread count (:func:`resolve_num_threads`): an argument, else the
environment variable :data:`NUM_THREADS_ENV`, else the cores this process may
use (``os.sched_getaffinity``) divided among the local ranks of a
``paddle.distributed`` launch (``PADDLE_LOCAL_SIZE``, which
``python -m paddle.distributed.launch`` sets; else ``PADDLE_TRAINERS_NUM``,
all ranks taken as local). ``1`` is the single-threaded step.

The pool is one per process, of daemon threads, shut down and joined at
exit (``atexit``) and dropped in a forked child (its threads do not exist
there). A call of :meth:`FlatThreads.run` returns only when every task of
it has finished, so one step never overlaps the next.
"""
from __future__ import annotations

import atexit
import itertools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ..checks import checked_count, environment_count

__all__ = [
    "CHUNK_ALIGN", "MIN_CHUNK_NUMEL", "MIN_CHUNK_NUMEL_ENV", "NUM_THREADS_ENV", "FlatThreads",
    "available_cores", "chunk_bounds", "is_cpu_place", "local_ranks", "resolve_min_chunk_numel",
    "resolve_num_threads",
]

NUM_THREADS_ENV = "PADDLE_LLRD_NUM_THREADS"
MIN_CHUNK_ENV = MIN_CHUNK_NUMEL_ENV = "PADDLE_LLRD_MIN_CHUNK_NUMEL"
# The crossover, measured on 2 CPU cores (Paddle 3.3.1, float32 adamw_): one
# call of 2^18 elements took 464 us, two threads on halves 453 us (the hand-
# over costs about 150 us); 2^19: 900 us against 696 us; 2^23: 17.2 ms
# against 9.4 ms. So a range is split only into chunks of at least 2^17.
MIN_CHUNK_NUMEL = 1 << 17
# Chunk boundaries fall on multiples of this many elements from the range's
# start (whole 64-byte cache lines of float32, and whole vector lanes, as in one call).
CHUNK_ALIGN = 16
# The launcher's variables for the number of ranks on this machine, first found wins.
_LOCAL_RANKS_ENV = ("PADDLE_LOCAL_SIZE", "PADDLE_TRAINERS_NUM")


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # (macOS, Windows)
        return os.cpu_count() or 1


def local_ranks() -> int:
    """The ranks of a ``paddle.distributed`` launch on this machine (1 outside one)."""
    for name in _LOCAL_RANKS_ENV:
        value = environment_count(name)
        if value is not None:
            return value
    return 1


def resolve_num_threads(num_threads: int | None = None, *, owner: str = "num_threads") -> int:
    """The thread count: ``num_threads`` if given, else :data:`NUM_THREADS_ENV`,
    else :func:`available_cores` // :func:`local_ranks` (at least 1).

    Raises:
        TypeError: ``num_threads`` is not an int (a bool is refused).
        ValueError: ``num_threads`` or the environment variable is below 1,
            or the variable is not an integer.

    Examples:
        >>> import os
        >>> resolve_num_threads(3)
        3
        >>> os.environ["PADDLE_LLRD_NUM_THREADS"] = "2"
        >>> resolve_num_threads()
        2
        >>> del os.environ["PADDLE_LLRD_NUM_THREADS"]
        >>> resolve_num_threads(0, owner="AdamWDL: `num_threads`")
        Traceback (most recent call last):
        ...
        ValueError: AdamWDL: `num_threads` must be an int >= 1 (or None), got 0.
    """
    if num_threads is not None:
        # `owner` names the argument as its owner takes it ("AdamWDL: `num_threads`")
        return checked_count(num_threads, owner, minimum=1, meaning="or None")
    from_env = environment_count(NUM_THREADS_ENV)
    if from_env is not None:
        return from_env
    return max(1, available_cores() // local_ranks())


def resolve_min_chunk_numel() -> int:
    """The smallest chunk a range is split into: :data:`MIN_CHUNK_ENV` if set, else :data:`MIN_CHUNK_NUMEL`."""
    from_env = environment_count(MIN_CHUNK_ENV)
    return MIN_CHUNK_NUMEL if from_env is None else from_env


def chunk_bounds(start: int, stop: int, threads: int, min_chunk: int) -> list[tuple[int, int]]:
    """``[start, stop)`` as at most ``threads`` contiguous chunks of at least
    ``min_chunk`` elements (about equal; boundaries on multiples of
    :data:`CHUNK_ALIGN` from ``start``); one chunk if too small to split.

    Examples:
        >>> chunk_bounds(0, 1000, threads=3, min_chunk=100)
        [(0, 336), (336, 672), (672, 1000)]
        >>> chunk_bounds(10, 150, threads=4, min_chunk=100)
        [(10, 150)]
    """
    count = min(threads, (stop - start) // max(min_chunk, CHUNK_ALIGN))
    if count <= 1:
        return [(start, stop)]
    size = stop - start
    edges = [start + min(size, round(i * size / count / CHUNK_ALIGN) * CHUNK_ALIGN) for i in range(count)] + [stop]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def is_cpu_place(place: Any) -> bool:
    """Whether ``place`` is the CPU: a tensor's ``place``, or ``paddle.CPUPlace()``,
    which has no ``is_cpu_place`` on Paddle 3.0.0."""
    method = getattr(place, "is_cpu_place", None)
    return method() if method is not None else type(place).__name__ == "CPUPlace"


class _Batch:
    """Tasks shared out by index between the calling thread and the workers."""

    __slots__ = ("tasks", "next_index", "lock", "left", "done", "error")

    def __init__(self, tasks: Sequence[Callable[[], Any]]) -> None:
        self.tasks = tasks
        self.next_index = itertools.count()  # (next() of a count is atomic under the GIL)
        self.lock = threading.Lock()
        self.left = len(tasks)
        self.done = threading.Event()
        self.error: BaseException | None = None

    def work(self) -> None:
        """Run tasks until none is left to take."""
        tasks = self.tasks
        finished = 0
        error = None
        for index in self.next_index:
            if index >= len(tasks):
                break
            try:
                tasks[index]()
            except BaseException as exc:  # (kept for the caller, who re-raises it)
                error = exc
            finished += 1
        if finished or error is not None:
            with self.lock:
                if error is not None and self.error is None:
                    self.error = error
                self.left -= finished
                if self.left == 0:
                    self.done.set()


class _Pool:
    """Daemon worker threads taking batches from one queue."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()

    def ensure(self, workers: int) -> None:
        with self.lock:
            while len(self.threads) < workers:
                thread = threading.Thread(
                    target=self._serve, name=f"paddle_llrd-flat-{len(self.threads)}", daemon=True
                )
                thread.start()
                self.threads.append(thread)

    def _serve(self) -> None:
        while True:
            batch = self.jobs.get()
            if batch is None:
                return
            batch.work()

    def shutdown(self) -> None:
        with self.lock:
            threads, self.threads = self.threads, []
        for _ in threads:
            self.jobs.put(None)
        for thread in threads:
            thread.join(timeout=10.0)


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _shared_pool(workers: int) -> _Pool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = _Pool()
        pool = _pool
    pool.ensure(workers)
    return pool


@atexit.register
def _shutdown_pool() -> None:
    global _pool
    pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown()


def _forget_pool_in_child() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()  # (its threads were not forked)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


class FlatThreads:
    """One owner's thread count and crossover, and the split of its ranges.

    Args:
        num_threads: see :func:`resolve_num_threads` (``owner`` names the
            argument in its errors).

    Examples:
        >>> import paddle
        >>> threads = FlatThreads(2, min_chunk_numel=64)
        >>> threads.bounds(0, 256, paddle.CPUPlace())
        [(0, 128), (128, 256)]
        >>> buffer = paddle.ones([256])
        >>> threads.run([lambda: buffer._slice(0, 128).scale_(2.0),
        ...              lambda: buffer._slice(128, 256).scale_(3.0)])
        >>> buffer.numpy()[[0, 255]].tolist()
        [2.0, 3.0]
    """

    def __init__(self, num_threads: int | None = None, *, min_chunk_numel: int | None = None,
                 owner: str = "num_threads") -> None:
        self.count = resolve_num_threads(num_threads, owner=owner)
        self.min_chunk_numel = (
            resolve_min_chunk_numel() if min_chunk_numel is None
            else checked_count(min_chunk_numel, "min_chunk_numel", owner="FlatThreads", minimum=1,
                               meaning="or None")
        )

    def bounds(self, start: int, stop: int, place: Any) -> list[tuple[int, int]]:
        """The chunks of ``[start, stop)`` on ``place``: one unless it is a CPU place."""
        if self.count == 1 or not is_cpu_place(place):
            return [(start, stop)]
        return chunk_bounds(start, stop, self.count, self.min_chunk_numel)

    def run(self, tasks: Sequence[Callable[[], Any]]) -> None:
        """Run ``tasks`` (independent: disjoint ranges), the calling thread
        among the workers; returns when all have finished, re-raising the
        first error one raised."""
        if len(tasks) <= 1 or self.count == 1:
            for task in tasks:
                task()
            return
        batch = _Batch(tasks)
        workers = min(self.count, len(tasks)) - 1
        pool = _shared_pool(workers)
        for _ in range(workers):
            pool.jobs.put(batch)
        batch.work()
        batch.done.wait()
        if batch.error is not None:
            raise batch.error
