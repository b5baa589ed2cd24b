"""The hostile-input battery against `attnmatch serve`: each limit of the HTTP service (docs/
serving.md, "Limits") attacked once.

In-process cases go through the app (`create_app`); those of the HTTP layer (headers, their
time, idle connections, several workers) through a real `attnmatch serve bm25` subprocess on a
free port, spoken to over raw sockets. Every bad request is answered 4xx or closed, never 5xx.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from attnmatch.matcher import Matcher, load_matcher
from attnmatch.serving import ServeSettings, create_app
from attnmatch.tasks import Task
from tests.hostile._util import assert_clear_error, run_cli
from tests.models.conftest import tiny_inputs, tiny_model

SRC = Path(__file__).resolve().parents[2] / "src"
CANDIDATES = ["the cat sat", "a dog ran", "cats sit on mats", "nothing here"]


@pytest.fixture(scope="module")
def bm25() -> Matcher:
    return load_matcher("bm25")


@pytest.fixture(scope="module")
def client(bm25: Matcher) -> Iterator[TestClient]:
    with TestClient(create_app({"bm25": bm25})) as c:
        yield c


def _detail(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    return str(detail)


# ----------------------------------------------------------------- texts UTF-8 cannot hold


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        pytest.param(
            "/v1/rank",
            '{"query": "q", "candidates": ["a", "x\\ud800"]}',
            "candidates[1]",
            id="c2-lone-surrogate-candidate",
        ),
        pytest.param(
            "/v1/rank",
            '{"query": "\\udfff", "candidates": ["a"]}',
            "query",
            id="c2-lone-surrogate-query",
        ),
        pytest.param(
            "/rerank",
            '{"query": "q", "texts": ["\\ud83d"], "return_text": true}',
            "texts[0]",
            id="c2-lone-surrogate-rerank-text",
        ),
        pytest.param(
            "/v1/score",
            '{"pairs": [["a", "b"], ["\\ud800", "c"]]}',
            "pairs[1][0]",
            id="c2-lone-surrogate-pair",
        ),
        pytest.param(
            "/v1/rank",
            '{"model": "\\ud800", "query": "q", "candidates": ["a"]}',
            "model",
            id="c2-lone-surrogate-model-name",
        ),
        pytest.param(
            "/v1/rank",
            '{"\\ud800": 1, "query": "q", "candidates": ["a"]}',
            "body",  # not even a key: the JSON parser refuses it
            id="c2-lone-surrogate-unknown-key",
        ),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(
    client: TestClient, path: str, body: str, field: str
) -> None:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    detail = _detail(response, 422)
    assert detail.startswith(field), detail


def test_a_paired_surrogate_escape_is_a_character_and_scores(client: TestClient) -> None:
    body = '{"query": "smile \\ud83d\\ude00", "candidates": ["smile \\ud83d\\ude00", "frown"]}'
    response = client.post("/v1/rank", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.json()["results"][0]["text"] == "smile \U0001f600"


# ----------------------------------------------------------------- hosts, keys, load


def test_c4_a_host_not_allowed_is_a_400(bm25: Matcher) -> None:
    settings = ServeSettings(allowed_hosts=("localhost", "127.0.0.1"))
    with TestClient(
        create_app({"bm25": bm25}, settings=settings), base_url="http://evil.test"
    ) as c:
        assert c.get("/v1/models").status_code == 400
    with TestClient(
        create_app({"bm25": bm25}, settings=settings), base_url="http://localhost"
    ) as c:
        assert c.get("/v1/models").status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="c4-api-key-missing"),
        pytest.param({"authorization": "Bearer wrong"}, id="c4-api-key-wrong"),
        pytest.param({"authorization": "s3cret"}, id="c4-api-key-without-bearer"),
        pytest.param({"authorization": "Bearer s3cret "}, id="c4-api-key-trailing-space"),
        pytest.param({"authorization": "bearer S3CRET"}, id="c4-api-key-other-case"),
    ],
)
def test_api_key_refuses_a_missing_or_wrong_key(bm25: Matcher, headers: dict[str, str]) -> None:
    app = create_app({"bm25": bm25}, settings=ServeSettings(api_key="s3cret"))
    body = {"query": "cat", "candidates": CANDIDATES}
    with TestClient(app) as c:
        for method, path in [("POST", "/v1/rank"), ("GET", "/v1/models"), ("GET", "/metrics")]:
            response = c.request(
                method, path, json=body if method == "POST" else None, headers=headers
            )
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert "Authorization: Bearer" in response.json()["detail"]
        assert c.get("/healthz", headers=headers).status_code == 200  # probes stay open
        assert c.get("/readyz", headers=headers).status_code == 200
        good = c.post("/v1/rank", json=body, headers={"authorization": "Bearer s3cret"})
        assert good.status_code == 200 and good.json()["results"][0]["text"] == "the cat sat"


@pytest.mark.parametrize("key", ["", "two words", "caf\u00e9", "tab\there"])
def test_c4_an_api_key_that_no_header_can_carry_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="api_key"):
        ServeSettings(api_key=key)


def test_c4_the_cli_reads_the_api_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import uvicorn

    seen: dict[str, Any] = {}

    def run(server: uvicorn.Server) -> None:  # instead of listening
        with TestClient(server.config.app, base_url="http://localhost") as c:
            seen["without"] = c.get("/v1/models").status_code
            seen["with"] = c.get("/v1/models", headers={"authorization": "Bearer k3y"}).status_code

    monkeypatch.setattr(uvicorn.Server, "run", run)
    monkeypatch.setenv("ATTNMATCH_API_KEY", "k3y")
    assert run_cli(["serve", "bm25", "--port", "0"], capsys).code == 0
    assert seen == {"without": 401, "with": 200}
    monkeypatch.setenv("ATTNMATCH_API_KEY", "two words")
    assert_clear_error(run_cli(["serve", "bm25", "--port", "0"], capsys), "--api-key")
    monkeypatch.setenv("ATTNMATCH_API_KEY", "")  # refused as --api-key '' is, never open
    assert_clear_error(run_cli(["serve", "bm25", "--port", "0"], capsys), "ATTNMATCH_API_KEY")


def test_c6_beyond_max_concurrent_requests_is_a_429_with_retry_after(bm25: Matcher) -> None:
    """Two requests held in the model; a third is refused at once, and served once they end."""
    app = create_app({"bm25": bm25}, settings=ServeSettings(max_concurrent_requests=2))
    batcher = app.state.batchers["bm25"]
    release = asyncio.Event()
    real_submit = batcher.submit

    async def held(pairs: Any) -> Any:
        await release.wait()
        return await real_submit(pairs)

    batcher.submit = held
    body = {"query": "cat", "candidates": CANDIDATES}

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            first = [asyncio.create_task(c.post("/v1/rank", json=body)) for _ in range(2)]
            await asyncio.sleep(0.2)
            refused = await c.post("/v1/rank", json=body)
            probe = await c.get("/healthz")  # probes are not counted
            metrics = await c.get("/metrics")
            release.set()
            done = await asyncio.gather(*first)
            after = await c.post("/v1/rank", json=body)
            await batcher.aclose()
            return [refused, probe, metrics, *done, after]

    refused, probe, metrics, *served = asyncio.run(scenario())
    detail = _detail(refused, 429)
    assert refused.headers["retry-after"] == "1" and "--max-concurrent-requests" in detail
    assert probe.status_code == 200 and metrics.status_code == 200
    assert [r.status_code for r in served] == [200, 200, 200]


def test_c6_a_body_slower_than_its_timeout_is_a_408(bm25: Matcher) -> None:
    app = create_app({"bm25": bm25}, settings=ServeSettings(body_timeout_s=0.2))
    sent: list[dict[str, Any]] = []

    async def scenario() -> None:
        chunks = [{"type": "http.request", "body": b'{"query": "ca', "more_body": True}]

        async def receive() -> dict[str, Any]:
            if chunks:
                return chunks.pop()
            await asyncio.sleep(3600)  # the rest never comes
            raise AssertionError

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http", "method": "POST", "path": "/v1/rank", "raw_path": b"/v1/rank",
            "query_string": b"", "headers": [(b"host", b"localhost")], "http_version": "1.1",
            "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
            "root_path": "", "asgi": {"version": "3.0"},
        }  # fmt: skip
        await asyncio.wait_for(app(scope, receive, send), 5)

    asyncio.run(scenario())
    assert sent[0]["status"] == 408
    assert "0.2 s" in json.loads(sent[1]["body"])["detail"]


def test_c6_a_request_over_max_batch_is_queued_in_parts_equal_to_one() -> None:
    """A request of 2,600 pairs, where a forward holds 256: no 413, the scores of one call, and
    the labels and probabilities of a classifier joined in order."""
    model = tiny_model("mvlstm", num_outputs=3)
    task = Task(kind="classification", class_names=("no", "maybe", "yes"))
    matcher = Matcher(model=model.eval(), model_type="mvlstm", inputs=tiny_inputs(model), task=task)
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(["w1", "w2", "w3", "w4", "w5"], 3)) for _ in range(2600)]
    pairs = [("w1 w2", t) for t in texts]
    with TestClient(create_app({"nli": matcher})) as c:
        scored = c.post("/v1/score", json={"pairs": pairs})
        classified = c.post("/v1/classify", json={"pairs": pairs})
        forwards = c.app.state.batchers["nli"].forwards  # type: ignore[attr-defined]
    assert scored.status_code == 200 and classified.status_code == 200
    np.testing.assert_allclose(scored.json()["scores"], matcher.score(pairs), rtol=1e-5, atol=1e-6)
    assert classified.json()["labels"] == matcher.classify(pairs)
    assert forwards == 22  # 2 requests x ceil(2600 / 256)


# ----------------------------------------------------------------- a real server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server:
    def __init__(self, *args: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(SRC), env.get("PYTHONPATH"))))
        command = [sys.executable, "-m", "attnmatch", "serve", "bm25", "--port", str(self.port)]
        self.process = subprocess.Popen(
            [*command, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.stderr.read()  # type: ignore[union-attr]
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError("the server did not start")

    def raw(self, data: bytes, wait: float = 10) -> bytes:
        """What the server answers to `data` sent on a fresh connection (b"" once it closes)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=wait) as sock:
            sock.sendall(data)
            return _read_all(sock)

    def stop(self) -> str:
        self.process.terminate()
        try:
            _, err = self.process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, err = self.process.communicate()
        return err.decode(errors="replace")


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _status(answer: bytes) -> int | None:
    match = re.match(rb"HTTP/1\.1 (\d{3}) ", answer)
    return int(match[1]) if match else None


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    s = _Server("--header-timeout", "1", "--keep-alive-timeout", "1")
    yield s
    s.stop()


