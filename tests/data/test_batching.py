"""Tokenizer, Vocab, encoding, collate and the ranking sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmatch.data.collate import bucketed_batches, collate, pad_ids
from attnmatch.data.encoding import encode_examples
from attnmatch.data.sampling import PairBatchSampler, RankingGroupSampler
from attnmatch.data.schema import Example
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import PAD_ID, UNK_ID, Vocab
from attnmatch.inputs import WordVectorInputs, WordVectorsConfig


def test_tokenizer_is_deterministic_and_lowercases() -> None:
    t = Tokenizer()
    assert t.tokenize("How are Glacier caves formed?") == [
        "how",
        "are",
        "glacier",
        "caves",
        "formed",
        "?",
    ]
    assert t.tokenize("It's 3.5 km; don't") == ["it", "'s", "3.5", "km", ";", "do", "n't"]
    assert Tokenizer(lowercase=False, max_length=2).tokenize("A B C") == ["A", "B"]
    assert Tokenizer.from_dict(t.to_dict()) == t


def test_vocab_build_order_and_json(tmp_path) -> None:
    v = Vocab.build([["b", "a", "b"], ["c", "a", "b"]])
    assert v.tokens == ["<pad>", "<unk>", "b", "a", "c"]
    assert v.encode(["a", "zzz"]) == [3, UNK_ID]
    v.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == v
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="bad.json"):
        Vocab.load(tmp_path / "bad.json")
    assert v.extend(["z", "a"]).tokens[-1] == "z"


def _examples() -> list[Example]:
    out = []
    for q in range(5):
        for c in range(4):
            out.append(
                Example(
                    f"question {q}", "answer " * (c + 1) + str(q), int(c == q % 4), group=f"q{q}"
                )
            )
    return out


def _encoded(exs: list[Example]):
    """`exs` encoded by word-vector inputs (no pretrained vectors) fitted on their texts."""
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", dim=4))
    inputs.fit(t for e in exs for t in (e.left, e.right))
    return encode_examples(exs, inputs.encode)


def test_encode_shares_texts_and_groups() -> None:
    exs = _examples()
    data = _encoded(exs)
    assert len(data) == 20 and len(data.group_names) == 5
    assert len(data.texts) == 5 + 20  # each question text once
    assert [len(g) for g in data.groups()] == [4] * 5
    assert data.group_names == [f"q{q}" for q in range(5)]
    # The ids are the inputs' tokenizer + vocabulary.
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for e in exs for t in (e.left, e.right))
    assert data.texts[data.left[0]].tolist() == vocab.encode(tok.tokenize(exs[0].left))
    assert data.texts[data.right[3]].tolist() == vocab.encode(tok.tokenize(exs[3].right))
    assert data.labels.tolist() == [float(e.label) for e in exs]


def test_encode_calls_encode_once_with_the_distinct_texts_in_order() -> None:
    exs = [
        Example("a", "b", 1, group="g"),
        Example("a", "c", 0, group="g"),
        Example("c", "a", 1),
        Example("d", "b", 0),
    ]
    calls: list[list[str]] = []

    def encode(texts: list[str]) -> list[np.ndarray]:
        calls.append(list(texts))
        return [np.full(len(t) + i, i, dtype=np.int64) for i, t in enumerate(texts)]

    data = encode_examples(exs, encode)
    assert calls == [["a", "b", "c", "d"]]
    assert data.left.tolist() == [0, 0, 2, 3] and data.right.tolist() == [1, 2, 0, 1]
    assert data.texts[2].tolist() == [2, 2, 2]  # what encode returned, kept as given
    assert data.group_names == ["g", "#2", "#3"]  # pairs without a group get their own
    assert data.group_ids.tolist() == [0, 0, 1, 2]


def test_encode_errors() -> None:
    with pytest.raises(ValueError, match="empty"):
        encode_examples([], lambda texts: [])
    with pytest.raises(ValueError, match="encode gave 1 id arrays for 2 texts"):
        encode_examples([Example("a", "b", 1)], lambda texts: [np.zeros(1, dtype=np.int64)])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(2, 50), min_size=0, max_size=7), min_size=1, max_size=6))
def test_pad_ids_masks(seqs: list[list[int]]) -> None:
    ids, mask = pad_ids([np.asarray(s, dtype=np.int64) for s in seqs])
    assert ids.shape[1] == max(1, max(len(s) for s in seqs))
    for row, s in enumerate(seqs):
        assert mask[row].sum() == len(s)
        assert ids[row, : len(s)].tolist() == s
        assert (ids[row, len(s) :] == PAD_ID).all()


def test_pad_ids_of_per_token_id_lists_by_hand() -> None:
    """(n, K) arrays (letter trigrams) are padded in both dimensions."""
    seqs = [
        np.array([[3, 4, 0], [5, 0, 0]]),  # 2 words, K = 3
        np.array([[6]]),  # 1 word, K = 1
        np.zeros((0, 1), dtype=np.int64),  # no words
    ]
    ids, mask = pad_ids(seqs)
    assert ids.shape == (3, 2, 3) and ids.dtype == torch.long
    assert ids.tolist() == [
        [[3, 4, 0], [5, 0, 0]],
        [[6, 0, 0], [0, 0, 0]],
        [[0, 0, 0], [0, 0, 0]],
    ]
    assert mask.tolist() == [[True, True], [True, False], [False, False]]
    ids, mask = pad_ids([np.zeros((0, 1), dtype=np.int64)])  # at least one column
    assert ids.shape == (1, 1, 1) and mask.tolist() == [[False]]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(st.lists(st.integers(1, 50), min_size=1, max_size=4), min_size=0, max_size=5),
        min_size=1,
        max_size=5,
    )
)
def test_pad_ids_of_per_token_id_lists(texts: list[list[list[int]]]) -> None:
    seqs = []
    for words in texts:  # each word's ids zero-padded to the text's widest word
        width = max((len(w) for w in words), default=1)
        arr = np.zeros((len(words), width), dtype=np.int64)
        for i, w in enumerate(words):
            arr[i, : len(w)] = w
        seqs.append(arr)
    ids, mask = pad_ids(seqs)
    assert ids.shape == (
        len(texts),
        max(1, max(len(words) for words in texts)),
        max(s.shape[1] for s in seqs),
    )
    for row, (words, seq) in enumerate(zip(texts, seqs, strict=True)):
        assert mask[row].sum() == len(words)
        assert (ids[row, : len(words), : seq.shape[1]].numpy() == seq).all()
        assert (ids[row, : len(words), seq.shape[1] :] == PAD_ID).all()
        assert (ids[row, len(words) :] == PAD_ID).all()


def test_ranking_sampler_groups_are_explicit_and_seeded() -> None:
    exs = _examples()
    data = _encoded(exs)
    sampler = RankingGroupSampler(data, num_negatives=2, groups_per_batch=2, seed=3)
    batches = sampler.epoch(1)
    assert sum(len(b) for b in batches) == 5 * 3
    for b in batches:
        gi = sampler.group_index(b)
        batch = collate(data, b, group_index=gi)
        assert batch.group_index.tolist() == gi.tolist()
        for g in range(len(b) // 3):
            rows = b[3 * g : 3 * g + 3]
            assert data.labels[rows[0]] == 1 and (data.labels[rows[1:]] == 0).all()
            assert len(set(data.group_ids[rows])) == 1
    again = RankingGroupSampler(data, num_negatives=2, groups_per_batch=2, seed=3).epoch(1)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=False))
    other = sampler.epoch(2)
    assert not all(np.array_equal(a, b) for a, b in zip(batches, other, strict=False))


def test_pair_sampler_covers_everything_once() -> None:
    exs = _examples()
    data = _encoded(exs)
    batches = PairBatchSampler(data, batch_size=6, seed=1).epoch(1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(20))
    assert sorted(np.concatenate(bucketed_batches(data, 7)).tolist()) == list(range(20))


def test_collate_types() -> None:
    batch = collate(_encoded(_examples()), np.array([0, 5, 6]))
    assert batch.left_ids.dtype == torch.long and batch.left_mask.dtype == torch.bool
    assert batch.group_index.tolist() == [0, 1, 1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_token_budget_batches_cover_every_text_once_within_the_budget(seed: int) -> None:
    from attnmatch.data.collate import token_budget_batches

    lengths = np.random.default_rng(seed).integers(1, 300, size=500)
    batches = token_budget_batches(lengths, 64, 4096)
    assert sorted(np.concatenate(batches).tolist()) == list(range(500))
    for batch in batches:
        assert len(batch) <= 64
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= 4096
    assert len(batches[0]) == 64  # short texts fill a batch, long ones share small ones
    assert len(batches[-1]) < 64


def test_a_text_longer_than_the_budget_goes_alone() -> None:
    from attnmatch.data.collate import token_budget_batches

    batches = token_budget_batches(np.array([3, 9000, 4]), 512, 100)
    assert [b.tolist() for b in batches] == [[0, 2], [1]]
