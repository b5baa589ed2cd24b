"""A fake sentence encoder for the dense path: deterministic bag-of-words vectors, so that the
faiss index, hybrid fusion and the index files are tested without loading MiniLM."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from attnmatch.retrieval import dense

DIM = 16


class FakeEncoder:
    """Each word a fixed random direction; a text the normalised sum of its words'."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.dim = DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                seed = int.from_bytes(hashlib.sha256(word.strip("?.,").encode()).digest()[:4])
                out[i] += np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-8)
        return out


@pytest.fixture
def fake_encoder(monkeypatch: pytest.MonkeyPatch) -> type[FakeEncoder]:
    monkeypatch.setattr(dense, "TextEncoder", FakeEncoder)
    return FakeEncoder


PASSAGES = [
    "A glacier cave is a cave formed within the ice of a glacier.",
    "The Alps are a mountain range in Europe.",
    "Caves are formed by water dissolving limestone.",
    "Python is a programming language.",
    "Glaciers move slowly down mountain valleys.",
]