GET = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(GET + b"X-Big: " + b"a" * 200_000 + b"\r\n\r\n", id="c6-header-200kb"),
        pytest.param(GET + b"".join(b"X-%d: 1\r\n" % i for i in range(101)) + b"\r\n", id="c6-101-headers"),
        pytest.param(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n", id="c6-url-20kb"),
        pytest.param(GET + b"".join(b"X-%d: %s\r\n" % (i, b"b" * 900) for i in range(20)) + b"\r\n", id="c6-headers-18kb-in-all"),
    ],
)  # fmt: skip
def test_headers_over_their_limit_are_a_431_and_closed(server: _Server, data: bytes) -> None:
    answer = server.raw(data)
    assert _status(answer) == 431, answer[:200]
    assert b"connection: close" in answer


def test_headers_at_their_limit_are_served(server: _Server) -> None:
    data = GET + b"".join(b"X-%d: 1\r\n" % i for i in range(90)) + b"X-Big: " + b"a" * 10_000
    assert _status(server.raw(data + b"\r\n\r\n")) == 200


def test_c6_an_endless_header_is_cut_after_the_limit(server: _Server) -> None:
    """40 MB of one header: the server closes the connection long before (what was sent
    beyond the limit is the kernel's socket buffers)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(GET + b"X-Endless: ")
        sent = 0
        with pytest.raises(OSError):
            while sent < 40_000_000:
                sock.sendall(b"a" * 65536)
                sent += 65536
    assert sent < 20_000_000
    assert _status(server.raw(GET + b"\r\n")) == 200  # and serves the next client


@pytest.mark.parametrize(
    ("data", "status"),
    [
        pytest.param(b"GET /healthz HTTP/1.1\r\nHost: loc", 408, id="c6-slowloris-half-headers"),
        pytest.param(b"", None, id="c6-connection-that-sends-nothing"),
        pytest.param(GET + b"\r\n", 200, id="c6-keep-alive-idle-after-an-answer"),
    ],
)
def test_c6_a_slow_or_idle_connection_is_closed(
    server: _Server, data: bytes, status: int | None
) -> None:
    start = time.monotonic()
    answer = server.raw(data, wait=15)  # returns when the server closes
    assert time.monotonic() - start < 8
    assert _status(answer) == status


def test_c6_slowloris_trickle_is_closed_at_the_header_timeout(server: _Server) -> None:
    """One byte every 0.3 s: the timeout counts from the first byte, not the last."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
        with pytest.raises(OSError):
            for byte in GET + b"X-Slow: " + b"a" * 100:
                sock.sendall(bytes([byte]))
                time.sleep(0.3)
                if time.monotonic() - start > 10:
                    break
        assert time.monotonic() - start < 6
        answer = _read_all(sock)
    assert _status(answer) in (408, None)


