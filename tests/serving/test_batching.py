"""Dynamic batching: concurrent requests share forward passes, each gets exactly its own rows,
and one request's failure never fails another's."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmatch.matcher import Matcher
from attnmatch.serving import Batcher, ServeSettings, create_app
from attnmatch.tasks import Task
from tests.models.conftest import tiny_inputs, tiny_model


class _Recorder:
    """A stand-in model: output row = (length of left, length of right); records every call."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[int] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.calls.append(len(pairs))
        self.threads.add(threading.current_thread().name)
        if self.fail_on is not None and any(self.fail_on in a for a, _ in pairs):
            raise ValueError(f"pair with {self.fail_on!r} refused")
        return np.array([[len(a), len(b)] for a, b in pairs], dtype=np.float32)


def _requests(n: int) -> list[list[tuple[str, str]]]:
    return [[("q" * (i + 1), "c" * (j + 1)) for j in range(i % 3 + 1)] for i in range(n)]


async def _gather(batcher: Batcher, requests: list[list[tuple[str, str]]]) -> list[np.ndarray]:
    try:
        return list(await asyncio.gather(*(batcher.submit(r) for r in requests)))
    finally:
        await batcher.aclose()


def test_concurrent_requests_share_forwards_and_get_their_own_rows() -> None:
    run = _Recorder()
    requests = _requests(16)
    batcher = Batcher(run, max_batch_pairs=256, max_wait_ms=50)
    results = asyncio.run(_gather(batcher, requests))
    assert len(run.calls) < 16  # shared
    assert sum(run.calls) == sum(map(len, requests))
    assert len(run.threads) == 1 and run.threads.pop().startswith("attnmatch-model")  # off-loop
    for request, got in zip(requests, results, strict=True):
        np.testing.assert_array_equal(got, run(request))


def test_batches_hold_at_most_max_batch_pairs() -> None:
    run = _Recorder()
    requests = _requests(16)  # 1-3 pairs each, 31 in all
    results = asyncio.run(_gather(Batcher(run, max_batch_pairs=5, max_wait_ms=50), requests))
    assert max(run.calls) <= 5 and sum(run.calls) == 31
    for request, got in zip(requests, results, strict=True):
        np.testing.assert_array_equal(got, run(request))


def test_a_request_larger_than_a_batch_runs_alone() -> None:
    run = _Recorder()
    big = [("q", "c" * i) for i in range(1, 9)]
    got = asyncio.run(_gather(Batcher(run, max_batch_pairs=4, max_wait_ms=1), [big]))
    np.testing.assert_array_equal(got[0], run(big))


def test_without_batching_every_request_runs_alone() -> None:
    run = _Recorder()
    requests = _requests(6)
    results = asyncio.run(_gather(Batcher(run, max_wait_ms=50, batching=False), requests))
    assert run.calls == [len(r) for r in requests]
    for request, got in zip(requests, results, strict=True):
        np.testing.assert_array_equal(got, run(request))


def test_a_failing_request_does_not_fail_the_others() -> None:
    run = _Recorder(fail_on="BAD")
    requests = [[("q", "a")], [("BAD", "b")], [("qq", "c")]]

    async def go() -> list[object]:
        batcher = Batcher(run, max_wait_ms=50)
        try:
            return list(
                await asyncio.gather(*(batcher.submit(r) for r in requests), return_exceptions=True)
            )
        finally:
            await batcher.aclose()

    first, bad, last = asyncio.run(go())
    assert isinstance(bad, ValueError) and "'BAD'" in str(bad)
    np.testing.assert_array_equal(first, [[1, 1]])
    np.testing.assert_array_equal(last, [[2, 1]])


