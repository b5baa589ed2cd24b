"""distinct_rows: each distinct text of a padded batch once, and where each row's text is."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnmatch.nn import distinct
from attnmatch.nn.distinct import distinct_rows


def _texts(ids: torch.Tensor, mask: torch.Tensor) -> list[tuple[int, ...]]:
    return [tuple(row[m].tolist()) for row, m in zip(ids, mask, strict=True)]


def test_by_hand_padding_content_is_ignored_and_masks_count() -> None:
    ids = torch.tensor([[5, 6, 0], [7, 0, 0], [5, 6, 9], [7, 3, 3], [7, 0, 0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 0], [1, 0, 0], [1, 1, 0]]).bool()
    rows = distinct_rows(ids, mask)
    # Rows 0 and 2 are the text (5, 6) with different padding ids; rows 1 and 3 are (7,);
    # row 4 is (7, 0): a real 0, not padding.
    assert rows.first.tolist() == [0, 1, 4]
    assert rows.inverse.tolist() == [0, 1, 0, 1, 2]


def test_empty_batch_and_bad_shapes() -> None:
    rows = distinct_rows(torch.zeros(0, 4, dtype=torch.long), torch.zeros(0, 4, dtype=torch.bool))
    assert rows.first.shape == (0,) and rows.inverse.shape == (0,)
    with pytest.raises(ValueError, match="ids and mask"):
        distinct_rows(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 4, dtype=torch.bool))


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(st.integers(0, 4), min_size=0, max_size=4), min_size=1, max_size=6),
    picks=st.lists(st.integers(0, 5), min_size=1, max_size=20),
    pad=st.integers(0, 2),
    pad_id=st.integers(0, 9),
)
def test_rows_map_back_to_their_texts(
    texts: list[list[int]], picks: list[int], pad: int, pad_id: int
) -> None:
    batch_texts = [texts[p % len(texts)] for p in picks]
    width = max(len(t) for t in batch_texts) + pad
    ids = torch.full((len(batch_texts), width), pad_id, dtype=torch.long)
    mask = torch.zeros(len(batch_texts), width, dtype=torch.bool)
    for b, text in enumerate(batch_texts):
        ids[b, : len(text)] = torch.tensor(text, dtype=torch.long)
        mask[b, : len(text)] = True
        ids[b, len(text) :] = (pad_id + b) % 10  # padding differs from row to row

    first, inverse = distinct_rows(ids, mask)
    want = [tuple(t) for t in batch_texts]
    distinct = _texts(ids[first], mask[first])
    assert len(set(distinct)) == len(distinct) == len(set(want))  # each text exactly once
    assert [distinct[i] for i in inverse.tolist()] == want  # every row finds its own text
    assert torch.equal(mask[first][inverse], mask)
    assert first.tolist() == sorted(first.tolist())  # in order of first appearance
    assert all(int(first[inverse[b]]) <= b for b in range(len(want)))


def test_hash_collisions_and_the_torch_path_give_the_same_grouping(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    g = torch.Generator().manual_seed(3)
    texts = torch.randint(0, 6, (5, 7), generator=g)
    lengths = torch.tensor([7, 3, 3, 0, 5])
    picks = torch.randint(0, 5, (40,), generator=g)
    ids, mask = texts[picks], (torch.arange(7) < lengths[picks].unsqueeze(1))  # (40, 7)
    want = distinct_rows(ids, mask)
    assert len(want.first) == len(picks.unique())
    torch_path = distinct._distinct_rows_torch(ids, mask)
    assert torch.equal(torch_path.first, want.first) and torch.equal(
        torch_path.inverse, want.inverse
    )
    # Every row hashes to 0: the check finds the collisions and sorts the rows instead.
    monkeypatch.setattr(distinct, "_hash_weights", lambda width, which: np.zeros(width, np.int64))
    collided = distinct_rows(ids, mask)
    assert torch.equal(collided.first, want.first) and torch.equal(collided.inverse, want.inverse)


def test_select_and_expand_round_trip() -> None:
    ids = torch.tensor([[4, 5], [6, 0], [4, 5]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]]).bool()
    rows = distinct_rows(ids, mask)
    assert rows.repeats
    values = torch.arange(6.0).view(3, 2)  # (B, 2) any per-row values
    assert torch.equal(rows.expand(rows.select(ids)), ids)
    assert rows.select(values).shape == (2, 2)
    unique = distinct_rows(ids[:2], mask[:2])
    assert not unique.repeats
    assert unique.first.tolist() == [0, 1] and unique.expand(ids[:2]).data_ptr() == ids.data_ptr()


def test_sides_share_only_where_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    import attnmatch.nn.distinct
    from attnmatch.nn.distinct import SHARE_AT_MOST, distinct_sides

    repeated = torch.tensor([1, 1, 1, 1, 2, 2, 2, 2]).unsqueeze(1)  # (8, 1)
    mask = torch.ones_like(repeated, dtype=torch.bool)
    left, _ = distinct_sides(repeated, mask, repeated, mask)
    assert not left.repeats  # 8 pairs < SHARE_MIN_ROWS: the plain path, no search
    monkeypatch.setattr(attnmatch.nn.distinct, "SHARE_MIN_ROWS", 0)

    def side(texts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.tensor(texts).unsqueeze(1)  # (B, 1): one token a text
        return ids, torch.ones_like(ids, dtype=torch.bool)

    # 8 pairs: 2 distinct questions (sharing pays), 7 distinct answers: both sides shared.
    left, right = distinct_sides(*side([1, 1, 1, 1, 2, 2, 2, 2]), *side([1, 2, 3, 4, 5, 6, 7, 7]))
    assert len(left.first) == 2 and len(right.first) == 7
    # Nearly every text distinct on both sides (7 of 8 > SHARE_AT_MOST): the plain path.
    assert 7 / 8 > SHARE_AT_MOST
    left, right = distinct_sides(*side([1, 2, 3, 4, 5, 6, 7, 7]), *side([1, 2, 3, 4, 5, 6, 7, 8]))
    assert left.first.tolist() == list(range(8)) and not left.repeats and not right.repeats
    x = torch.randn(8, 3)
    assert left.select(x) is x and right.expand(x) is x
