"""The request bodies of `attnmatch serve` (pydantic): what a client may send, checked strictly.

Texts are strict strings (a number is not silently turned into one), counts are strict integers,
and an unknown key in a `/v1/...` body is a 422 naming it (a typo such as "candidate" must not be
ignored). `/rerank` follows Hugging Face text-embeddings-inference (TEI) and ignores keys it does
not know, as TEI clients may send options of newer TEI versions.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

Pair = tuple[StrictStr, StrictStr]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankRequest(_Strict):
    """`POST /v1/rank`: candidates for one query, best first."""

    model: StrictStr | None = None
    query: StrictStr
    candidates: Annotated[list[StrictStr], Field(min_length=1)]
    top_k: Annotated[StrictInt, Field(ge=1)] | None = None


class PairsRequest(_Strict):
    """`POST /v1/score` and `POST /v1/classify`: (left, right) pairs."""

    model: StrictStr | None = None
    pairs: Annotated[list[Pair], Field(min_length=1)]


class ExplainRequest(_Strict):
    """`POST /v1/explain`: one pair whose attention maps to return."""

    model: StrictStr | None = None
    left: StrictStr
    right: StrictStr


class RerankRequest(BaseModel):
    """`POST /rerank`, as TEI defines it. `truncate` and `truncation_direction` are accepted for
    compatibility: every model cuts its inputs at its own token bound."""

    model_config = ConfigDict(extra="ignore")

    query: StrictStr
    texts: Annotated[list[StrictStr], Field(min_length=1)]
    return_text: StrictBool = False
    truncate: StrictBool | None = None
    truncation_direction: StrictStr | None = None
    raw_scores: StrictBool = False
