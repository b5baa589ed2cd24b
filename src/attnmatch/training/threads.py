"""Training on the CPU with T > 1 threads: each batch's groups split over T worker threads.

A training step of these models is a few hundred small matrix products (50-200 wide), so one
OpenMP team splitting each of them gains little from a second thread (MV-LSTM: 1.29x), and far
less on a busy machine, where the team waits at every parallel region for a descheduled thread.
Instead each worker thread computes the loss and gradients of its share of the batch's groups
with one intra-op thread, as a rank of `torch.distributed` would (`distributed.shard`: the
shares' losses weighted so that they add up to the batch's mean), and the gradients are summed
in rank order into `.grad`. The result equals the one-thread step up to float rounding and is
deterministic (each share runs on one thread; the sum's order is fixed), so a resumed run still
continues exactly as an uninterrupted one with the same thread count.

It is used only where it cannot change what is computed: on the CPU, in float32, outside
`torchrun`, and for a model whose training forward draws no random numbers (no active dropout),
checked on the epoch's first batch (`draws_random`): concurrent draws from torch's one generator
would come in an order that changes from run to run.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
import torch
from torch import nn

from attnmatch.data.collate import collate
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.training import distributed
from attnmatch.training.experiment import Experiment


def shard_threads(exp: Experiment, model: nn.Module, scaler: object | None) -> int:
    """How many worker threads a step may use: torch's thread count where the threaded step
    applies (CPU, float32, no loss scaler, not under torchrun), else 1."""
    threads = torch.get_num_threads()
    if threads <= 1 or scaler is not None or distributed.world().distributed:
        return 1
    if exp.matcher.device.type != "cpu" or exp.matcher.precision != "fp32":
        return 1
    return threads if model is exp.model else 1


def draws_random(model: nn.Module, batch: PairBatch) -> bool:
    """Whether a training-mode forward of `model` on `batch` draws from torch's generator (e.g.
    dropout). The generator's state is restored afterwards."""
    state = torch.get_rng_state()
    try:
        with torch.no_grad():
            model(batch)
        return not torch.equal(state, torch.get_rng_state())
    finally:
        torch.set_rng_state(state)


def sharded_backward(
    exp: Experiment,
    data: EncodedPairs,
    idx: np.ndarray,
    group_index: np.ndarray,
    threads: int,
) -> torch.Tensor:
    """The batch's loss (detached) with its gradients in the trainable parameters' `.grad`,
    computed in `threads` shares of its groups side by side (module docstring).

    Shape:
        idx: (B,) rows of `data`, group_index: (B,) their groups 0..G-1 -> () loss
    """
    from attnmatch.training.loop import batch_loss  # the loop imports this module

    params = [p for p in exp.model.parameters() if p.requires_grad]
    device = exp.matcher.device

    def share(rank: int) -> tuple[torch.Tensor, tuple[torch.Tensor | None, ...]]:
        torch.set_num_threads(1)  # torch's setting is the process's: restored below
        part = distributed.shard(group_index, rank, threads)
        batch = collate(data, idx[part.rows], group_index=part.group_index).to(device)
        loss = batch_loss(exp, batch) * (part.weight / threads)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        return loss.detach(), grads

    futures = [_pool(threads).submit(share, rank) for rank in range(threads)]
    try:
        wait(futures)
        results = [future.result() for future in futures]
    finally:
        torch.set_num_threads(threads)
    for i, param in enumerate(params):
        total: torch.Tensor | None = None
        for _, grads in results:  # rank order: the same sum on every run
            grad = grads[i]
            if grad is not None:
                total = grad if total is None else total + grad
        param.grad = total
    loss = results[0][0]
    for other, _ in results[1:]:
        loss = loss + other
    return loss


@functools.cache
def _pool(threads: int) -> ThreadPoolExecutor:
    """Worker threads for `sharded_backward`."""
    return ThreadPoolExecutor(threads, thread_name_prefix="attnmatch-train")
