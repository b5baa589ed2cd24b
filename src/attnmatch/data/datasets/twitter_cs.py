"""Customer Support on Twitter (Kaggle, Axelbrooke 2017): pick a brand's reply to a customer tweet.

The corpus is one file, `twcs.csv` (inside `twcs.zip` on Kaggle), of 2.8M tweets to and from
large brands' support accounts, quoted CSV (texts hold commas, quotes and newlines):

    tweet_id,author_id,inbound,created_at,text,response_tweet_id,in_response_to_tweet_id

`inbound` is "True" for a customer's tweet and "False" for a brand's (`author_id` is then the
brand's screen name, e.g. "sprintcare"; customers' ids are anonymised numbers);
`in_response_to_tweet_id` is empty or the id of the tweet replied to (written "3.0" or "3");
`response_tweet_id` lists replies, comma-separated (it is not read: links are taken from
`in_response_to_tweet_id`).

The task follows the HCRN paper (Tay et al., IJCAI 2018, section 4.3): "For each Tweet-Reply
pair, we randomly selected four tweets as negative samples that originate from the same brand.
The dataset is split into 8:1:1 train-dev-test split. There are 33K training samples, 4K
development samples and 4K testing samples. MRR and Precision@1." The paper published neither
its pairs nor its sampling, so this is a RECONSTRUCTION, not the paper's sample:

1. A tweet-reply pair is a customer tweet (inbound True) and the first brand reply to it (a tweet
   with inbound False whose `in_response_to_tweet_id` is the customer tweet; the earliest
   `created_at` when several, then file order). The brand is the reply's `author_id`.
2. Brands with fewer than 5 distinct replies cannot give 4 distinct negatives and are dropped,
   with their pairs. Replies are compared without their leading @mentions (`reply_key`): brands
   answer with templates ("@115712 Please DM us" and "@115713 Please DM us" are one reply).
3. `max_pairs` pairs (default 41,000, read as 33K + 4K + 4K groups; "all" keeps every pair) are
   drawn with a fixed seed and split 8:1:1 by customer tweet (train 32,800, dev 4,100, test
   4,100 groups).
4. Each pair gets 4 negatives drawn with a fixed seed from the first replies of the same brand to
   other customer tweets (over the whole corpus, so a dev negative may be a train reply), each a
   different reply from the true one and from each other (by `reply_key`).

    Example(left=customer tweet, right=reply, label=1 for the true reply, 0 for a negative,
            group=customer tweet id, id="<customer tweet id>-<reply tweet id>")

Each group is 5 examples, the true reply first. Texts are kept as written (mentions, URLs, emoji).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.datasets._spec import DatasetFormatError, DatasetSpec, FileSpec, open_text
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask

FILE = "twcs.csv"
HEADER = (
    "tweet_id",
    "author_id",
    "inbound",
    "created_at",
    "text",
    "response_tweet_id",
    "in_response_to_tweet_id",
)
SPLITS = ("train", "dev", "test")
NEGATIVES = 4
DEFAULT_MAX_PAIRS = 41_000
SEED = 2018
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

PROTOCOL = RankingTask(
    name="twitter-cs-brand-negatives (reconstruction)",
    require_positive=True,
    require_negative=False,
    metrics=("mrr", "p@1"),
    primary="mrr",
    description=(
        "Customer Support on Twitter, reconstructed HCRN protocol: each customer tweet ranks "
        "the brand's first reply among 4 replies of the same brand to other tweets; MRR and P@1."
    ),
)


@dataclass(frozen=True, slots=True)
class ReplyPair:
    """A customer tweet and the first brand reply to it."""

    customer_id: str
    reply_id: str
    brand: str
    customer_text: str
    reply_text: str


def _timestamp(created_at: str, path: Path, lineno: int) -> tuple[int, ...]:
    """`"Tue Oct 31 22:10:47 +0000 2017"` as a sortable tuple (every tweet is in UTC, +0000)."""
    parts = created_at.split()
    try:
        _weekday, month, day, clock, _zone, year = parts
        hh, mm, ss = clock.split(":")
        return (int(year), _MONTHS[month], int(day), int(hh), int(mm), int(ss))
    except (ValueError, KeyError):
        raise DatasetFormatError(
            f"{path}:{lineno}: created_at must look like 'Tue Oct 31 22:10:47 +0000 2017', "
            f"got {created_at!r}"
        ) from None


def read_reply_pairs(path: str | Path) -> list[ReplyPair]:
    """Reads `twcs.csv` in one pass: every customer tweet with its first brand reply.

    Returns:
        The pairs, in file order of the first brand reply to each customer tweet.

    Raises:
        DatasetFormatError: a wrong header, a record without 7 fields, malformed quoting, a
            tweet id that is not an integer, `inbound` other than True/False, or (for a tweet
            with several brand replies) an unreadable `created_at`; the message names the file
            and the record's first line.
    """
    path = Path(path)
    customers: dict[str, str] = {}  # inbound tweet id -> text
    # replied-to tweet id -> (line, reply id, brand, created_at, text) of its earliest brand reply
    first: dict[str, tuple[int, str, str, str, str]] = {}
    with open_text(path) as f:
        reader = csv.reader(f, strict=True)
        start = 1
        try:
            header = next(reader, None)
            if header is None or tuple(header) != HEADER:
                raise DatasetFormatError(
                    f"{path}:1: expected the header {','.join(HEADER)!r}, got {header!r}"
                )
            start = reader.line_num + 1
            for row in reader:
                if len(row) != len(HEADER):
                    raise DatasetFormatError(
                        f"{path}:{start}: expected {len(HEADER)} comma-separated fields, "
                        f"got {len(row)}: {row[:3]!r}..."
                    )
                tweet_id, author, inbound, created_at, text, _replies, parent = row
                if not tweet_id.isdigit():
                    raise DatasetFormatError(
                        f"{path}:{start}: tweet_id must be an integer, got {tweet_id!r}"
                    )
                if inbound == "True":
                    customers[tweet_id] = text
                elif inbound != "False":
                    raise DatasetFormatError(
                        f"{path}:{start}: inbound must be True or False, got {inbound!r}"
                    )
                elif parent:
                    # Written as a float ("3.0") in the Kaggle file; plain integers are accepted.
                    parent = parent.removesuffix(".0")
                    if not parent.isdigit():
                        raise DatasetFormatError(
                            f"{path}:{start}: in_response_to_tweet_id must be an integer or "
                            f"empty, got {row[6]!r}"
                        )
                    reply = (start, tweet_id, author, created_at, text)
                    seen = first.get(parent)
                    if seen is None:
                        first[parent] = reply
                    elif _timestamp(created_at, path, start) < _timestamp(seen[3], path, seen[0]):
                        first[parent] = reply
                start = reader.line_num + 1
        except csv.Error as e:
            raise DatasetFormatError(f"{path}:{start}: malformed CSV record: {e}") from None
    return [
        ReplyPair(parent, reply_id, brand, customers[parent], text)
        for parent, (_line, reply_id, brand, _created, text) in first.items()
        if parent in customers
    ]


def reply_key(text: str) -> str:
    """What makes two replies the same reply: the text without its leading @mentions, whitespace
    collapsed ("@115712 Please DM us" and "@115713 Please DM us" are one template)."""
    words = text.split()
    start = 0
    while start < len(words) and words[start].startswith("@"):
        start += 1
    return " ".join(words[start:])


class _ReplyKeys:
    """`reply_key` of each pair's reply, computed on first use (most pairs never need theirs)."""

    def __init__(self, pairs: Sequence[ReplyPair]) -> None:
        self._pairs = pairs
        self._keys: dict[int, str] = {}

    def __getitem__(self, i: int) -> str:
        key = self._keys.get(i)
        if key is None:
            key = self._keys[i] = reply_key(self._pairs[i].reply_text)
        return key


