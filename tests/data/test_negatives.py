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


def scored_sampler(data, **options):
    settings = {"num_negatives": 2, "groups_per_batch": 4, "seed": 3, "hard_pool": 4}
    return SampledNegativesSampler(data, source="model", **(settings | options))


def table_scorer(seed: int):
    """Fixed random scores per pair index: a stub model whose scores the test knows."""
    table = np.random.default_rng(seed).normal(size=10_000)
    return lambda rows: table[rows]


def with_own_negatives():
    """Queries with negatives of their own: q0 has 5 (one of them a copy of its positive's
    text), q1 has 1, fewer than k."""
    rows = [("q0", "a0", 1), ("q0", "a0", 0)] + [("q0", f"n{i}", 0) for i in range(4)]
    rows += [("q1", "b0", 1), ("q1", "m0", 0)]
    examples = [Example(left=q, right=a, label=y, group=q) for q, a, y in rows]
    texts = list(dict.fromkeys(t for ex in examples for t in (ex.left, ex.right)))
    return encode_examples(examples, lambda ts: [np.array([1]) for _ in ts]), texts


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("own", [False, True])
def test_model_negatives_are_never_positives(share, own):
    """Under a scorer that rates a query's own positive text highest, no negative is ever one
    (neither another query's copy of it nor an own negative that repeats its text)."""
    data, texts = with_own_negatives() if own else encoded()
    sampler = scored_sampler(data, hard_share=share)
    for epoch in (1, 2, 3):
        for drawn in sampler.epoch(epoch):
            d = sampler.data
            positive_text = {int(d.group_ids[p]): set() for p in range(len(d))}
            for p in np.flatnonzero(d.labels > 0):
                positive_text[int(d.group_ids[p])].add(int(d.right[p]))

            def adversary(rows, d=d, positive_text=positive_text):
                own_text = [int(d.right[r]) in positive_text[int(d.group_ids[r])] for r in rows]
                return np.where(own_text, 100.0, 0.0)

            batch = sampler.choose(drawn, adversary)
            assert (sampler.group_index(batch) == np.repeat(np.arange(len(batch) // 3), 3)).all()
            for row in batch.reshape(-1, 3):
                pos, negs = row[0], row[1:]
                assert d.labels[pos] == 1 and (d.labels[negs] == 0).all()
                assert (d.group_ids[negs] == d.group_ids[pos]).all()
                assert not positive_text[int(d.group_ids[pos])] & {int(t) for t in d.right[negs]}


def test_share_one_takes_the_top_scored_of_the_pool():
    data, _ = encoded()
    sampler = scored_sampler(data, hard_share=1.0)
    score = table_scorer(0)
    for drawn in sampler.epoch(1):
        pools = drawn.reshape(-1, 5)
        chosen = sampler.choose(drawn, score).reshape(-1, 3)
        assert (chosen[:, 0] == pools[:, 0]).all()
        for pool, row in zip(pools[:, 1:], chosen, strict=True):
            assert len(set(pool.tolist())) == 4  # six answers, one excluded: 4 distinct drawn
            top = pool[np.argsort(-score(pool))[:2]]
            assert row[1:].tolist() == top.tolist()
        # a stub model that reverses the order chooses the other end of the pool
        reverse = sampler.choose(drawn, lambda rows: -score(rows)).reshape(-1, 3)
        for pool, row in zip(pools[:, 1:], reverse, strict=True):
            assert row[1:].tolist() == pool[np.argsort(score(pool))[:2]].tolist()


def test_share_zero_is_random_from_the_pool_and_a_half_mixes():
    data, _ = encoded()
    sampler = scored_sampler(data, hard_share=0.0, num_negatives=3)
    half = scored_sampler(data, hard_share=0.5, num_negatives=3)  # round(1.5) = 2 hardest
    for drawn, drawn_half in zip(sampler.epoch(1), half.epoch(1), strict=True):
        assert drawn.tolist() == drawn_half.tolist()  # the pools do not depend on the share
        pools = drawn.reshape(-1, 5)[:, 1:]
        first = sampler.choose(drawn, table_scorer(0)).reshape(-1, 4)
        other = sampler.choose(drawn, table_scorer(1)).reshape(-1, 4)
        assert first.tolist() == other.tolist()  # scores are not read
        assert first[:, 1:].tolist() == pools[:, :3].tolist()  # the pool's random order
        mixed = half.choose(drawn, table_scorer(0)).reshape(-1, 4)
        score = table_scorer(0)
        for pool, row in zip(pools, mixed, strict=True):
            top = pool[np.argsort(-score(pool))[:2]]
            rest = [int(c) for c in pool if c not in top]
            assert row[1:].tolist() == [*top.tolist(), rest[0]]


def test_epochs_are_a_function_of_the_seed_for_model_negatives():
    data, _ = encoded()
    a, b, c = (scored_sampler(data, seed=s) for s in (5, 5, 6))
    for epoch in (1, 2):
        drawn_a, drawn_b = a.epoch(epoch), b.epoch(epoch)
        assert [x.tolist() for x in drawn_a] == [x.tolist() for x in drawn_b]
        assert a.data.right.tolist() == b.data.right.tolist()
        chosen_a = [a.choose(x, table_scorer(epoch)).tolist() for x in drawn_a]
        chosen_b = [b.choose(x, table_scorer(epoch)).tolist() for x in drawn_b]
        assert chosen_a == chosen_b
    assert [x.tolist() for x in a.epoch(2)] != [x.tolist() for x in a.epoch(3)]
    a.epoch(1)
    c.epoch(1)
    assert a.data.right.tolist() != c.data.right.tolist()


def test_model_pools_of_own_negatives_repeat_only_when_too_few():
    data, texts = with_own_negatives()
    sampler = scored_sampler(data, hard_share=1.0, hard_pool=4)
    for drawn in sampler.epoch(1):
        batch = sampler.choose(drawn, table_scorer(2)).reshape(-1, 3)
        for row in batch:
            answers = [texts[int(sampler.data.right[n])] for n in row[1:]]
            if texts[int(sampler.data.left[row[0]])] == "q0":
                assert len(set(answers)) == 2 and set(answers) <= {"n0", "n1", "n2", "n3"}
            else:
                assert answers == ["m0", "m0"]  # its one negative, twice (k = 2)
    assert len(sampler.data) == len(data)  # own negatives: no new pairs


def test_model_negative_options_are_checked():
    data, _ = encoded()
    with pytest.raises(ValueError, match="hard_share must be a fraction in"):
        scored_sampler(data, hard_share=1.5)
    with pytest.raises(ValueError, match=r"hard_pool \(1\) must be >= num_negatives \(2\)"):
        scored_sampler(data, hard_pool=1)
    with pytest.raises(ValueError, match="chosen when drawn"):
        SampledNegativesSampler(data).choose(np.arange(3), table_scorer(0))
