"""Negatives for positive pairs only: drawn from other queries' answers (random, BM25, in-batch)."""

from __future__ import annotations

import numpy as np
import pytest

from attnmatch.data.encoding import encode_examples
from attnmatch.data.sampling import SampledNegativesSampler, bm25_candidates
from attnmatch.data.schema import Example

FAQ = [
    ("how do i reset my password", "Click forgot password on the sign-in page."),
    ("i forgot my password", "Click forgot password on the sign-in page."),
    ("can i use the app offline", "The mobile app keeps recent notebooks offline."),
    ("how much is the pro plan", "Pro costs 8 dollars a month."),
    ("is there a student discount", "Students get 50 percent off."),
    ("how do i export to pdf", "Use File, Export, PDF."),
]


def encoded():
    examples = [Example(left=q, right=a, label=1, group=q) for q, a in FAQ]
    texts = list(dict.fromkeys(t for ex in examples for t in (ex.left, ex.right)))
    data = encode_examples(examples, lambda ts: [np.arange(1, len(t.split()) + 1) for t in ts])
    return data, texts


@pytest.mark.parametrize("source", ["random", "bm25", "in_batch"])
def test_groups_are_a_positive_then_other_queries_answers(source):
    data, texts = encoded()
    hard = bm25_candidates(data, texts) if source == "bm25" else None
    sampler = SampledNegativesSampler(
        data, source=source, num_negatives=2, groups_per_batch=4, seed=3, hard=hard
    )
    batches = sampler.epoch(1)
    assert sum(len(b) for b in batches) > 0
    seen_positives = []
    for batch in batches:
        index = sampler.group_index(batch)
        size = int(np.bincount(index)[0])
        assert len(batch) % size == 0 and (np.bincount(index) == size).all()
        for row in batch.reshape(-1, size):
            pos, negs = row[0], row[1:]
            assert sampler.data.labels[pos] == 1
            seen_positives.append(int(pos))
            own_answer = texts[int(sampler.data.right[pos])]
            for n in negs:
                assert sampler.data.labels[n] == 0
                assert sampler.data.left[n] == sampler.data.left[pos]  # same query
                assert texts[int(sampler.data.right[n])] != own_answer  # never its own answer
    assert sorted(seen_positives) == list(range(len(FAQ)))  # every positive once an epoch


def test_epochs_are_deterministic_and_differ():
    data, _ = encoded()
    a = SampledNegativesSampler(data, num_negatives=2, groups_per_batch=2, seed=1)
    b = SampledNegativesSampler(data, num_negatives=2, groups_per_batch=2, seed=1)
    first = [x.tolist() for x in a.epoch(1)]
    assert first == [x.tolist() for x in b.epoch(1)]
    assert a.data.right.tolist() == b.data.right.tolist()
    a.epoch(2)
    assert a.data.right.tolist() != b.data.right.tolist()


def test_in_batch_negatives_are_the_batch_answers():
    data, texts = encoded()
    sampler = SampledNegativesSampler(data, source="in_batch", groups_per_batch=3, seed=0)
    for batch in sampler.epoch(1):
        size = 3
        rows = batch.reshape(-1, size)
        answers = {int(sampler.data.right[r[0]]) for r in rows}
        for row in rows:
            own = int(sampler.data.right[row[0]])
            drawn = {int(sampler.data.right[n]) for n in row[1:]}
            # the other rows' answers, except one equal to its own (the two password questions)
            assert (answers - {own}) <= drawn | {own}


def test_bm25_candidates_rank_the_lexical_neighbour_first():
    data, texts = encoded()
    hard = bm25_candidates(data, texts, top=3)
    query = texts.index("how do i reset my password")
    assert texts[int(hard[query][0])] == "Click forgot password on the sign-in page."


def test_one_answer_for_every_query_is_refused():
    examples = [Example(left=f"q{i}", right="same", label=1, group=f"q{i}") for i in range(3)]
    data = encode_examples(examples, lambda ts: [np.array([1]) for _ in ts])
    with pytest.raises(ValueError, match="same single answer"):
        SampledNegativesSampler(data)
