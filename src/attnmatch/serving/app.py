"""The HTTP API of `attnmatch serve`: FastAPI over a dict of loaded Matchers (or exported
models on `attnmatch.runtime`, which answer the same and need no torch).

`create_app(models, settings=ServeSettings())` builds the app; the CLI runs it on uvicorn. Each
model has a `Batcher` (`attnmatch.serving.batching`) through which rank, score, classify and
rerank requests share forward passes. The endpoints and their JSON are described in
docs/serving.md.

Errors are `{"detail": "one line"}`: 422 for a body that does not fit the schema (naming the
field), 413 for a body, a list or a text over its limit (naming the field), 404 for an unknown
model, 400 for input the model refuses (the Matcher's ValueError message). Client input never
causes a 5xx. Every request is counted in `/metrics` (a Prometheus registry per app) and logged
as one JSON line on the `attnmatch.serve` logger.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from starlette.middleware.trustedhost import TrustedHostMiddleware

from attnmatch.runtime import ExportedMatcher
from attnmatch.serving.batching import Batcher
from attnmatch.serving.schemas import ExplainRequest, PairsRequest, RankRequest, RerankRequest
from attnmatch.tasks import Predictions

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher
    from attnmatch.retrieval.search import SearchIndex

log = logging.getLogger("attnmatch.serve")

STATIC = Path(__file__).parent / "static"
_PLACEHOLDER = (
    "<!doctype html><html><head><meta charset='utf-8'><title>attnmatch serve</title></head>"
    "<body><h1>attnmatch serve</h1><p>The API is under <code>/v1/</code>; see "
    "<a href='/v1/models'>/v1/models</a>.</p></body></html>"
)
# Paths counted under their own name in /metrics; any other is "other" (bounded label values).
_ENDPOINTS = (
    "/",
    "/healthz",
    "/readyz",
    "/metrics",
    "/v1/models",
    "/v1/rank",
    "/v1/score",
    "/v1/classify",
    "/v1/explain",
    "/rerank",
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """How the server batches and what it accepts.

    Args:
        max_batch_pairs: the most pairs one batched forward pass holds.
        max_wait_ms: how long a request waits for others to share its forward pass.
        batching: False: every request runs its own forward pass.
        max_candidates: the most candidates (rank, rerank) or pairs (score, classify) of one
            request; more is a 413. None: as many as the body holds (a request larger than
            `max_batch_pairs` is split into forward passes of that many pairs).
        max_request_bytes: the largest request body; larger is a 413.
        max_text_chars: the longest text (query, candidate, left, right); longer is a 413.
        threads: torch's intra-op threads on each model's thread (`set_torch_threads` there);
            None leaves torch's own setting. Under load the event loop needs a core too, so on a
            small machine 1 is often faster than torch's default of one per core.
        max_concurrent_requests: the most requests in progress at once (the probes and
            /metrics aside); beyond it a 429 with `Retry-After`. Per process.
        api_key: when set, every request but the probes (/healthz, /readyz) needs the header
            `Authorization: Bearer API_KEY`; a missing or wrong key is a 401.
        allowed_hosts: the Host header values served (Starlette's `TrustedHostMiddleware`:
            "*" any, "*.example.com" a domain's hosts); another is a 400.
        body_timeout_s: seconds to receive a request's body once its headers are in; slower is
            a 408.
    """

    max_batch_pairs: int = 256
    max_wait_ms: float = 5
    batching: bool = True
    max_candidates: int | None = None
    max_request_bytes: int = 1_000_000
    max_text_chars: int = 32_768
    threads: int | None = None
    max_concurrent_requests: int = 512
    api_key: str | None = None
    allowed_hosts: tuple[str, ...] = ("*",)
    body_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        names = (
            "max_batch_pairs",
            "max_request_bytes",
            "max_text_chars",
            "max_concurrent_requests",
        )
        for name in names:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        count = self.max_candidates
        if count is not None and (
            isinstance(count, bool) or not isinstance(count, int) or count < 1
        ):
            raise ValueError(f"max_candidates must be an integer >= 1 or None, got {count!r}")
        key = self.api_key
        if key is not None and (
            not key or not key.isascii() or not key.isprintable() or " " in key
        ):
            raise ValueError("api_key must be printable ASCII without spaces")
        if not self.allowed_hosts or any(
            not h or not isinstance(h, str) for h in self.allowed_hosts
        ):
            raise ValueError(f"allowed_hosts must be host names, got {self.allowed_hosts!r}")
        body = self.body_timeout_s
        if isinstance(body, bool) or not isinstance(body, int | float) or not 0 < body < math.inf:
            raise ValueError(f"body_timeout_s must be a number of seconds > 0, got {body!r}")
        threads = self.threads
        if threads is not None and (
            isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
        ):
            raise ValueError(f"threads must be an integer >= 1 or None, got {threads!r}")
        wait = self.max_wait_ms
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < math.inf:
            raise ValueError(f"max_wait_ms must be a finite number >= 0, got {wait!r}")


class _TooLarge(Exception):
    """A request over one of the limits: 413 with this message."""


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "attnmatch_requests",
            "HTTP requests by endpoint and status code.",
            ["endpoint", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "attnmatch_request_duration_seconds",
            "HTTP request latency by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.batch = Histogram(
            "attnmatch_batch_pairs",
            "Pairs per forward pass, by model.",
            ["model"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format: this app's registry, or, under
        `attnmatch serve --workers N` (`PROMETHEUS_MULTIPROC_DIR` set), the sum over all the
        worker processes (prometheus_client's multiprocess mode)."""
        if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)


