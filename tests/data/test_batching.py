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


def test_encode_shares_texts_and_groups() -> None:
    exs = _examples()
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for e in exs for t in (e.left, e.right))
    data = encode_examples(exs, tok, vocab)
    assert len(data) == 20 and len(data.group_names) == 5
    assert len(data.texts) == 5 + 20  # each question text once
    assert [len(g) for g in data.groups()] == [4] * 5


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(2, 50), min_size=0, max_size=7), min_size=1, max_size=6))
def test_pad_ids_masks(seqs: list[list[int]]) -> None:
    ids, mask = pad_ids([np.asarray(s, dtype=np.int64) for s in seqs])
    assert ids.shape[1] == max(1, max(len(s) for s in seqs))
    for row, s in enumerate(seqs):
        assert mask[row].sum() == len(s)
        assert ids[row, : len(s)].tolist() == s
        assert (ids[row, len(s) :] == PAD_ID).all()


def test_ranking_sampler_groups_are_explicit_and_seeded() -> None:
    exs = _examples()
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for e in exs for t in (e.left, e.right))
    data = encode_examples(exs, tok, vocab)
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
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for e in exs for t in (e.left, e.right))
    data = encode_examples(exs, tok, vocab)
    batches = PairBatchSampler(data, batch_size=6, seed=1).epoch(1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(20))
    assert sorted(np.concatenate(bucketed_batches(data, 7)).tolist()) == list(range(20))


def test_collate_types() -> None:
    exs = _examples()
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for e in exs for t in (e.left, e.right))
    batch = collate(encode_examples(exs, tok, vocab), np.array([0, 5, 6]))
    assert batch.left_ids.dtype == torch.long and batch.left_mask.dtype == torch.bool
    assert batch.group_index.tolist() == [0, 1, 1]