def _has_enough_replies(members: Sequence[int], keys: _ReplyKeys) -> bool:
    distinct: set[str] = set()
    for i in members:  # stops as soon as a brand has shown NEGATIVES + 1 distinct replies
        distinct.add(keys[i])
        if len(distinct) > NEGATIVES:
            return True
    return False


def _draw_negatives(
    i: int, pool: Sequence[int], keys: _ReplyKeys, rng: np.random.Generator
) -> list[int]:
    """`NEGATIVES` pair indices from `pool` (the brand's pairs) whose replies are distinct
    (`reply_key`) and differ from pair `i`'s reply."""
    seen = {keys[i]}
    chosen: list[int] = []
    for _ in range(20):  # rejection sampling: a few draws from a pool of thousands
        for j in rng.integers(0, len(pool), size=2 * NEGATIVES):
            k = pool[j]
            if keys[k] not in seen:
                seen.add(keys[k])
                chosen.append(k)
                if len(chosen) == NEGATIVES:
                    return chosen
    # A pool dominated by one template: choose among its other distinct replies directly.
    distinct = list({keys[k]: k for k in pool if keys[k] not in seen}.values())
    picks = rng.permutation(len(distinct))[: NEGATIVES - len(chosen)]
    return chosen + [distinct[j] for j in picks]


