"""The request bodies of `attnmatch serve` (pydantic): what a client may send, checked strictly.

Texts are strict strings (a number is not silently turned into one), counts are strict integers,
and an unknown key in a `/v1/...` body is a 422 naming it (a typo such as "candidate" must not be
ignored). `/rerank` follows Hugging Face text-embeddings-inference (TEI) and ignores keys it does
not know, as TEI clients may send options of newer TEI versions.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr


def _encodable(text: str) -> str:
    """`text`, when UTF-8 can encode it: JSON's escapes let a client send a lone surrogate
    (`"\\ud800"`), which no answer, log or tokenizer can hold; such a text is a 422 naming its
    field rather than a 500 when the answer echoes it."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"character {e.start} is a lone surrogate (\\u{ord(text[e.start]):04x}), "
                "which UTF-8 cannot encode"
            ) from None
    return text


Text = Annotated[StrictStr, AfterValidator(_encodable)]
Pair = tuple[Text, Text]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RankRequest(_Strict):
    """`POST /v1/rank`: candidates for one query, best first."""

    model: Text | None = None
    query: Text
    candidates: Annotated[list[Text], Field(min_length=1)]
    top_k: Annotated[StrictInt, Field(ge=1)] | None = None


class PairsRequest(_Strict):
    """`POST /v1/score` and `POST /v1/classify`: (left, right) pairs."""

    model: Text | None = None
    pairs: Annotated[list[Pair], Field(min_length=1)]


class ExplainRequest(_Strict):
    """`POST /v1/explain`: one pair whose attention maps to return."""

    model: Text | None = None
    left: Text
    right: Text


class RerankRequest(BaseModel):
    """`POST /rerank`, as TEI defines it. `truncate` and `truncation_direction` are accepted for
    compatibility: every model cuts its inputs at its own token bound."""

    model_config = ConfigDict(extra="ignore")

    query: Text
    texts: Annotated[list[Text], Field(min_length=1)]
    return_text: StrictBool = False
    truncate: StrictBool | None = None
    truncation_direction: Text | None = None
    raw_scores: StrictBool = False
