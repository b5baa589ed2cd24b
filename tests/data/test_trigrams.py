"""Letter-trigram word hashing (DSSM): trigrams by hand, stable ids, encoding once per text by the
trigram inputs and batching into (B, L, K) ids aligned with the (B, L) word masks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnmatch.data.collate import collate
from attnmatch.data.encoding import encode_examples
from attnmatch.data.schema import Example
from attnmatch.data.trigrams import letter_trigrams, trigram_id, word_trigram_ids
from attnmatch.inputs import (
    TrigramInputs,
    TrigramInputsConfig,
    WordVectorInputs,
    WordVectorsConfig,
)


def test_letter_trigrams_by_hand() -> None:
    assert letter_trigrams("go") == ["#go", "go#"]  # "#go#" -> "#go", "go#"
    assert letter_trigrams("good") == ["#go", "goo", "ood", "od#"]
    assert letter_trigrams("a") == ["#a#"]
    assert letter_trigrams("") == []


def test_trigram_ids_are_stable_and_never_padding() -> None:
    # CRC-32 of "#go" is 0x32FBA002 = 855,351,298, and 855,351,298 % 999 = 505: a saved model's
    # ids must never change with the Python version or the machine.
    assert trigram_id("#go", 1000) == 506
    ids = [trigram_id(t, 7) for t in ("#go", "go#", "abc", "xyz", "#a#")]
    assert all(1 <= i <= 6 for i in ids)
    with pytest.raises(ValueError, match="buckets"):
        word_trigram_ids(["go"], 1)


def test_word_trigram_ids_pad_each_word_to_the_longest() -> None:
    out = word_trigram_ids(["go", "good"], 1000)
    assert out.shape == (2, 4)
    assert out[0].tolist() == [trigram_id("#go", 1000), trigram_id("go#", 1000), 0, 0]
    assert out[1].tolist() == [trigram_id(t, 1000) for t in ("#go", "goo", "ood", "od#")]
    assert word_trigram_ids([], 1000).shape == (0, 1)


EXAMPLES = [
    Example(left="go home now", right="x", label=1.0),
    Example(left="go", right="go home", label=0.0),
]


def test_collate_batches_trigrams_aligned_with_the_word_mask() -> None:
    inputs = TrigramInputs(TrigramInputsConfig(buckets=1000, dim=4))
    data = encode_examples(EXAMPLES, inputs.encode)
    assert len(data.texts) == 4  # once per distinct text
    assert [t.shape for t in data.texts] == [(3, 4), (1, 1), (1, 2), (2, 4)]
    np.testing.assert_array_equal(data.texts[0], word_trigram_ids(["go", "home", "now"], 1000))
    batch = collate(data, np.array([0, 1]))
    left, right = batch.left_ids, batch.right_ids
    assert left.shape == (2, 3, 4) and right.shape == (2, 2, 4)  # (B, L, K), K the batch's most
    assert left.shape[:2] == batch.left_mask.shape and right.shape[:2] == batch.right_mask.shape
    assert left.dtype == torch.int64
    assert batch.left_mask.tolist() == [[True, True, True], [True, False, False]]
    # Every word has its trigrams: no word vocabulary, so no word is out of vocabulary.
    assert left[0, 2, :3].tolist() == [trigram_id(t, 1000) for t in ("#no", "now", "ow#")]
    assert left[0, 2, 3] == 0  # "now" has 3 trigrams, K = 4
    assert right[0, 0, :1].tolist() == [trigram_id("#x#", 1000)]
    # Padding positions (the second left text, the first right text have one word) are zeros.
    assert not left[1, 1:].any() and not right[0, 1:].any()


def test_word_vector_inputs_give_plain_token_ids() -> None:
    """Only trigram inputs add the K dimension."""
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", dim=4))
    inputs.fit([t for e in EXAMPLES for t in (e.left, e.right)])
    batch = collate(encode_examples(EXAMPLES, inputs.encode), np.array([0, 1]))
    assert batch.left_ids.shape == (2, 3) and batch.right_ids.shape == (2, 2)
    assert batch.left_ids.shape == batch.left_mask.shape


def test_trigram_inputs_tokenize_like_word_inputs() -> None:
    """Lower-cased word tokens (the tokenizer settings of the [inputs] section), then hashing."""
    inputs = TrigramInputs(TrigramInputsConfig(buckets=1000))
    assert inputs.tokens("Go HOME!") == ["go", "home", "!"]
    (ids,) = inputs.encode(["Go HOME!"])
    np.testing.assert_array_equal(ids, word_trigram_ids(["go", "home", "!"], 1000))
    cased = TrigramInputs(TrigramInputsConfig(buckets=1000, lowercase=False, max_length=1))
    np.testing.assert_array_equal(cased.encode(["Go HOME!"])[0], word_trigram_ids(["Go"], 1000))
