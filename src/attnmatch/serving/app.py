"""The HTTP API of `attnmatch serve`: FastAPI over a dict of loaded Matchers.

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

import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import torch
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

from attnmatch.matcher import Matcher
from attnmatch.serving.batching import Batcher
from attnmatch.serving.schemas import ExplainRequest, PairsRequest, RankRequest, RerankRequest

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
            request; more is a 413.
        max_request_bytes: the largest request body; larger is a 413.
        max_text_chars: the longest text (query, candidate, left, right); longer is a 413.
        threads: torch's intra-op threads on each model's thread (`torch.set_num_threads` there);
            None leaves torch's own setting. Under load the event loop needs a core too, so on a
            small machine 1 is often faster than torch's default of one per core.
    """

    max_batch_pairs: int = 256
    max_wait_ms: float = 5
    batching: bool = True
    max_candidates: int = 1000
    max_request_bytes: int = 1_000_000
    max_text_chars: int = 32_768
    threads: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_batch_pairs", "max_candidates", "max_request_bytes", "max_text_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
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


class _Observe:
    """Outermost ASGI layer: counts, times and logs every HTTP request (one JSON line), and
    refuses bodies over `max_request_bytes` with 413 before anything reads them."""

    def __init__(self, app: ASGIApp, metrics: _Metrics, max_bytes: int) -> None:
        self.app, self.metrics, self.max_bytes = app, metrics, max_bytes

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
            body = await self._read_limited(scope, receive)
            if body is None:
                await _send_json(send_status, 413, {"detail": self._too_large()})
            else:
                await self.app(scope, _replay(body, receive), send_status)
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

    def _too_large(self) -> str:
        return f"the request body is larger than the limit of {self.max_bytes} bytes"

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


async def _send_json(send: Send, status: int, content: Any) -> None:
    body = json.dumps(content).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _json(content: Any) -> Response:
    """`content` (plain dicts, lists, str, int, float) as a JSON response encoded by orjson:
    UTF-8 and compact, as JSONResponse writes it, but returned as a Response, so FastAPI has no
    response model to validate or convert."""
    return Response(orjson.dumps(content), media_type="application/json")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


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