def test_the_event_loop_stays_responsive_during_a_forward() -> None:
    def slow(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        time.sleep(0.2)
        return np.zeros((len(pairs), 1), dtype=np.float32)

    async def go() -> float:
        batcher = Batcher(slow, max_wait_ms=0)
        task = asyncio.create_task(batcher.submit([("a", "b")]))
        await asyncio.sleep(0.01)
        start = time.perf_counter()
        await asyncio.sleep(0.01)  # the loop runs while the forward sleeps in its thread
        waited = time.perf_counter() - start
        await task
        await batcher.aclose()
        return waited

    assert asyncio.run(go()) < 0.1


def test_a_request_that_queued_behind_a_forward_does_not_wait_again() -> None:
    """max_wait_ms counts from a request's arrival: B arrives while A's forward runs, has waited
    its max_wait_ms when the model is free, and runs at once (before: max_wait_ms later)."""
    spans: list[tuple[float, float]] = []

    def slow(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        start = time.monotonic()
        time.sleep(0.8)
        spans.append((start, time.monotonic()))
        return np.zeros((len(pairs), 1), dtype=np.float32)

    async def go() -> None:
        batcher = Batcher(slow, max_wait_ms=500)
        first = asyncio.create_task(batcher.submit([("a", "b")]))
        await asyncio.sleep(0.6)  # A's forward runs from 0.5 s
        await asyncio.gather(first, batcher.submit([("c", "d")]))
        await batcher.aclose()

    asyncio.run(go())
    (_, first_end), (second_start, _) = spans
    assert second_start - first_end < 0.25  # not max_wait_ms (0.5 s) after the model is free


def test_on_thread_start_runs_once_on_the_model_thread_before_any_forward() -> None:
    events: list[tuple[str, str]] = []

    def start() -> None:
        events.append(("start", threading.current_thread().name))

    def run(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        events.append(("run", threading.current_thread().name))
        return np.zeros((len(pairs), 1), dtype=np.float32)

    batcher = Batcher(run, max_wait_ms=0, on_thread_start=start)
    asyncio.run(_gather(batcher, _requests(3)))
    asyncio.run(_gather(batcher, _requests(2)))  # after aclose: a new thread, started again
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds.count("start") == 2
    assert kinds.index("start", 1) > kinds.index("run")  # the second start after the first runs
    threads = {name for _, name in events}
    assert all(name.startswith("attnmatch-model") for name in threads)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_batch_pairs": 0}, "max_batch_pairs"),
        ({"max_batch_pairs": 2.5}, "max_batch_pairs"),
        ({"max_wait_ms": -1}, "max_wait_ms"),
        ({"max_wait_ms": float("nan")}, "max_wait_ms"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Batcher(_Recorder(), **options)  # type: ignore[arg-type]


def test_concurrent_http_requests_share_a_forward_with_the_same_scores() -> None:
    """16 concurrent /v1/rank requests to a real model: fewer than 16 forwards, and each
    request's scores equal the Matcher's alone."""
    model = tiny_model("amvlstm_q", num_outputs=1)
    matcher = Matcher(
        model=model.eval(),
        model_type="amvlstm_q",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    queries = [" ".join(f"w{(i + k) % 30 + 2}" for k in range(i % 4 + 1)) for i in range(16)]
    candidates = ["w3 w4 w5", "w9", "w10 w11 w12 w13 w14", "w2 w3"]
    app = create_app({"m": matcher}, settings=ServeSettings(max_wait_ms=50))
    with TestClient(app) as client:

        async def go() -> list[dict[str, object]]:
            import httpx

            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                responses = await asyncio.gather(
                    *(
                        http.post("/v1/rank", json={"query": q, "candidates": candidates})
                        for q in queries
                    )
                )
            return [r.json() for r in responses]

        results = asyncio.run(go())
        forwards = app.state.batchers["m"].forwards
        metrics = client.get("/metrics").text
    assert 1 <= forwards < 16
    assert f'attnmatch_batch_pairs_count{{model="m"}} {float(forwards)}' in metrics
    for query, got in zip(queries, results, strict=True):
        want = matcher.rank(query, candidates)
        assert [r["index"] for r in got["results"]] == [r.index for r in want]  # type: ignore[index]
        np.testing.assert_allclose(
            [r["score"] for r in got["results"]],  # type: ignore[index]
            [r.score for r in want],
            rtol=1e-5,
            atol=1e-5,
        )


def test_an_app_serves_again_after_its_lifespan_ends() -> None:
    model = tiny_model("cbow_mlp", num_outputs=1)
    matcher = Matcher(
        model=model.eval(),
        model_type="cbow_mlp",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    app = create_app({"m": matcher}, settings=ServeSettings())
    for _ in range(2):
        with TestClient(app) as client:
            response = client.post("/v1/score", json={"pairs": [["w1", "w2"]]})
            assert response.status_code == 200, response.text
    response = TestClient(app).post("/v1/score", json={"pairs": [["w1", "w2"]]})  # no lifespan
    assert response.status_code == 200, response.text