class _Observe:
    """Outermost ASGI layer: counts, times and logs every HTTP request (one JSON line)."""

    def __init__(self, app: ASGIApp, metrics: _Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        state = scope.setdefault("state", {})
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            path = scope.get("path", "")
            endpoint = path if path in _ENDPOINTS else "other"
            seconds = time.perf_counter() - start
            self.metrics.requests.labels(endpoint, str(status)).inc()
            self.metrics.latency.labels(endpoint).observe(seconds)
            record = {
                "method": scope.get("method"),
                "path": path,
                "status": status,
                "ms": round(seconds * 1000, 3),
                "model": state.get("model"),
                "pairs": state.get("pairs"),
            }
            log.info(json.dumps(record, ensure_ascii=True))


_PROBES = ("/healthz", "/readyz")  # never refused for a key or for load
_UNQUEUED = (*_PROBES, "/metrics")  # not counted against max_concurrent_requests


class _Admit:
    """Refuses a request without the API key (401) and one beyond `max_concurrent_requests`
    in progress (429 with `Retry-After`), before its body is read."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_concurrent: int) -> None:
        self.app, self.max_concurrent = app, max_concurrent
        self.expected = None if api_key is None else b"Bearer " + api_key.encode()
        self.in_progress = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or path in _PROBES:
            await self.app(scope, receive, send)
            return
        if self.expected is not None and not self._authorized(scope):
            detail = "missing or wrong API key: send the header 'Authorization: Bearer API_KEY'"
            await _send_json(send, 401, {"detail": detail}, [(b"www-authenticate", b"Bearer")])
            return
        if path in _UNQUEUED:
            await self.app(scope, receive, send)
            return
        if self.in_progress >= self.max_concurrent:
            detail = (
                f"the server is busy: {self.in_progress} requests in progress, the limit of "
                "--max-concurrent-requests; retry later"
            )
            await _send_json(send, 429, {"detail": detail}, [(b"retry-after", b"1")])
            return
        self.in_progress += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_progress -= 1

    def _authorized(self, scope: Scope) -> bool:
        assert self.expected is not None
        given = [v for k, v in scope.get("headers", []) if k == b"authorization"]
        return len(given) == 1 and hmac.compare_digest(given[0], self.expected)


class _BodyLimit:
    """Reads the whole body before the app does: 413 over `max_bytes` (by Content-Length or as
    read), 408 when it takes longer than `timeout_s`."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app, self.max_bytes, self.timeout_s = app, max_bytes, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            async with asyncio.timeout(self.timeout_s):
                body = await self._read_limited(scope, receive)
        except TimeoutError:
            detail = f"the request body took longer than {self.timeout_s:g} s to arrive"
            await _send_json(send, 408, {"detail": detail}, [(b"connection", b"close")])
            return
        if body is None:
            detail = f"the request body is larger than the limit of {self.max_bytes} bytes"
            await _send_json(send, 413, {"detail": detail})
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read_limited(self, scope: Scope, receive: Receive) -> bytes | None:
        """The whole body, or None when it is over the limit (by Content-Length or as read)."""
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    if int(value) > self.max_bytes:
                        return None
                except ValueError:
                    pass
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # e.g. http.disconnect

    return replay


async def _send_json(
    send: Send, status: int, content: Any, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _json(content: Any) -> Response:
    """`content` (plain dicts, lists, str, int, float) as a JSON response encoded by orjson:
    UTF-8 and compact, as JSONResponse writes it, but returned as a Response, so FastAPI has no
    response model to validate or convert."""
    return Response(orjson.dumps(content), media_type="application/json")


def _one_line(text: object) -> str:
    """`text` on one line, with anything UTF-8 cannot encode (a lone surrogate) escaped."""
    line = " ".join(str(text).split())
    return line if line.isascii() else line.encode("utf-8", "backslashreplace").decode("utf-8")


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as a field path: ("body", "pairs", 3, 1) -> "pairs[3][1]"."""
    out = ""
    for part in loc:
        if part == "body" and not out:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _validation_detail(error: RequestValidationError) -> str:
    """The schema errors as one line, an unknown field first (it often explains a missing one:
    "candidate: unknown field; candidates: Field required")."""
    errors = sorted(error.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    if not errors:
        return "the request body does not fit the schema"
    if errors[0].get("type") == "json_invalid":
        where = errors[0].get("ctx", {}).get("error", "")
        return _one_line(f"the body is not valid JSON: {where}")
    parts = []
    for e in errors[:3]:
        msg = "unknown field" if e.get("type") == "extra_forbidden" else e.get("msg", "invalid")
        parts.append(f"{_field(e.get('loc', ()))}: {msg}")
    message = "; ".join(parts)
    if len(errors) > 3:
        message += f" (and {len(errors) - 3} more)"
    return _one_line(message)


def _finite_json(value: Any) -> Any:
    """`value` with every non-finite float as None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite_json(v) for v in value]
    return value


def create_app(
    models: dict[str, Matcher | ExportedMatcher],
    *,
    settings: ServeSettings | None = None,
    index: SearchIndex | None = None,
) -> FastAPI:
    """The FastAPI app serving `models` (name -> Matcher; the first is the default model),
    and `index` at `POST /v1/search` when given (`attnmatch.serving.search`).

    Raises:
        ValueError: no models, or a name that is empty or not a string.
    """
    settings = settings or ServeSettings()
    if not models:
        raise ValueError("no models to serve: give at least one")
    for name in models:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"model names must be non-empty strings, got {name!r}")
    metrics = _Metrics()
    service = _Service(dict(models), _batchers(models, settings, metrics), settings, metrics)
    app = FastAPI(
        title="attnmatch serve", lifespan=service.lifespan, docs_url="/docs", redoc_url=None
    )
    app.state.models = service.models
    app.state.batchers = service.batchers
    app.state.settings = settings
    app.state.registry = metrics.registry
    _add_error_handlers(app)
    _add_routes(app, service)
    if index is not None:  # imported here: retrieval needs bm25s (and torch for dense search)
        from attnmatch.serving.search import add_search_route

        add_search_route(app, index)
    _add_middleware(app, settings, metrics)
    return app


