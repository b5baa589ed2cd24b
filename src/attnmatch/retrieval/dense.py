"""Dense first stage: sentence vectors of a pretrained encoder in a faiss index.

Vectors are the zero-shot bi-encoder's (`Matcher.from_encoder`: mean-pooled token vectors of
MiniLM), L2-normalised, so that the inner product the index searches is the cosine the zero-shot
matcher scores with.

The library is faiss (faiss-cpu), chosen by measurement (`benchmarks/retrieval_ann.py`,
docs/retrieval.md): on this project's 2-core machine an HNSW graph (usearch, hnswlib, faiss)
of 50,000 vectors took minutes to build on one core, so one of a million would take hours,
while faiss' inverted file (IVF) builds in seconds at the same recall@10 and searches in a
fraction of a millisecond; and faiss alone also offers the exact flat index. Up to
`EXACT_UP_TO` vectors the index is exact (`IndexFlatIP`: recall 1); above, an inverted file
(`IndexIVFFlat`, `build_vector_index`). Both are written with `faiss.write_index` (faiss' own
binary format, no pickle).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

EXACT_UP_TO = 200_000
"""The most vectors kept in an exact index; a larger corpus gets an inverted file."""
IVF_NPROBE = 32
IVF_TRAIN_PER_LIST = 40
_BATCH = 64


class TextEncoder:
    """Texts -> L2-normalised sentence vectors (N, E) float32, with a zero-shot bi-encoder
    (`Matcher.embed`).

    Args:
        source: an encoder source ("minilm-l6" or a Hugging Face directory).
    """

    def __init__(self, source: str) -> None:
        from attnmatch.matcher import Matcher

        self.source = source
        self._matcher = Matcher.from_encoder(source)
        self._matcher.batch_size = _BATCH

    @property
    def dim(self) -> int:
        model: Any = self._matcher.model
        return int(model.config.encoder.output_dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Shape: N texts -> (N, E) float32, unit rows (a text without tokens: zeros)."""
        vectors = self._matcher.embed(list(texts)).numpy()  # (N, E)
        norms = np.linalg.norm(vectors, axis=-1, keepdims=True)  # (N, 1)
        return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


def build_vector_index(vectors: np.ndarray, seed: int = 0) -> Any:
    """A faiss index of (N, E) unit vectors: exact up to `EXACT_UP_TO`, else an inverted file
    of round(sqrt(N)) lists (k-means on a sample of `IVF_TRAIN_PER_LIST` vectors a list, seeded),
    searched in the `IVF_NPROBE` nearest lists."""
    import faiss

    n, dim = vectors.shape
    index: Any
    if n <= EXACT_UP_TO:
        index = faiss.IndexFlatIP(dim)
    else:
        lists = max(int(round(n**0.5)), 1)
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, lists, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = seed
        sample = np.random.default_rng(seed).permutation(n)[: IVF_TRAIN_PER_LIST * lists]
        index.train(vectors[np.sort(sample)])
        index.nprobe = IVF_NPROBE
    index.add(vectors)
    return index


def index_kind(index: Any) -> str:
    """ "flat" (exact) or "ivf" (an inverted file)."""
    import faiss

    return "flat" if isinstance(index, faiss.IndexFlat) else "ivf"


def write_vector_index(index: Any, path: Path) -> None:
    import faiss

    faiss.write_index(index, str(path))


def read_vector_index(path: Path) -> Any:
    """The faiss index written at `path` (`write_vector_index`).

    Raises:
        ValueError: a damaged file, or an index of another kind than flat or IVF with inner
            products, one line naming the file.
    """
    import faiss

    try:
        index = faiss.read_index(str(path))
    except (RuntimeError, MemoryError) as e:
        raise ValueError(f"{path}: damaged, not a faiss index ({_faiss_message(e)})") from e
    ivf = None
    if not isinstance(index, faiss.IndexFlat):
        try:
            ivf = faiss.extract_index_ivf(index)
        except RuntimeError:
            ivf = None
        if ivf is None:
            raise ValueError(f"{path}: a faiss {type(index).__name__}, not a flat or IVF index")
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"{path}: a faiss index of another metric than the inner product")
    if ivf is not None:
        ivf.nprobe = IVF_NPROBE
    return index


def _faiss_message(error: BaseException) -> str:
    """A faiss error on one line, without its C++ function and source line."""
    text = " ".join(str(error).split()) or type(error).__name__
    text = re.sub(r"^Error in .*? at \S+:\d+: ", "", text)
    return text if len(text) <= 300 else text[:297] + "..."


def search_vectors(index: Any, query: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` nearest rows to `query` (E,): (rows, inner products), best first; fewer
    when the index holds fewer."""
    scores, rows = index.search(query.reshape(1, -1).astype(np.float32), depth)  # (1, depth)
    keep = rows[0] >= 0
    return rows[0][keep], scores[0][keep]
