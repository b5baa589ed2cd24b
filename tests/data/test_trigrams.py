"""Letter-trigram word hashing (DSSM): trigrams by hand, stable ids, encoding once per text and
batching into PairBatch.extras aligned with the token ids."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnmatch.data.collate import collate
from attnmatch.data.encoding import encode_examples
from attnmatch.data.schema import Example
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.trigrams import letter_trigrams, trigram_id, word_trigram_ids
from attnmatch.data.vocab import Vocab


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


def test_collate_batches_trigrams_aligned_with_token_ids() -> None:
    tok = Tokenizer(lowercase=True)
    vocab = Vocab.build([["go", "home"]], min_freq=1)  # "now" and "x" are out of vocabulary
    examples = [
        Example(left="go home now", right="x", label=1.0),
        Example(left="go", right="go home", label=0.0),
    ]
    plain = encode_examples(examples, tok, vocab)
    data = encode_examples(examples, tok, vocab, trigram_buckets=1000)
    assert plain.trigrams is None and data.trigrams is not None
    assert len(data.trigrams) == len(data.texts)  # once per distinct text
    batch = collate(data, np.array([0, 1]))
    left, right = batch.extras["left_trigrams"], batch.extras["right_trigrams"]
    assert left.shape[:2] == batch.left_ids.shape and right.shape[:2] == batch.right_ids.shape
    assert left.dtype == torch.int64
    # An out-of-vocabulary word keeps its trigrams ("now": <unk> id, real trigrams).
    assert batch.left_ids[0, 2].item() == vocab.encode(["now"])[0]
    assert left[0, 2, :3].tolist() == [trigram_id(t, 1000) for t in ("#no", "now", "ow#")]
    # Padding positions (the second left text has one token) hold only zeros.
    assert not left[1, 1:].any() and not right[0, 1:].any()
    assert collate(plain, np.array([0, 1])).extras == {}