def _add_middleware(app: FastAPI, settings: ServeSettings, metrics: _Metrics) -> None:
    """The layers before the routes, outermost first: metrics and log, allowed hosts, API key
    and concurrency, the body's size and time."""
    app.add_middleware(
        _BodyLimit, max_bytes=settings.max_request_bytes, timeout_s=settings.body_timeout_s
    )
    app.add_middleware(
        _Admit, api_key=settings.api_key, max_concurrent=settings.max_concurrent_requests
    )
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))
    app.add_middleware(_Observe, metrics=metrics)


def _batchers(
    models: dict[str, Matcher | ExportedMatcher], settings: ServeSettings, metrics: _Metrics
) -> dict[str, Batcher[Predictions]]:
    """One `Batcher` of `Matcher.predict_pairs` per model, on the model's own thread (torch's
    threads set there for a torch model; an exported model's sessions took theirs at load)."""

    def set_threads() -> None:  # on each model's thread, before its first forward pass
        from attnmatch.devices import set_torch_threads

        if settings.threads is not None:
            set_torch_threads(settings.threads)

    return {
        name: Batcher(
            matcher.predict_pairs,
            max_batch_pairs=settings.max_batch_pairs,
            max_wait_ms=settings.max_wait_ms,
            batching=settings.batching,
            on_batch=metrics.batch.labels(name).observe,
            on_thread_start=None if isinstance(matcher, ExportedMatcher) else set_threads,
            join=_joined,
        )
        for name, matcher in models.items()
    }