def create_app(models: dict[str, Matcher], *, settings: ServeSettings | None = None) -> FastAPI:
    """The FastAPI app serving `models` (name -> Matcher; the first is the default model).

    Raises:
        ValueError: no models, or a name that is empty or not a string.
    """
    settings = settings or ServeSettings()
    if not models:
        raise ValueError("no models to serve: give at least one")
    for name in models:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"model names must be non-empty strings, got {name!r}")
    models = dict(models)
    default = next(iter(models))
    metrics = _Metrics()
    threads = settings.threads

    def set_threads() -> None:  # on each model's thread, before its first forward pass
        if threads is not None:
            torch.set_num_threads(threads)

    batchers = {
        name: Batcher(
            matcher.outputs,
            max_batch_pairs=settings.max_batch_pairs,
            max_wait_ms=settings.max_wait_ms,
            batching=settings.batching,
            on_batch=metrics.batch.labels(name).observe,
            on_thread_start=set_threads,
        )
        for name, matcher in models.items()
    }

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        for batcher in batchers.values():
            await batcher.aclose()

    app = FastAPI(title="attnmatch serve", lifespan=lifespan, docs_url="/docs", redoc_url=None)
    app.state.models = models
    app.state.batchers = batchers
    app.state.settings = settings
    app.state.registry = metrics.registry

    # ------------------------------------------------------------- errors

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _validation_detail(error)}, status_code=422)

    @app.exception_handler(_TooLarge)
    async def _too_large(request: Request, error: _TooLarge) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error)}, status_code=413)

    @app.exception_handler(ValueError)
    async def _refused(request: Request, error: ValueError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error) or "invalid input"}, status_code=400)

    @app.exception_handler(NotImplementedError)
    async def _unsupported(request: Request, error: NotImplementedError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(error) or "not supported"}, status_code=400)

    @app.exception_handler(Exception)
    async def _failed(request: Request, error: Exception) -> JSONResponse:
        log.exception("internal error on %s", request.url.path)
        detail = f"internal error: {type(error).__name__} (see the server log)"
        return JSONResponse({"detail": detail}, status_code=500)

    # ------------------------------------------------------------- helpers

    def pick(request: Request, name: str | None) -> tuple[str, Matcher]:
        name = default if name is None else name
        if name not in models:
            raise HTTPException(
                404, f"unknown model {name!r}; this server has {', '.join(map(repr, models))}"
            )
        request.state.model = name
        return name, models[name]

    def check_count(field: str, count: int) -> None:
        if count > settings.max_candidates:
            raise _TooLarge(
                f"{field}: {count} items, over the limit of {settings.max_candidates} per request"
            )

    def check_text(field: str, text: str) -> None:
        if len(text) > settings.max_text_chars:
            raise _TooLarge(
                f"{field}: {len(text)} characters, over the limit of {settings.max_text_chars}"
            )

    def check_query(text: str) -> None:
        if not text.strip():
            raise ValueError("query: the query is empty")
        check_text("query", text)

    async def outputs(request: Request, name: str, pairs: list[tuple[str, str]]) -> np.ndarray:
        request.state.pairs = len(pairs)
        return await batchers[name].submit(pairs)

    def scores_of(matcher: Matcher, out: np.ndarray) -> np.ndarray:
        scores = matcher.task.scores(torch.from_numpy(np.ascontiguousarray(out))).numpy()
        if not np.isfinite(scores).all():
            raise ValueError("the model gave a score that is not a finite number")
        return scores.astype(np.float32)

    async def ranked(
        request: Request, name: str, matcher: Matcher, query: str, texts: list[str], field: str
    ) -> list[tuple[int, float]]:
        check_query(query)
        check_count(field, len(texts))
        for i, text in enumerate(texts):
            check_text(f"{field}[{i}]", text)
        scores = scores_of(matcher, await outputs(request, name, [(query, t) for t in texts]))
        order = np.argsort(-scores, kind="stable")  # ties keep the input order, as Matcher.rank
        return [(int(i), float(scores[i])) for i in order]

    def check_pairs(pairs: list[tuple[str, str]]) -> None:
        check_count("pairs", len(pairs))
        for i, (left, right) in enumerate(pairs):
            check_text(f"pairs[{i}][0]", left)
            check_text(f"pairs[{i}][1]", right)

    # ------------------------------------------------------------- endpoints

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> HTMLResponse:
        index = STATIC / "index.html"
        try:
            return HTMLResponse(index.read_text(encoding="utf-8"))
        except OSError:
            return HTMLResponse(_PLACEHOLDER)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> dict[str, Any]:
        return {"status": "ready", "models": list(models)}

    @app.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    async def list_models() -> JSONResponse:
        rows = [
            {
                "name": name,
                "type": matcher.model_type,
                "task": matcher.task.kind,
                "inputs": getattr(matcher.inputs, "kind", None),
                "metrics": matcher.metrics,
                "attention": callable(getattr(matcher.model, "attention", None)),
            }
            for name, matcher in models.items()
        ]
        return JSONResponse(_finite_json({"models": rows}))

    @app.post("/v1/rank")
    async def rank(request: Request, body: RankRequest) -> Response:
        name, matcher = pick(request, body.model)
        order = await ranked(request, name, matcher, body.query, body.candidates, "candidates")
        if body.top_k is not None:
            order = order[: body.top_k]
        results = [{"index": i, "score": s, "text": body.candidates[i]} for i, s in order]
        return _json({"model": name, "results": results})

    @app.post("/v1/score")
    async def score(request: Request, body: PairsRequest) -> Response:
        name, matcher = pick(request, body.model)
        check_pairs(body.pairs)
        scores = scores_of(matcher, await outputs(request, name, body.pairs))
        return _json({"model": name, "scores": scores.tolist()})

    @app.post("/v1/classify")
    async def classify(request: Request, body: PairsRequest) -> Response:
        name, matcher = pick(request, body.model)
        task = matcher.task
        if task.kind != "classification":
            raise ValueError(
                f"classify needs a classification model; {name!r} is a {task.kind} model "
                "(use /v1/score)"
            )
        check_pairs(body.pairs)
        out = await outputs(request, name, body.pairs)
        logits = torch.from_numpy(np.ascontiguousarray(out)).float()  # (N, C)
        probs = torch.softmax(logits, dim=-1).tolist()
        if not all(math.isfinite(p) for row in probs for p in row):
            raise ValueError("the model gave a probability that is not a finite number")
        return _json(
            {
                "model": name,
                "labels": task.labels(logits),
                "probabilities": [dict(zip(task.class_names, row, strict=True)) for row in probs],
            }
        )

    @app.post("/v1/explain")
    async def explain(request: Request, body: ExplainRequest) -> JSONResponse:
        name, matcher = pick(request, body.model)
        check_text("left", body.left)
        check_text("right", body.right)
        if not callable(getattr(matcher.model, "attention", None)):
            raise ValueError(
                f"model {name!r} ({matcher.model_type}) has no attention maps to explain; "
                "see /v1/models for those with attention: true"
            )
        request.state.pairs = 1
        found = await batchers[name].call(matcher.explain, body.left, body.right)
        maps = {
            key: {"shape": list(np.shape(value)), "values": np.asarray(value).tolist()}
            for key, value in found.items()
            if key not in ("left_tokens", "right_tokens")
        }
        content = {
            "model": name,
            "left_tokens": list(found["left_tokens"]),
            "right_tokens": list(found["right_tokens"]),
            "maps": maps,
        }
        return JSONResponse(_finite_json(content))

    @app.post("/rerank")
    async def rerank(request: Request, body: RerankRequest) -> Response:
        name, matcher = pick(request, None)
        order = await ranked(request, name, matcher, body.query, body.texts, "texts")
        rows: list[dict[str, Any]] = []
        for i, s in order:
            row: dict[str, Any] = {
                "index": i,
                "score": s if body.raw_scores else _squash(matcher, s),
            }
            if body.return_text:
                row["text"] = body.texts[i]
            rows.append(row)
        return _json(rows)

    app.add_middleware(_Observe, metrics=metrics, max_bytes=settings.max_request_bytes)
    return app


def _squash(matcher: Matcher, score: float) -> float:
    """A TEI score (`raw_scores: false`): a probability of relevance where the model has one.

    A one-output ranking model (a logit): sigmoid(score), as TEI does. A classification or
    two-output ranking model scores by log P(match): exp(score) = P(match). A regression model
    keeps its scale. Each is monotone, so the order is the raw scores' order.
    """
    if matcher.task.kind == "regression":
        return score
    if matcher.task.kind == "classification" or _num_outputs(matcher) > 1:
        return math.exp(score)
    return 1 / (1 + math.exp(-score)) if score >= 0 else math.exp(score) / (1 + math.exp(score))


def _num_outputs(matcher: Matcher) -> int:
    return int(getattr(getattr(matcher.model, "config", None), "num_outputs", 1))