def build_groups(
    pairs: Sequence[ReplyPair], *, max_pairs: int | None = DEFAULT_MAX_PAIRS, seed: int = SEED
) -> dict[str, list[Example]]:
    """The train/dev/test examples: pairs sampled, split 8:1:1 and given 4 same-brand negatives.

    Args:
        pairs: every pair of the corpus, as `read_reply_pairs` returns them.
        max_pairs: how many pairs to draw (None: all of them).
        seed: drives the draw of pairs and of negatives (fixed: every load gives the same data).

    Returns:
        `{split: examples}`, groups of 5 (the true reply first) in the order they were drawn.
    """
    keys = _ReplyKeys(pairs)
    by_brand: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        by_brand.setdefault(pair.brand, []).append(i)
    kept = {brand for brand, members in by_brand.items() if _has_enough_replies(members, keys)}
    eligible = [i for i, pair in enumerate(pairs) if pair.brand in kept]
    order = np.random.default_rng([seed, 0]).permutation(len(eligible))
    chosen = [eligible[j] for j in order[:max_pairs]]
    n_train, n_dev = int(0.8 * len(chosen)), int(0.1 * len(chosen))
    bounds = {
        "train": (0, n_train),
        "dev": (n_train, n_train + n_dev),
        "test": (n_train + n_dev, len(chosen)),
    }
    rng = np.random.default_rng([seed, 1])
    splits: dict[str, list[Example]] = {}
    for split, (lo, hi) in bounds.items():
        examples = splits.setdefault(split, [])
        for i in chosen[lo:hi]:
            pair = pairs[i]
            group = pair.customer_id
            examples.append(
                Example(pair.customer_text, pair.reply_text, 1, group, f"{group}-{pair.reply_id}")
            )
            for k in _draw_negatives(i, by_brand[pair.brand], keys, rng):
                negative = pairs[k]
                examples.append(
                    Example(
                        pair.customer_text,
                        negative.reply_text,
                        0,
                        group,
                        f"{group}-{negative.reply_id}",
                    )
                )
    return splits


# One parse of the 2.8M-row file serves all three splits: the last result is kept, keyed by the
# file's identity and the options.
_CACHE: dict[tuple[str, int, int, int | None], dict[str, list[Example]]] = {}


def _load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    path = paths[FILE]
    stat = path.stat()
    max_pairs = None if options["max_pairs"] == "all" else options["max_pairs"]
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, max_pairs)
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = build_groups(read_reply_pairs(path), max_pairs=max_pairs)
    return list(_CACHE[key][split])


# Kaggle publishes no checksum of twcs.csv and no copy is available here: "" means "no published
# checksum".
SPEC = DatasetSpec(
    name="twitter-cs",
    title="Customer Support on Twitter (HCRN reply-selection reconstruction)",
    task=RankingTask(),
    splits=SPLITS,
    split_files={split: (FILE,) for split in SPLITS},
    files=(FileSpec(FILE, ""),),
    folder="twitter_cs",
    license="CC BY-NC-SA 4.0",
    citation=(
        "Stuart Axelbrooke. Customer Support on Twitter (Kaggle dataset, 2017); task: Yi Tay, "
        "Anh Tuan Luu and Siu Cheung Hui. Hermitian Co-Attention Networks for Text Matching in "
        "Asymmetrical Domains. IJCAI 2018, section 4.3."
    ),
    # A Kaggle login is needed: download twcs.zip by hand and put twcs.csv in the folder.
    url="https://www.kaggle.com/datasets/thoughtvector/customer-support-on-twitter",
    manual_download=(
        "Kaggle needs a signed-in account: download twcs.zip from the page above (or with "
        "`kaggle datasets download thoughtvector/customer-support-on-twitter`), unzip it and "
        "put twcs.csv in ~/.cache/attnmatch/twitter_cs/ or $ATTNMATCH_DATA/twitter_cs/."
    ),
    protocol_description=(
        "RECONSTRUCTION of the HCRN paper's protocol (its sample is unpublished): customer "
        "tweet -> first brand reply pairs, max_pairs (default 41,000) drawn with a fixed seed "
        f"({SEED}) and split 8:1:1 by customer tweet; each with 4 negatives, replies of the same "
        "brand to other tweets. MRR (primary) and P@1 over groups of 5."
    ),
    options={"max_pairs": (DEFAULT_MAX_PAIRS, 10_000, 100_000, "all")},
    loader=_load,
    make_protocol=lambda split, options: PROTOCOL,
    split_sizes={"train": 32_800 * 5, "dev": 4_100 * 5, "test": 4_100 * 5},
    notes=(
        "Quoted CSV with newlines inside texts; in_response_to_tweet_id is written as a float "
        "('3.0'). Brands with fewer than 5 distinct replies are dropped; replies are compared "
        "without their leading @mentions (templates). Numbers are not "
        "comparable with the paper's table one for one: its 33K/4K/4K sample is unknown. "
        "`attnmatch datasets fetch` cannot log in to Kaggle: download twcs.zip yourself."
    ),
)

SPECS = (SPEC,)
