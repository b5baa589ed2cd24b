"""Letter-trigram word hashing (Huang et al., DSSM, CIKM 2013, §3.2), a model input.

A word is wrapped in boundary marks and cut into letter trigrams: "go" -> "#go#" -> "#go", "go#".
Each trigram is mapped to one of `buckets - 1` ids by a stable hash (CRC-32), 0 being padding, so
no trigram vocabulary has to be built, saved or kept in sync: any text, including words outside
the word vocabulary, gets its trigrams. (DSSM indexes the ~30K distinct trigrams of its corpus;
with 30K+ buckets, hashing collisions are rare.)

Computed from the tokens once per distinct text by the trigram inputs
(`attnmatch.inputs.trigrams`) and batched by `collate` into `PairBatch.left_ids` /
`right_ids` of shape (B, T, K): K the most trigrams of a word in the batch, 0 on padding.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

BOUNDARY = "#"


def letter_trigrams(word: str) -> list[str]:
    """The letter trigrams of `word` with boundary marks: "go" -> ["#go", "go#"].

    A one-letter word gives its single trigram ("a" -> ["#a#"]); an empty string gives none.
    """
    if not word:
        return []
    marked = f"{BOUNDARY}{word}{BOUNDARY}"
    return [marked[i : i + 3] for i in range(len(marked) - 2)]


def trigram_id(trigram: str, buckets: int) -> int:
    """The trigram's id in 1..buckets-1 (stable across runs and machines: CRC-32)."""
    return zlib.crc32(trigram.encode("utf-8")) % (buckets - 1) + 1


def word_trigram_ids(tokens: Sequence[str], buckets: int) -> np.ndarray:
    """Trigram ids of each token, zero-padded to the token with the most trigrams.

    Shape: -> (len(tokens), K) int64, K >= 1
    """
    if buckets < 2:
        raise ValueError(f"trigram buckets must be >= 2 (0 is padding), got {buckets}")
    rows = [[trigram_id(t, buckets) for t in letter_trigrams(tok)] for tok in tokens]
    width = max((len(r) for r in rows), default=0)
    out = np.zeros((len(rows), max(width, 1)), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
