"""Customer Support on Twitter on a fixture `twcs.csv` in the Kaggle format (no copy of the corpus
is available here): reply pairs, the first-reply rule, brand filtering, the seeded 8:1:1 split,
same-brand negatives, the protocol, and errors naming file and line."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import pytest

from attnmatch.data.datasets import DatasetFormatError, get_dataset, is_available
from attnmatch.data.datasets.twitter_cs import (
    HEADER,
    SPEC,
    ReplyPair,
    build_groups,
    read_reply_pairs,
    reply_key,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask

DATA = Path(__file__).parents[2] / "data"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "twitter_cs"
TWCS = FIXTURE / "twcs.csv"

# (customer tweet, its first brand reply), in file order of the first reply seen. Tweet 8 has
# three sprintcare replies (6, 9, 10): 10 is the earliest. Delta's 2 pairs are dropped later
# (fewer than 5 distinct reply texts); Delta's reply 33 answers a tweet that is not in the file,
# and 34 is a customer answering a customer.
PAIRS = [
    ("3", "1", "sprintcare"),
    ("5", "4", "sprintcare"),
    ("8", "10", "sprintcare"),
    ("12", "11", "sprintcare"),
    ("13", "14", "sprintcare"),
    ("15", "16", "sprintcare"),
    ("18", "17", "AppleSupport"),
    ("19", "20", "AppleSupport"),
    ("21", "22", "AppleSupport"),
    ("23", "24", "AppleSupport"),
    ("25", "26", "AppleSupport"),
    ("27", "28", "AppleSupport"),
    ("29", "30", "Delta"),
    ("31", "32", "Delta"),
]


@cache
def _pairs() -> tuple[ReplyPair, ...]:
    return tuple(read_reply_pairs(TWCS))


def _load_from(folder: Path, split: str, **options: object) -> list[Example]:
    return SPEC.loader({"twcs.csv": folder / "twcs.csv"}, split, SPEC.resolve_options(options))


def _groups(examples: list[Example]) -> dict[str, list[Example]]:
    groups: dict[str, list[Example]] = {}
    for ex in examples:
        assert ex.group is not None
        groups.setdefault(ex.group, []).append(ex)
    return groups


def _reply_id(ex: Example) -> str:
    assert ex.id is not None
    return ex.id.split("-")[1]


# --- the spec --------------------------------------------------------------------------------


def test_spec() -> None:
    assert get_dataset("twitter-cs") is SPEC
    assert SPEC.splits == ("train", "dev", "test") and SPEC.task.kind == "ranking"
    assert dict(SPEC.split_sizes) == {"train": 164_000, "dev": 20_500, "test": 20_500}
    assert [f.name for f in SPEC.files] == ["twcs.csv"] and SPEC.files[0].sha256 == ""
    assert SPEC.resolve_options({}) == {"max_pairs": 41_000}
    assert SPEC.license == "CC BY-NC-SA 4.0"
    assert not is_available("twitter-cs", DATA)
    for split in SPEC.splits:
        protocol = SPEC.protocol(split)
        assert isinstance(protocol, RankingTask) and "reconstruction" in protocol.name
        assert protocol.metrics == ("mrr", "p@1") and protocol.primary == "mrr"
        assert protocol.require_positive


# --- reply pairs -----------------------------------------------------------------------------


def test_reply_pairs() -> None:
    pairs = _pairs()
    assert [(p.customer_id, p.reply_id, p.brand) for p in pairs] == PAIRS
    assert pairs[0] == ReplyPair(
        customer_id="3",
        reply_id="1",
        brand="sprintcare",
        customer_text=(
            "@sprintcare I have sent several private messages and no one is responding as usual"
        ),
        reply_text=(
            "@115712 I understand. I would like to assist you. We would need to get you into a "
            "private secured link to further assist."
        ),
    )
    # A quoted text with a newline inside, and one with doubled quotes.
    assert (
        pairs[4].customer_text == "@sprintcare no signal in my area\nsince yesterday, any outage?"
    )
    assert pairs[3].customer_text == '@sprintcare my bill doubled, this is "unacceptable"'
    assert pairs[6].customer_text == "@AppleSupport my iPhone keeps restarting \U0001f621"


def test_crlf_file_reads_the_same(tmp_path: Path) -> None:
    text = TWCS.read_text(encoding="utf-8")
    crlf = tmp_path / "twcs.csv"
    # Record ends become CRLF; the newline inside the quoted text stays a bare LF.
    crlf.write_bytes(text.replace("?\n", "?\r\n").replace("\n", "\r\n").encode("utf-8"))
    pairs = read_reply_pairs(crlf)
    assert [(p.customer_id, p.reply_id) for p in pairs] == [(c, r) for c, r, _ in PAIRS]


# --- groups ----------------------------------------------------------------------------------


def test_split_8_1_1_by_customer_tweet() -> None:
    splits = build_groups(_pairs())
    groups = {split: _groups(examples) for split, examples in splits.items()}
    # 12 pairs of the two brands kept: int(0.8 * 12) = 9, int(0.1 * 12) = 1, the rest 2.
    assert {s: len(g) for s, g in groups.items()} == {"train": 9, "dev": 1, "test": 2}
    customers = [set(g) for g in groups.values()]
    assert set.union(*customers) == {c for c, _, brand in PAIRS if brand != "Delta"}
    assert sum(len(c) for c in customers) == 12  # disjoint


def test_groups_of_five_with_same_brand_negatives() -> None:
    pairs = _pairs()
    brand_of = {p.reply_id: p.brand for p in pairs}
    true_reply = {p.customer_id: p for p in pairs}
    for examples in build_groups(pairs).values():
        for group, members in _groups(examples).items():
            pair = true_reply[group]
            assert [ex.label for ex in members] == [1, 0, 0, 0, 0]
            assert members[0].right == pair.reply_text and _reply_id(members[0]) == pair.reply_id
            assert {ex.left for ex in members} == {pair.customer_text}
            negatives = members[1:]
            assert {brand_of[_reply_id(ex)] for ex in negatives} == {pair.brand}
            keys = [reply_key(ex.right) for ex in negatives]
            assert len(set(keys)) == 4 and reply_key(pair.reply_text) not in keys
            assert pair.reply_id not in {_reply_id(ex) for ex in negatives}


def test_templated_replies_are_not_negatives_of_each_other() -> None:
    # Replies 4 and 11 are one template to two customers (only the @mention differs): neither is
    # a negative of the other's customer tweet, so both draw the 4 other sprintcare replies.
    pairs = _pairs()
    reply = {p.reply_id: p.reply_text for p in pairs}
    assert reply["4"] != reply["11"] and reply_key(reply["4"]) == reply_key(reply["11"])
    everything = [ex for examples in build_groups(pairs).values() for ex in examples]
    groups = _groups(everything)
    for customer in ("5", "12"):
        assert sorted(_reply_id(ex) for ex in groups[customer][1:]) == ["1", "10", "14", "16"]


def test_sampling_is_seeded() -> None:
    pairs = _pairs()
    assert build_groups(pairs) == build_groups(pairs)
    assert build_groups(pairs) != build_groups(pairs, seed=1)
    # The loader: the same examples on every load, and every split from one parse.
    assert _load_from(FIXTURE, "train") == build_groups(pairs)["train"]
    assert _load_from(FIXTURE, "dev", max_pairs="all") == build_groups(pairs, max_pairs=None)["dev"]


def test_max_pairs() -> None:
    splits = build_groups(_pairs(), max_pairs=10)
    sizes = {s: len(_groups(examples)) for s, examples in splits.items()}
    assert sizes == {"train": 8, "dev": 1, "test": 1}
    all_pairs = build_groups(_pairs(), max_pairs=None)
    assert {s: len(e) for s, e in all_pairs.items()} == {"train": 45, "dev": 5, "test": 10}
    with pytest.raises(ValueError, match="max_pairs=5 is not one of"):
        SPEC.resolve_options({"max_pairs": 5})


def test_a_pool_dominated_by_one_template() -> None:
    # 96 identical replies and 4 others: a pair with the template must get exactly the 4 others,
    # a pair with another text gets the template once at most.
    texts = ["Please DM us."] * 96 + ["A", "B", "C", "D"]
    pairs = [ReplyPair(str(i), f"r{i}", "brand", f"q{i}", t) for i, t in enumerate(texts)]
    everything = [ex for examples in build_groups(pairs).values() for ex in examples]
    for group, members in _groups(everything).items():
        negatives = sorted(ex.right for ex in members[1:])
        if members[0].right == "Please DM us.":
            assert negatives == ["A", "B", "C", "D"], group
        else:
            assert len(set(negatives)) == 4 and members[0].right not in negatives


def test_reply_key() -> None:
    assert reply_key("@115712 @sprintcare  Please DM us. @me") == "Please DM us. @me"
    assert reply_key("Thanks @115712!") == "Thanks @115712!"
    assert reply_key("@115712") == ""


def test_brands_with_fewer_than_five_distinct_replies_are_dropped() -> None:
    texts = ["@1 one", "@2 two", "@3 three", "@4 four", "@5 four"]
    pairs = [ReplyPair(str(i), f"r{i}", "small", f"q{i}", t) for i, t in enumerate(texts)]
    assert build_groups(pairs) == {"train": [], "dev": [], "test": []}


# --- errors ----------------------------------------------------------------------------------


def _broken(tmp_path: Path, lineno: int, line: str) -> Path:
    path = tmp_path / "twcs.csv"
    shutil.copyfile(TWCS, path)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[lineno - 1] = line + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    return path


# Tweet 13's text spans lines 14-15 of the fixture, so tweet 14 is on line 16.
@pytest.mark.parametrize(
    ("lineno", "line", "match"),
    [
        (1, "tweet_id,author_id,inbound,created_at,text", r"twcs\.csv:1: expected the header"),
        (3, "2,115712,true,Tue Oct 31 22:11:45 +0000 2017,hi,,1.0", r"csv:3: inbound must be"),
        (2, "x1,sprintcare,False,Tue Oct 31 22:10:47 +0000 2017,hi,2,3.0", r"csv:2: tweet_id"),
        (16, "14,sprintcare,False,Mon Oct 30 10:05:00 +0000 2017,hi,,13.5", r"csv:16: in_resp"),
        (16, "14,sprintcare,False,Mon Oct 30 10:05:00 +0000 2017,hi,", r"csv:16: expected 7"),
        (16, '14,sprintcare,False,Mon,"h"i,,13', r"twcs\.csv:16: malformed CSV record"),
        # Tweet 8 has several replies, so their created_at is read (reply 9 is on line 10).
        (10, "9,sprintcare,False,Oct 31 2017,hello,,8.0", r"csv:10: created_at must look like"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, lineno: int, line: str, match: str) -> None:
    with pytest.raises(DatasetFormatError, match=match):
        read_reply_pairs(_broken(tmp_path, lineno, line))


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "twcs.csv").write_text("")
    with pytest.raises(DatasetFormatError, match=r"twcs\.csv:1: expected the header"):
        read_reply_pairs(tmp_path / "twcs.csv")
    (tmp_path / "twcs.csv").write_text(",".join(HEADER) + "\n")
    assert read_reply_pairs(tmp_path / "twcs.csv") == []
