"""Dynamic batching: concurrent requests to one model share one forward pass.

A request puts its pairs on the model's queue and waits on a future. One worker per model takes
the first waiting request, then gathers more until the batch holds `max_batch_pairs` pairs or
`max_wait_ms` have passed since the first arrived (so under load, when requests queue while a
forward pass runs, the next batch starts as soon as the model is free). It runs one
`run(pairs)` (e.g. `Matcher.predict_pairs`) on a single worker thread (the event loop keeps serving
meanwhile; one thread per model, so a model never runs two forwards at once), and hands each
request its own rows of the result.

Why: a forward over 64 pairs costs far less than 64 forwards over one pair (the matrix products
are wider, the Python overhead is paid once), so under load the throughput grows with the
batch while a lone request waits at most `max_wait_ms` more. A request larger than
`max_batch_pairs` is split into parts of `max_batch_pairs` pairs, queued one after another (so
other requests share the model between them) and joined by `join`; without `join` it runs alone
(the Matcher cuts it into its own inference batches). If a batch
fails, each of its requests is retried alone, so one request's error never fails another's.
With `batching=False` every request runs alone (the baseline of `benchmarks/serve_load.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")  # what `run` gives: rows that a slice cuts (an array, `Predictions`)
Pairs = Sequence[tuple[str, str]]


@dataclass
class _Request(Generic[R]):
    pairs: Pairs
    future: asyncio.Future[R]
    arrived: float  # the loop's clock when it was queued


@dataclass
class _Worker(Generic[R]):
    """The queue and worker task of one event loop (a test client may run several loops)."""

    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[_Request[R]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None


class Batcher(Generic[R]):
    """Gathers the pairs of concurrent requests into shared calls of `run`.

    Args:
        run: pairs -> one row per pair, rows cut by a slice (e.g. `matcher.predict_pairs`:
            `Predictions`; `matcher.outputs`: an array).
        max_batch_pairs: the most pairs one gathered call holds (>= 1).
        max_wait_ms: how long the first request of a batch waits for others, counted from its
            arrival (>= 0).
        batching: False: every request runs alone, in arrival order.
        on_batch: called with the number of pairs of every call of `run` (metrics).
        on_thread_start: called once on the model's thread when it starts, before any `run`
            (e.g. to set torch's intra-op threads for that thread).
        join: the results of consecutive parts of one request's pairs as one; given, a request
            over `max_batch_pairs` is queued in parts of that many pairs.

    Example:
        >>> batcher = Batcher(matcher.predict_pairs, max_batch_pairs=256, max_wait_ms=5)
        >>> predictions = await batcher.submit([("query", "a candidate")])  # one pair
    """

    def __init__(
        self,
        run: Callable[[Pairs], R],
        *,
        max_batch_pairs: int = 256,
        max_wait_ms: float = 5,
        batching: bool = True,
        on_batch: Callable[[int], None] | None = None,
        on_thread_start: Callable[[], None] | None = None,
        join: Callable[[list[R]], R] | None = None,
    ) -> None:
        if isinstance(max_batch_pairs, bool) or not isinstance(max_batch_pairs, int):
            raise ValueError(f"max_batch_pairs must be an integer >= 1, got {max_batch_pairs!r}")
        if max_batch_pairs < 1:
            raise ValueError(f"max_batch_pairs must be >= 1, got {max_batch_pairs}")
        if not max_wait_ms >= 0 or max_wait_ms == float("inf"):
            raise ValueError(f"max_wait_ms must be a finite number >= 0, got {max_wait_ms!r}")
        self._run = run
        self.max_batch_pairs = max_batch_pairs
        self.max_wait_s = max_wait_ms / 1000
        self.batching = batching
        self._on_batch = on_batch
        self._on_thread_start = on_thread_start
        self._join = join
        self._executor: ThreadPoolExecutor | None = None  # made on first use, again after aclose
        self._worker: _Worker[R] | None = None
        self.forwards = 0  # calls of `run` so far

    async def submit(self, pairs: Pairs) -> R:
        """`run(pairs)`, computed together with the pairs of concurrent requests."""
        if not self.batching:
            return await self.call(self._forward, pairs)
        size = self.max_batch_pairs
        if self._join is not None and len(pairs) > size:
            parts = [await self._queued(pairs[i : i + size]) for i in range(0, len(pairs), size)]
            return self._join(parts)
        return await self._queued(pairs)

    async def _queued(self, pairs: Pairs) -> R:
        worker = self._ensure_worker()
        future: asyncio.Future[R] = worker.loop.create_future()
        worker.queue.put_nowait(_Request(pairs, future, worker.loop.time()))
        return await future

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` on the model's thread (for work that is not batched, e.g. explain)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=1,
                thread_name_prefix="attnmatch-model",
                initializer=self._on_thread_start,
            )
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, fn, *args)

    async def aclose(self) -> None:
        """Stops the worker (requests still queued fail) and the model's thread; a later
        request starts them again (e.g. an app whose lifespan runs twice)."""
        worker, self._worker = self._worker, None
        if worker is not None and worker.task is not None:
            worker.task.cancel()
            try:
                await worker.task
            except asyncio.CancelledError:
                pass
            while not worker.queue.empty():
                request = worker.queue.get_nowait()
                if not request.future.done():
                    request.future.set_exception(RuntimeError("the server is shutting down"))
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # ----------------------------------------------------------------- internals

    def _forward(self, pairs: Pairs) -> R:
        out = self._run(pairs)
        self.forwards += 1
        if self._on_batch is not None:
            self._on_batch(len(pairs))
        return out

    def _ensure_worker(self) -> _Worker[R]:
        loop = asyncio.get_running_loop()
        worker = self._worker
        if worker is None or worker.loop is not loop or worker.task is None or worker.task.done():
            worker = _Worker[R](loop)
            worker.task = loop.create_task(self._work(worker))
            self._worker = worker
        return worker

    async def _work(self, worker: _Worker[R]) -> None:
        carry: _Request[R] | None = None
        while True:
            first = carry if carry is not None else await worker.queue.get()
            carry = None
            batch, size = [first], len(first.pairs)
            # counted from its arrival: a request that queued behind a forward pass has already
            # waited, so the next batch starts as soon as the model is free
            deadline = first.arrived + self.max_wait_s
            while size < self.max_batch_pairs:
                if worker.queue.empty():
                    left = deadline - worker.loop.time()
                    if left <= 0:
                        break
                    try:
                        request = await asyncio.wait_for(worker.queue.get(), left)
                    except TimeoutError:
                        break
                else:
                    request = worker.queue.get_nowait()
                if size + len(request.pairs) > self.max_batch_pairs:
                    carry = request  # it starts the next batch
                    break
                batch.append(request)
                size += len(request.pairs)
            await self._answer([r for r in batch if not r.future.done()])

    async def _answer(self, batch: list[_Request[R]]) -> None:
        if not batch:
            return
        pairs = [pair for request in batch for pair in request.pairs]
        try:
            out = await self.call(self._forward, pairs)
        except Exception as error:
            if len(batch) == 1:
                _settle(batch[0].future, error=error)
                return
            for request in batch:  # find whose input failed; the others still get answers
                await self._answer([request])
            return
        rows: Any = out  # sliced: one part per request
        start = 0
        for request in batch:
            end = start + len(request.pairs)
            _settle(request.future, result=rows[start:end])
            start = end


def _settle(
    future: asyncio.Future[R],
    *,
    result: R | None = None,
    error: BaseException | None = None,
) -> None:
    if future.done():  # the client went away
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]
