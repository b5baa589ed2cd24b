"""Training batches: ranking groups (query, positive, k negatives) and plain pair batches.

Every epoch's batches are a pure function of (seed, epoch), so a run resumed at epoch e sees
exactly the batches an uninterrupted run would. Model-scored negatives ("model") draw their
pools so; which pool candidates a batch trains then depends only on the model's weights at that
step, which a checkpoint restores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from attnmatch.data.collate import pair_lengths
from attnmatch.data.encoding import EncodedPairs


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch])


def sort_in_pools(rows: np.ndarray, cost: np.ndarray, pool: int) -> np.ndarray:
    """Length bucketing: `rows` (in place) sorted by `cost` within consecutive pools of
    `pool` rows (a stable sort; pool <= 0 leaves them as they are)."""
    if pool > 0:
        for start in range(0, len(rows), pool):
            block = slice(start, start + pool)
            rows[block] = rows[block][np.argsort(cost[block], kind="stable")]
    return rows


class RankingGroupSampler:
    """Groups of one positive and k negatives of the same query, `groups_per_batch` a batch.

    Every positive pair of every query that has at least one negative starts one group per
    epoch; its k negatives are drawn from the query's negatives without replacement (with
    replacement when the query has fewer than k). Within a batch, group g occupies rows
    g*(1+k) .. g*(1+k)+k, positive first, and `group_index` says so explicitly.

    Length bucketing: groups are sorted by length within pools of `bucket_pool` batches, batches
    are formed inside each pool and the batch order is shuffled.

    Args:
        data: the encoded training split (labels > 0 are positives).
        num_negatives: k.
        groups_per_batch: groups in a batch (a batch has groups_per_batch * (1 + k) pairs).
        seed: base seed; epoch e uses `epoch_rng(seed, e)`.
        bucket_pool: batches per sorting pool (0 disables bucketing).
        where: what `data` is, for messages, e.g. "pairs:faq train (train.tsv)".

    Raises:
        ValueError: no query has both a positive and a negative candidate (names `where`).
    """

    def __init__(
        self,
        data: EncodedPairs,
        *,
        num_negatives: int = 4,
        groups_per_batch: int = 32,
        seed: int = 0,
        bucket_pool: int = 50,
        where: str = "the training split",
    ) -> None:
        if num_negatives < 1:
            raise ValueError(f"num_negatives must be >= 1, got {num_negatives}")
        if groups_per_batch < 1:
            raise ValueError(f"groups_per_batch must be >= 1, got {groups_per_batch}")
        self.num_negatives = num_negatives
        self.groups_per_batch = groups_per_batch
        self.seed = seed
        self.bucket_pool = bucket_pool
        self._lengths = pair_lengths(data)
        self._queries: list[tuple[np.ndarray, np.ndarray]] = []
        for members in data.groups():
            pos = members[data.labels[members] > 0]
            neg = members[data.labels[members] <= 0]
            if len(pos) and len(neg):
                self._queries.append((pos, neg))
        if not self._queries:
            raise ValueError(
                f"{where}: no query has both a positive and a negative candidate: cannot rank "
                f"(of {len(data.group_names)} queries); give queries negatives (label 0), or "
                "train with negatives drawn from other queries' answers (train.negatives)"
            )

    @property
    def group_size(self) -> int:
        return 1 + self.num_negatives

    def num_groups(self) -> int:
        return sum(len(pos) for pos, _ in self._queries)

    def __len__(self) -> int:
        return -(-self.num_groups() // self.groups_per_batch)

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The batches of `epoch`: each an array of pair indices, groups contiguous."""
        rng = epoch_rng(self.seed, epoch)
        k = self.num_negatives
        groups = []
        for pos, neg in self._queries:
            for p in pos:
                chosen = rng.choice(neg, size=k, replace=len(neg) < k)
                groups.append(np.concatenate(([p], chosen)))
        table = np.stack(groups)  # (G, 1+k)
        table = table[rng.permutation(len(table))]
        if self.bucket_pool > 0:
            cost = self._lengths[table].max(axis=1)  # (G,)
            sort_in_pools(table, cost, self.groups_per_batch * self.bucket_pool)
        batches = [
            table[i : i + self.groups_per_batch]
            for i in range(0, len(table), self.groups_per_batch)
        ]
        return [batches[i].reshape(-1) for i in rng.permutation(len(batches))]

    def group_index(self, batch: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(len(batch) // self.group_size), self.group_size)


class PairBatchSampler:
    """Shuffled batches of single pairs (classification, regression), length-bucketed."""

    def __init__(
        self, data: EncodedPairs, *, batch_size: int = 64, seed: int = 0, bucket_pool: int = 50
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.seed = seed
        self.bucket_pool = bucket_pool
        self._n = len(data)
        self._lengths = pair_lengths(data)

    def __len__(self) -> int:
        return -(-self._n // self.batch_size)

    def epoch(self, epoch: int) -> list[np.ndarray]:
        rng = epoch_rng(self.seed, epoch)
        order = rng.permutation(self._n)
        if self.bucket_pool > 0:
            sort_in_pools(order, self._lengths[order], self.batch_size * self.bucket_pool)
        batches = [order[i : i + self.batch_size] for i in range(0, self._n, self.batch_size)]
        return [batches[i] for i in rng.permutation(len(batches))]

    def group_index(self, batch: np.ndarray) -> np.ndarray:
        return np.arange(len(batch))


NegativeSource = Literal["random", "bm25", "in_batch", "model"]
NEGATIVE_SOURCES: tuple[NegativeSource, ...] = ("random", "bm25", "in_batch", "model")

# Scores of pairs (indices into the sampler's `data`) under the current model: (n,) -> (n,).
PairScorer = Callable[[np.ndarray], np.ndarray]


def hard_count(num_negatives: int, hard_share: float) -> int:
    """How many of k model-scored negatives are the pool's top-scored: hard_share * k rounded,
    halves up (k = 1, share 0.5: 1)."""
    return min(num_negatives, math.floor(hard_share * num_negatives + 0.5))


class SampledNegativesSampler:
    """Ranking groups whose negatives are answers of other queries (positive pairs only).

    Every positive pair starts one group per epoch, [positive, k negatives], as in
    `RankingGroupSampler`; a query with negatives of its own draws them from those. A query
    without draws from the pool of every other query's positive answers (never one of its own
    positive texts):
    - "random": k answers uniformly;
    - "bm25": k of the `hard_top` answers that BM25 ranks highest for the query (lexical hard
      negatives, `hard` candidates computed once), topped up at random;
    - "in_batch": the other groups' positives of the same batch (k = batch groups - 1; the
      listwise loss over them is the in-batch softmax of sentence-transformers'
      MultipleNegativesRankingLoss); an answer equal to one of the query's own positives is
      replaced by a random one.
    - "model": hard negatives chosen by the model being trained. Every group draws a pool of
      `hard_pool` candidates at random (its own negatives, never one whose text is one of its
      positives, where it has some; else other queries' answers); just before the batch is
      trained, `choose` scores the batch's pools with the current model and keeps, per group,
      the `hard_count(k, hard_share)` top-scored candidates and, for the rest of the k, the
      first others in the pool's (random) order: hard_share 1 is the hardest sampled
      negatives of Tan et al. / IARNN, 0.5 the mix sampling of HCRN, 0 random negatives.
      `epoch(e)` then returns pool batches, groups of 1 + hard_pool rows (the positive, then
      its pool: distinct candidates first, then repeats when the query has fewer).

    The negative pairs of an epoch are appended to the split's pairs: `data` is the split
    with them, valid after `epoch(e)` (texts are shared; nothing is re-encoded).

    Args:
        data: the encoded training split (labels > 0 are positives).
        source: "random", "bm25", "in_batch" or "model".
        num_negatives: k (not used by "in_batch").
        groups_per_batch: groups in a batch.
        seed: base seed; epoch e uses `epoch_rng(seed, e)`.
        bucket_pool: batches per length-sorting pool (0 disables).
        hard: for "bm25", {query text index: answer text indices, best first}.
        hard_pool: for "model", the candidates drawn per group and scored (>= k).
        hard_share: for "model", the fraction of the k negatives that are the pool's
            top-scored, in [0, 1].
        where: what `data` is, for messages, e.g. "pairs:faq train (train.tsv)".
    """

    def __init__(
        self,
        data: EncodedPairs,
        *,
        source: NegativeSource = "random",
        num_negatives: int = 4,
        groups_per_batch: int = 32,
        seed: int = 0,
        bucket_pool: int = 50,
        hard: dict[int, np.ndarray] | None = None,
        hard_pool: int = 20,
        hard_share: float = 0.5,
        where: str = "the training split",
    ) -> None:
        if source not in NEGATIVE_SOURCES:
            raise ValueError(
                f"unknown negative source {source!r}; use {', '.join(NEGATIVE_SOURCES)}"
            )
        if source == "bm25" and hard is None:
            raise ValueError("bm25 negatives need the BM25 candidates of each query (hard=)")
        if num_negatives < 1 or groups_per_batch < 1:
            raise ValueError("num_negatives and groups_per_batch must be >= 1")
        if source == "model":
            check_hard_options(hard_pool, hard_share, num_negatives)
        self.base = data
        self.data = data
        self.source = source
        self.num_negatives = num_negatives
        self.groups_per_batch = groups_per_batch
        self.seed = seed
        self.bucket_pool = bucket_pool
        self.hard = hard or {}
        self.hard_pool = hard_pool
        self.hard_share = hard_share
        self._lengths = data.text_lengths
        self._positives: list[int] = []  # pair index of every positive, in group order
        self._own: dict[int, np.ndarray] = {}  # group id -> its own negative pair indices
        self._excluded: dict[int, set[int]] = {}  # group id -> its positive answer texts
        for members in data.groups():
            pos = members[data.labels[members] > 0]
            neg = members[data.labels[members] <= 0]
            if not len(pos):
                continue
            g = int(data.group_ids[pos[0]])
            self._positives.extend(int(p) for p in pos)
            self._excluded[g] = {int(t) for t in data.right[pos]}
            if source == "model":  # the top-scored must never be a positive's text
                neg = neg[~np.isin(data.right[neg], data.right[pos])]
            if len(neg):
                self._own[g] = neg
        if not self._positives:
            raise ValueError(f"{where}: no query has a positive candidate: nothing to rank")
        self._pool = np.unique(data.right[np.asarray(self._positives)])  # answer texts
        if len(self._pool) < 2:
            raise ValueError(
                f"{where}: every query has the same single answer: negatives cannot come from "
                "other queries' answers"
            )
        self._group_size = 1 + num_negatives

    @property
    def scored(self) -> bool:
        """Whether `epoch` returns pools that `choose` must turn into ranking groups."""
        return self.source == "model"

    def num_groups(self) -> int:
        return len(self._positives)

    def __len__(self) -> int:
        return -(-self.num_groups() // self.groups_per_batch)

    def _random_answers(self, rng: np.random.Generator, group: int, n: int) -> list[int]:
        """n answer texts of other queries (with replacement only when too few exist)."""
        excluded = self._excluded[group]
        out: list[int] = []
        for _ in range(20):  # rejection sampling; the pool is mostly other queries' answers
            for t in rng.choice(self._pool, size=max(n, 4)):
                if int(t) not in excluded:
                    out.append(int(t))
                    if len(out) == n:
                        return out
        allowed = [int(t) for t in self._pool if int(t) not in excluded]
        if not allowed:
            raise ValueError(
                f"query {self.base.group_names[group]!r}: every answer of the split is one of its "
                "own positives, so it has no negative"
            )
        return [int(t) for t in rng.choice(allowed, size=n - len(out))] + out

    def _distinct_answers(self, rng: np.random.Generator, group: int, n: int) -> list[int]:
        """n answer texts of other queries, distinct as far as the split has them (then
        repeated at random)."""
        excluded = self._excluded[group]
        size = min(len(self._pool), n + len(excluded))  # holds n allowed ones when they exist
        drawn = rng.choice(self._pool, size=size, replace=False)
        out = [int(t) for t in drawn if int(t) not in excluded][:n]
        if len(out) < n:
            if not out:
                return self._random_answers(rng, group, n)  # raises: no answer is allowed
            out += [int(t) for t in rng.choice(out, size=n - len(out))]
        return out

    def _candidates(self, rng: np.random.Generator, pos: int) -> np.ndarray | list[int]:
        """The "model" pool of positive pair `pos`: `hard_pool` pair indices of its own
        negatives (an int64 array), or answer texts of other queries (a list); distinct
        candidates first, then repeats of them when there are fewer."""
        group = int(self.base.group_ids[pos])
        own = self._own.get(group)
        if own is None:
            return self._distinct_answers(rng, group, self.hard_pool)
        m = min(self.hard_pool, len(own))
        distinct = rng.choice(own, size=m, replace=False)
        return np.concatenate([distinct, rng.choice(distinct, size=self.hard_pool - m)])

    def _negatives(self, rng: np.random.Generator, pos: int, k: int) -> list[int] | np.ndarray:
        """k negatives for positive pair `pos`: pair indices of its own (int64 array), or
        answer texts (a list) for new pairs."""
        group = int(self.base.group_ids[pos])
        own = self._own.get(group)
        if own is not None:
            return rng.choice(own, size=k, replace=len(own) < k)
        if self.source == "bm25":
            query = int(self.base.left[pos])
            ranked = self.hard.get(query, np.zeros(0, dtype=np.int64))
            excluded = self._excluded[group]
            hard = [int(t) for t in ranked if int(t) not in excluded]
            chosen = [int(t) for t in rng.permutation(hard)[:k]] if hard else []
            if len(chosen) < k:
                chosen += self._random_answers(rng, group, k - len(chosen))
            return chosen
        return self._random_answers(rng, group, k)

    def epoch(self, epoch: int) -> list[np.ndarray]:
        """The batches of `epoch` (pair indices into `data`, groups contiguous)."""
        rng = epoch_rng(self.seed, epoch)
        positives = np.asarray(self._positives)[rng.permutation(len(self._positives))]
        if self.bucket_pool > 0:
            cost = np.maximum(
                self._lengths[self.base.left[positives]], self._lengths[self.base.right[positives]]
            )
            sort_in_pools(positives, cost, self.groups_per_batch * self.bucket_pool)
        chunks = [
            positives[i : i + self.groups_per_batch]
            for i in range(0, len(positives), self.groups_per_batch)
        ]
        new_left: list[int] = []
        new_right: list[int] = []
        new_group: list[int] = []
        n = len(self.base)

        def add_pair(query_pair: int, answer_text: int) -> int:
            new_left.append(int(self.base.left[query_pair]))
            new_right.append(answer_text)
            new_group.append(int(self.base.group_ids[query_pair]))
            return n + len(new_left) - 1

        def add_pool(query_pair: int, answer_texts: list[int]) -> list[int]:
            """One new pair per distinct text; a repeated text repeats its pair."""
            pairs: dict[int, int] = {}
            return [pairs.setdefault(a, add_pair(query_pair, a)) for a in answer_texts]

        batches: list[np.ndarray] = []
        for chunk in chunks:
            rows: list[list[int]] = []
            if self.source == "in_batch":
                k = max(1, len(chunk) - 1)
                answers = [int(self.base.right[p]) for p in chunk]
                for i, p in enumerate(chunk):
                    group = int(self.base.group_ids[p])
                    own = self._own.get(group)
                    if own is not None:
                        negs = [int(q) for q in rng.choice(own, size=k, replace=len(own) < k)]
                        rows.append([int(p), *negs])
                        continue
                    excluded = self._excluded[group]
                    others = [a for j, a in enumerate(answers) if j != i and a not in excluded]
                    if len(others) < k:
                        others += self._random_answers(rng, group, k - len(others))
                    rows.append([int(p), *(add_pair(int(p), a) for a in others)])
            elif self.source == "model":
                for p in chunk:
                    pool = self._candidates(rng, int(p))
                    if isinstance(pool, np.ndarray):
                        rows.append([int(p), *(int(q) for q in pool)])
                    else:
                        rows.append([int(p), *add_pool(int(p), pool)])
            else:
                k = self.num_negatives
                for p in chunk:
                    drawn = self._negatives(rng, int(p), k)
                    if isinstance(drawn, np.ndarray):
                        rows.append([int(p), *(int(q) for q in drawn)])
                    else:
                        rows.append([int(p), *(add_pair(int(p), a) for a in drawn)])
            batches.append(np.asarray(rows, dtype=np.int64).reshape(-1))
        self.data = EncodedPairs(
            self.base.texts,
            np.concatenate([self.base.left, np.asarray(new_left, dtype=np.int64)]),
            np.concatenate([self.base.right, np.asarray(new_right, dtype=np.int64)]),
            np.concatenate([self.base.labels, np.zeros(len(new_left), dtype=np.float32)]),
            np.concatenate([self.base.group_ids, np.asarray(new_group, dtype=np.int64)]),
            self.base.group_names,
        )
        return [batches[i] for i in rng.permutation(len(batches))]

    def choose(self, batch: np.ndarray, score: PairScorer) -> np.ndarray:
        """The ranking groups of a "model" pool batch (`epoch`): per group its positive and
        k negatives from its pool, the `hard_count(k, hard_share)` top-scored first (ties: pool
        order), then the pool's next others in order (repeats only when the query has fewer
        than k candidates).

        Args:
            batch: a pool batch of `epoch`, groups of 1 + hard_pool pair indices.
            score: the current model's score of pairs of `data`; called once, on the batch's
                distinct pool pairs.

        Returns:
            pair indices, groups of 1 + k, positive first (what `group_index` describes).
        """
        if not self.scored:
            raise ValueError(f"{self.source!r} negatives are chosen when drawn, not by a model")
        k, width = self.num_negatives, 1 + self.hard_pool
        table = batch.reshape(-1, width)  # (G, 1 + P)
        pools = table[:, 1:]  # (G, P)
        unique, inverse = np.unique(pools, return_inverse=True)
        scores = np.asarray(score(unique), dtype=np.float64)[inverse.reshape(-1)]  # (G * P,)
        scores = scores.reshape(pools.shape)  # (G, P)
        h = hard_count(k, self.hard_share)
        rows = []
        for pool, pool_scores, positive in zip(pools, scores, table[:, 0], strict=True):
            _, first = np.unique(pool, return_index=True)
            distinct = np.sort(first)  # positions of the distinct candidates, in pool order
            ranked = distinct[np.argsort(-pool_scores[distinct], kind="stable")]
            hard = ranked[:h]
            rest = distinct[~np.isin(distinct, hard)]
            picked = np.concatenate([hard, rest])[:k]
            if len(picked) < k:  # fewer than k candidates: the pool's repeats
                picked = np.concatenate([picked, np.arange(len(distinct), self.hard_pool)])[:k]
            rows.append(np.concatenate([[positive], pool[picked]]))
        return np.stack(rows).reshape(-1).astype(np.int64)

    def group_index(self, batch: np.ndarray) -> np.ndarray:
        """Groups are contiguous and of equal size within a batch: 1 + k, where in-batch
        negatives make k = groups - 1, so a batch of G > 1 groups has G * G pairs (one group:
        1 + 1). For "model" negatives: of a batch `choose` returned."""
        size = self._group_size
        if self.source == "in_batch":
            root = math.isqrt(len(batch))
            size = root if root > 1 and root * root == len(batch) else 2
        return np.repeat(np.arange(len(batch) // size), size)


def check_hard_options(hard_pool: int, hard_share: float, num_negatives: int | None) -> None:
    """Checks the options of "model" negatives (`num_negatives` None: the pool's size is not
    compared with k).

    Raises:
        ValueError: naming the option: hard_share outside [0, 1], hard_pool < 1 or <
            num_negatives.
    """
    if not (math.isfinite(hard_share) and 0.0 <= hard_share <= 1.0):
        raise ValueError(f"hard_share must be a fraction in [0, 1], got {hard_share}")
    if hard_pool < 1:
        raise ValueError(f"hard_pool must be >= 1, got {hard_pool}")
    if num_negatives is not None and hard_pool < num_negatives:
        raise ValueError(
            f"hard_pool ({hard_pool}) must be >= num_negatives ({num_negatives}) for "
            '"model" negatives: the k negatives of a group are chosen from its pool'
        )


def bm25_candidates(
    data: EncodedPairs, texts: Sequence[str], *, top: int = 20
) -> dict[int, np.ndarray]:
    """For every query of `data`'s positive pairs, the `top` positive answers of the split
    that BM25 (the `bm25s` library, over the split's distinct answers, words lower-cased)
    ranks highest for it, best first: the candidates of "bm25" hard negatives.

    Args:
        data: the encoded training split.
        texts: the distinct texts of `data`, in `data.texts` order.
    """
    import bm25s

    from attnmatch.data.tokenize import Tokenizer

    tokenizer = Tokenizer(lowercase=True)
    positive = data.labels > 0
    answers = np.unique(data.right[positive])
    queries = np.unique(data.left[positive])
    k = min(top + 1, len(answers))  # + 1: a query's own answer is usually among the best
    index = bm25s.BM25()
    index.index([tokenizer.tokenize(texts[a]) or ["<empty>"] for a in answers], show_progress=False)
    query_tokens = [tokenizer.tokenize(texts[q]) or ["<empty>"] for q in queries]
    found, _ = index.retrieve(query_tokens, k=k, show_progress=False, n_threads=1)
    return {
        int(q): answers[np.asarray(row, dtype=np.int64)]
        for q, row in zip(queries, found, strict=True)
    }