def _joined(parts: list[Predictions]) -> Predictions:
    """The predictions of consecutive parts of one request's pairs, as one."""
    first = parts[0]

    def cat(arrays: list[Any]) -> Any:
        return None if arrays[0] is None else np.concatenate(arrays)

    return Predictions(
        scores=np.concatenate([p.scores for p in parts]),
        relevance=cat([p.relevance for p in parts]),
        labels=None if first.labels is None else [x for p in parts for x in p.labels or []],
        probabilities=cat([p.probabilities for p in parts]),
        class_names=first.class_names,
    )


def _add_error_handlers(app: FastAPI) -> None:
    """The one-line `{"detail": ...}` of each error (module docstring)."""
    app.add_exception_handler(RequestValidationError, _invalid)  # type: ignore[arg-type]
    app.add_exception_handler(_TooLarge, _too_large)
    app.add_exception_handler(ValueError, _refused)
    app.add_exception_handler(NotImplementedError, _refused)
    app.add_exception_handler(Exception, _failed)


async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
    return JSONResponse({"detail": _validation_detail(error)}, status_code=422)


async def _too_large(request: Request, error: Exception) -> JSONResponse:
    return JSONResponse({"detail": _one_line(error)}, status_code=413)


async def _refused(request: Request, error: Exception) -> JSONResponse:
    fallback = "not supported" if isinstance(error, NotImplementedError) else "invalid input"
    return JSONResponse({"detail": _one_line(error) or fallback}, status_code=400)


async def _failed(request: Request, error: Exception) -> JSONResponse:
    log.exception("internal error on %s", request.url.path)
    detail = f"internal error: {type(error).__name__} (see the server log)"
    return JSONResponse({"detail": detail}, status_code=500)


def _add_routes(app: FastAPI, service: _Service) -> None:
    app.get("/", response_class=HTMLResponse, include_in_schema=False)(_page)
    app.get("/healthz")(_healthz)
    app.get("/readyz")(service.readyz)
    app.get("/metrics", include_in_schema=False)(service.prometheus)
    app.get("/v1/models")(service.list_models)
    app.post("/v1/rank")(service.rank)
    app.post("/v1/score")(service.score)
    app.post("/v1/classify")(service.classify)
    app.post("/v1/explain")(service.explain)
    app.post("/rerank")(service.rerank)


async def _page() -> HTMLResponse:
    index = STATIC / "index.html"
    try:
        return HTMLResponse(index.read_text(encoding="utf-8"))
    except OSError:
        return HTMLResponse(_PLACEHOLDER)


async def _healthz() -> dict[str, str]:
    return {"status": "ok"}


