"""Training batches: ranking groups (query, positive, k negatives) and plain pair batches.

Every epoch's batches are a pure function of (seed, epoch), so a run resumed at epoch e sees
exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

import numpy as np

from attnmatch.data.collate import pair_lengths
from attnmatch.data.encoding import EncodedPairs


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng([seed, epoch])


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
    """

    def __init__(
        self,
        data: EncodedPairs,
        *,
        num_negatives: int = 4,
        groups_per_batch: int = 32,
        seed: int = 0,
        bucket_pool: int = 50,
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
            raise ValueError("no query has both a positive and a negative candidate: cannot rank")

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
            pool = self.groups_per_batch * self.bucket_pool
            for start in range(0, len(table), pool):
                block = slice(start, start + pool)
                table[block] = table[block][np.argsort(cost[block], kind="stable")]
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
            pool = self.batch_size * self.bucket_pool
            for start in range(0, self._n, pool):
                block = order[start : start + pool]
                order[start : start + pool] = block[np.argsort(self._lengths[block], kind="stable")]
        batches = [order[i : i + self.batch_size] for i in range(0, self._n, self.batch_size)]
        return [batches[i] for i in rng.permutation(len(batches))]

    def group_index(self, batch: np.ndarray) -> np.ndarray:
        return np.arange(len(batch))