def test_c2_a_lone_surrogate_over_http_is_a_422(server: _Server) -> None:
    body = b'{"query": "q", "candidates": ["\\ud800"]}'
    head = b"POST /v1/rank HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    answer = server.raw(
        head + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
    )
    assert _status(answer) == 422 and b"candidates[0]" in answer


def test_c4_another_host_is_a_400_on_a_loopback_address(server: _Server) -> None:
    assert _status(server.raw(b"GET /v1/models HTTP/1.1\r\nHost: rebound.example\r\n\r\n")) == 400
    assert _status(server.raw(b"GET /v1/models HTTP/1.1\r\nHost: localhost:8000\r\n\r\n")) == 200


@pytest.mark.slow  # two worker processes start: about 20 s on an idle 2-core machine
def test_c3_two_workers_serve_one_port_and_metrics_count_both() -> None:
    """--workers 2: every answer right, and /metrics (whichever worker answers) counts the
    requests of both processes."""
    server = _Server("--workers", "2")
    try:
        body = {"query": "cat", "candidates": CANDIDATES}
        pids: set[int] = set()
        with httpx.Client(base_url=server.url) as c:  # a new connection per request
            for _ in range(40):
                got = c.post("/v1/rank", json=body, headers={"connection": "close"})
                assert got.json()["results"][0]["text"] == "the cat sat"
            metrics = c.get("/metrics", headers={"connection": "close"}).text
        children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
        if children.exists():
            pids = set(map(int, children.read_text().split()))
    finally:
        log = server.stop()
    count = re.search(
        r'attnmatch_requests_total\{endpoint="/v1/rank",status="200"\} (\S+)', metrics
    )
    assert count and float(count[1]) == 40, metrics[:2000]
    assert len(pids) >= 2 or not Path("/proc").exists()
    assert "2 worker processes" in log
