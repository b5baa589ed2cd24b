"""`POST /v1/search`: retrieve from the index loaded at start, then rerank with a served model.

Body: `{"query": ..., "model": NAME|null, "rerank": true, "first_stage": "bm25"|"dense"|"hybrid"|
null, "top_k": 10, "depth": 100}` (depth: at most the server's `max_candidates`, also by
default). The first stage runs off the event loop; the reranking goes
through the model's batcher like every other prediction, so it shares batches with `/v1/rank`.
A query above the bounds or a bad depth is a 400 (`attnmatch.retrieval.search`), a depth above
the server's `max_candidates` a 413, an unknown model a 404. Answer: `{"model", "first_stage",
"results": [{"id", "text", "score", "first_stage_rank"}]}`, best first.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from starlette.concurrency import run_in_threadpool

from attnmatch.retrieval.search import (
    DEFAULT_DEPTH,
    MAX_DEPTH,
    SearchIndex,
    check_depths,
    check_query,
)


class SearchRequest(BaseModel):
    """`POST /v1/search` (module docstring)."""

    model_config = ConfigDict(extra="forbid")

    query: StrictStr
    model: StrictStr | None = None
    rerank: StrictBool = True
    first_stage: Literal["bm25", "dense", "hybrid"] | None = None
    top_k: Annotated[StrictInt, Field(ge=1)] = 10
    depth: Annotated[StrictInt, Field(ge=1)] | None = None


def add_search_route(app: FastAPI, index: SearchIndex) -> None:
    """Serves `index` at `POST /v1/search` on an app of `create_app`."""
    app.state.index = index
    app.post("/v1/search")(_search)


async def _search(request: Request, body: SearchRequest) -> dict[str, Any]:
    state = request.app.state
    index: SearchIndex = state.index
    check_query(body.query)
    limit = state.settings.max_candidates or MAX_DEPTH  # None: the retrieval bound
    depth = min(DEFAULT_DEPTH, limit) if body.depth is None else body.depth
    check_depths(depth, body.top_k)
    if depth > limit:
        raise HTTPException(413, f"depth: {depth}, over the limit of {limit} candidates")
    stage = body.first_stage or index.default_first_stage
    name = None
    if body.rerank:
        name = next(iter(state.models)) if body.model is None else body.model
        if name not in state.models:
            served = ", ".join(map(repr, state.models))
            raise HTTPException(404, f"unknown model {name!r}; this server has {served}")
        request.state.model = name
    candidates = await run_in_threadpool(index.retrieve, body.query, stage, depth)
    ranked = [(row, score, rank) for rank, (row, score) in enumerate(candidates, 1)]
    if name is not None and candidates:
        pairs = [(body.query, index.texts[row]) for row, _ in candidates]
        request.state.pairs = len(pairs)
        scores = (await state.batchers[name].submit(pairs)).scores
        order = np.argsort(-scores, kind="stable")
        ranked = [(candidates[i][0], float(scores[i]), int(i) + 1) for i in order]
    results = [
        {"id": index.ids[row], "text": index.texts[row], "score": score, "first_stage_rank": rank}
        for row, score, rank in ranked[: body.top_k]
    ]
    return {"model": name, "first_stage": stage, "results": results}