@dataclass
class _Service:
    """The models served with their batchers and limits; its methods are the endpoints that
    need them. Every prediction is the Matcher's (`predict_pairs`): the service decides
    nothing about tasks."""

    models: dict[str, Matcher | ExportedMatcher]
    batchers: dict[str, Batcher[Predictions]]
    settings: ServeSettings
    metrics: _Metrics

    @asynccontextmanager
    async def lifespan(self, app: FastAPI) -> AsyncIterator[None]:
        yield
        for batcher in self.batchers.values():
            await batcher.aclose()

    # ------------------------------------------------------------- helpers

    def pick(self, request: Request, name: str | None) -> tuple[str, Matcher | ExportedMatcher]:
        """The model named `name` (default: the first), recorded for the access log."""
        name = next(iter(self.models)) if name is None else name
        if name not in self.models:
            served = ", ".join(map(repr, self.models))
            raise HTTPException(404, f"unknown model {name!r}; this server has {served}")
        request.state.model = name
        return name, self.models[name]

    def check_count(self, field: str, count: int) -> None:
        limit = self.settings.max_candidates
        if limit is not None and count > limit:
            raise _TooLarge(f"{field}: {count} items, over the limit of {limit} per request")

    def check_text(self, field: str, text: str) -> None:
        limit = self.settings.max_text_chars
        if len(text) > limit:
            raise _TooLarge(f"{field}: {len(text)} characters, over the limit of {limit}")

    def check_pairs(self, pairs: list[tuple[str, str]]) -> None:
        self.check_count("pairs", len(pairs))
        for i, (left, right) in enumerate(pairs):
            self.check_text(f"pairs[{i}][0]", left)
            self.check_text(f"pairs[{i}][1]", right)

    async def predict(
        self, request: Request, name: str, pairs: list[tuple[str, str]]
    ) -> Predictions:
        request.state.pairs = len(pairs)
        return await self.batchers[name].submit(pairs)

    async def ranked(
        self, request: Request, name: str, query: str, texts: list[str], field: str
    ) -> tuple[list[int], Predictions]:
        """The order of `texts` for `query`, best first (ties keep the input order, as
        `Matcher.rank`), and their predictions."""
        if not query.strip():
            raise ValueError("query: the query is empty")
        self.check_text("query", query)
        self.check_count(field, len(texts))
        for i, text in enumerate(texts):
            self.check_text(f"{field}[{i}]", text)
        predictions = await self.predict(request, name, [(query, t) for t in texts])
        order = np.argsort(-predictions.scores, kind="stable")
        return [int(i) for i in order], predictions

    # ------------------------------------------------------------- endpoints

    async def readyz(self) -> dict[str, Any]:
        return {"status": "ready", "models": list(self.models)}

    async def prometheus(self) -> Response:
        return Response(self.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def list_models(self) -> JSONResponse:
        rows = [
            {
                "name": name,
                "type": matcher.model_type,
                "task": matcher.task.kind,
                "relevance": matcher.task.relevance_scale,
                "inputs": None if matcher.inputs is None else matcher.inputs.kind,
                "metrics": matcher.metrics,
                "attention": matcher.explains,
            }
            for name, matcher in self.models.items()
        ]
        return JSONResponse(_finite_json({"models": rows}))

    async def rank(self, request: Request, body: RankRequest) -> Response:
        name, _ = self.pick(request, body.model)
        order, predictions = await self.ranked(
            request, name, body.query, body.candidates, "candidates"
        )
        scores = predictions.scores
        results = [
            {"index": i, "score": float(scores[i]), "text": body.candidates[i]}
            for i in order[: body.top_k]
        ]
        return _json({"model": name, "results": results})

    async def score(self, request: Request, body: PairsRequest) -> Response:
        name, _ = self.pick(request, body.model)
        self.check_pairs(body.pairs)
        predictions = await self.predict(request, name, body.pairs)
        return _json({"model": name, "scores": predictions.scores.tolist()})

    async def classify(self, request: Request, body: PairsRequest) -> Response:
        name, matcher = self.pick(request, body.model)
        if not matcher.task.has_labels:
            raise ValueError(
                f"classify needs a classification model; {name!r} is a {matcher.task.kind} "
                "model (use /v1/score)"
            )
        self.check_pairs(body.pairs)
        predictions = await self.predict(request, name, body.pairs)
        probabilities = predictions.class_probabilities()
        return _json({"model": name, "labels": predictions.labels, "probabilities": probabilities})

    async def explain(self, request: Request, body: ExplainRequest) -> JSONResponse:
        name, matcher = self.pick(request, body.model)
        self.check_text("left", body.left)
        self.check_text("right", body.right)
        if not matcher.explains:
            raise ValueError(
                f"model {name!r} ({matcher.model_type}) has no attention maps to explain; "
                "see /v1/models for those with attention: true"
            )
        request.state.pairs = 1
        found = await self.batchers[name].call(matcher.explain, body.left, body.right)
        tokens = ("left_tokens", "right_tokens")
        maps = {
            key: {"shape": list(np.shape(value)), "values": np.asarray(value).tolist()}
            for key, value in found.items()
            if key not in tokens
        }
        content = {"model": name, **{key: list(found[key]) for key in tokens}, "maps": maps}
        return JSONResponse(_finite_json(content))

    async def rerank(self, request: Request, body: RerankRequest) -> Response:
        """TEI's /rerank on the default model: the relevance (`Predictions.tei_scores`), or
        the raw score with `raw_scores` (docs/serving.md, "What the score means")."""
        name, _ = self.pick(request, None)
        order, predictions = await self.ranked(request, name, body.query, body.texts, "texts")
        scores = predictions.tei_scores(body.raw_scores)
        rows: list[dict[str, Any]] = []
        for i in order:
            row: dict[str, Any] = {"index": i, "score": float(scores[i])}
            if body.return_text:
                row["text"] = body.texts[i]
            rows.append(row)
        return _json(rows)
