"""Data-parallel training under `torchrun`: everything that knows there are several processes.

`torchrun --nproc-per-node N -m attnmatch train ...` starts N copies of the command. Each one
builds the same experiment (same seeds, same model), trains a replica wrapped in PyTorch's
`DistributedDataParallel` (DDP) on its share of every batch, and DDP averages the gradients, so
all replicas take the same optimiser step. Everything else happens once, on rank 0: the run
folder's lock, dev evaluation and model selection, checkpoints, the log, the floors, the final
evaluation and result.json, and all console output. The other ranks wait for rank 0's decisions
(the best epoch, early stopping, a finished run to reuse), which it broadcasts as JSON.

The global batch is what the config says (`train.batch_size` ranking groups or pairs). Every
rank builds each epoch's global batches (a pure function of seed and epoch, as in one process)
and takes its share with `shard`:

    rank r of W takes groups r, r + W, r + 2W, ... of each global batch

where a group is a ranking group (a positive and its negatives, never split) or, for pointwise
losses, one pair. Interleaving gives every rank a similar mix of lengths from length-sorted
batches. A rank with n_r of the batch's G groups multiplies its loss (a mean over its groups)
by w_r = n_r * W / G; DDP's mean of the W gradients is then sum_r (n_r / G) * grad(mean_r) =
grad(mean over the global batch), also when G is not a multiple of W. A rank left with no group
(G < W) runs its forward on the batch's first group with weight 0, so that every rank joins
every gradient reduction.

So W processes with global batch B follow the same trajectory as one process with batch B, up
to the order of float reductions (atol 1e-5 on the weights of the tiny test run). Not equal:
dropout (rank r > 0 draws its masks from its own seed, `rank_seed`), and anything that depends
on the composition of a rank's share beyond a per-group mean.

Backends: gloo on CPU; where CUDA is available the group is "cpu:gloo,cuda:nccl" (NCCL for the
gradients of CUDA models, gloo for the broadcasts of decisions), and the current CUDA device of
rank r is cuda:LOCAL_RANK, so that a model moved to "cuda" trains on the rank's own GPU
(`rank_device` names it explicitly).

The process group is joined lazily, by the first call to `world()` in a process that torchrun
started (it sets WORLD_SIZE, RANK and LOCAL_RANK), and left when the process exits. Without
torchrun every function here is the single-process identity.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict, dataclass, fields, is_dataclass
from datetime import timedelta
from typing import Any, ParamSpec, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from rich.console import Console
from torch import nn

P = ParamSpec("P")
R = TypeVar("R")

# Rank 0 evaluates (dev every epoch, the floors and test at the end) while the other ranks
# wait in a broadcast: long evaluations of large splits must not time the group out.
TIMEOUT = timedelta(hours=6)
# Rank r > 0 seeds its dropout with base + r * RANK_SEED_STRIDE, base = seed * 1_000_003 +
# epoch: distinct for every (epoch, rank) of a run, and below 2**64 up to 4,096 ranks.
RANK_SEED_STRIDE = 2**48


class RankFailed(RuntimeError):
    """Rank 0 failed in work it did for every rank (its own error says why)."""


@dataclass(frozen=True)
class World:
    """This process's place among the training processes.

    Attributes:
        rank: 0 .. size - 1; rank 0 writes and evaluates.
        size: the number of processes (1 without torchrun).
        local_rank: the rank on this machine (which GPU it trains on).
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def launched() -> World | None:
    """The world torchrun describes in the environment (WORLD_SIZE, RANK, LOCAL_RANK), or None
    when this process was not started by torchrun.

    Raises:
        ValueError: a variable is missing or not a valid rank (named).
    """
    if "WORLD_SIZE" not in os.environ:
        return None
    values = {}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        raw = os.environ.get(name)
        if raw is None or not raw.strip().isdigit():
            raise ValueError(
                f"environment variable {name}={raw!r}: torchrun sets WORLD_SIZE, RANK and "
                "LOCAL_RANK to non-negative integers; start training with torchrun"
            )
        values[name] = int(raw)
    world = World(rank=values["RANK"], size=values["WORLD_SIZE"], local_rank=values["LOCAL_RANK"])
    if world.size < 1 or world.rank >= world.size:
        raise ValueError(f"RANK={world.rank} is not below WORLD_SIZE={world.size}")
    return world


def world() -> World:
    """This process's world: joins torchrun's process group on the first call (gloo, plus NCCL
    where CUDA is available), and leaves it at exit. `World()` without torchrun."""
    if dist.is_available() and dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), _local_rank())
    found = launched()
    if found is None:
        return World()
    backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
    if torch.cuda.is_available() and found.local_rank < torch.cuda.device_count():
        torch.cuda.set_device(found.local_rank)  # "cuda" is now this rank's GPU
    dist.init_process_group(
        backend=backend, rank=found.rank, world_size=found.size, timeout=TIMEOUT
    )
    atexit.register(_leave)
    return found


def _local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


LEAVE_TIMEOUT = timedelta(seconds=30)  # how long a rank waits at exit for the others


def _leave() -> None:
    """Leaves the process group at exit, after the other ranks have finished their last
    collective: a rank that tears down its connections while a peer's gloo threads still use
    them can make that peer abort ("terminate called without an active exception"). A peer
    that is gone is waited for LEAVE_TIMEOUT at most."""
    if not dist.is_initialized():
        return
    try:
        dist.monitored_barrier(timeout=LEAVE_TIMEOUT)
    except Exception:  # a peer gone, or a backend without it: leave anyway
        pass
    dist.destroy_process_group()


def rank_device(device: str) -> str:
    """The device this rank trains on: "cuda" (or any "cuda:N") is cuda:LOCAL_RANK under
    torchrun, one GPU per process (and made the current CUDA device); others are unchanged."""
    w = world()
    if not device.startswith("cuda") or not w.distributed:
        return device
    torch.cuda.set_device(w.local_rank)
    return f"cuda:{w.local_rank}"


def rank_seed(base: int) -> int:
    """The torch seed of this rank's dropout in an epoch seeded `base`: `base` on rank 0 (a
    single process is unchanged), distinct on every other rank."""
    return base + world().rank * RANK_SEED_STRIDE


@dataclass(frozen=True)
class Shard:
    """One rank's share of a global batch.

    Attributes:
        rows: (b,) indices into the global batch's pair indices.
        group_index: (b,) the group of each row, renumbered 0..g-1, groups contiguous.
        weight: the factor of this rank's loss (a mean over its groups) that makes DDP's mean
            gradient the global batch's: groups here * world size / groups in the batch.
    """

    rows: np.ndarray
    group_index: np.ndarray
    weight: float


def shard(group_index: np.ndarray, rank: int, size: int) -> Shard:
    """Rank `rank`'s share of a global batch whose rows belong to groups `group_index`
    (contiguous, numbered 0..G-1): groups rank, rank + size, ... (module docstring). A rank
    with no group gets the first group with weight 0.

    Shape:
        group_index: (B,) -> Shard with rows, group_index: (b,)

    Raises:
        ValueError: the groups are not numbered 0..G-1 in order of their rows.
    """
    groups = np.asarray(group_index, dtype=np.int64)
    if len(groups) == 0 or groups[0] != 0 or np.any(np.diff(groups) < 0):
        raise ValueError("a batch's groups must be numbered 0..G-1 in order of their rows")
    if np.any(np.diff(groups) > 1):
        raise ValueError("a batch's groups must be numbered 0..G-1 without gaps")
    if size == 1:
        return Shard(np.arange(len(groups)), groups, 1.0)
    num_groups = int(groups[-1]) + 1
    mine = groups % size == rank  # (B,)
    if not mine.any():  # fewer groups than ranks: compute, but add nothing to the gradient
        rows = np.flatnonzero(groups == 0)
        return Shard(rows, np.zeros(len(rows), dtype=np.int64), 0.0)
    own = (num_groups - rank + size - 1) // size  # groups rank, rank + size, ... below G
    return Shard(np.flatnonzero(mine), groups[mine] // size, own * size / num_groups)


def shard_batch(group_index: np.ndarray) -> Shard:
    """This process's share of a global batch (`shard` at this rank)."""
    w = world()
    return shard(group_index, w.rank, w.size)


def wrap(model: nn.Module, probe: Callable[[nn.Module], torch.Tensor] | None = None) -> nn.Module:
    """`model` in `DistributedDataParallel` under torchrun, else `model` itself.

    DDP broadcasts rank 0's weights at construction, so every replica starts equal. Frozen
    parameters (`requires_grad=False`, e.g. a frozen input layer) are left out of the gradient
    reduction. `probe(model)`, a training loss, is differentiated once (its gradients discarded,
    random state kept) to find trainable parameters that a forward does not reach; DDP is told
    to look for unused parameters only when some rank has one, since the search costs a walk
    of the autograd graph every step.

    Buffers are synchronised at construction only, not before every forward (every replica
    builds the same ones, and no model here updates buffers in training).
    """
    w = world()
    if not w.distributed:
        return model
    unused = bool(_unused_parameters(model, probe)) if probe is not None else True
    flag = torch.tensor([int(unused)])
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    device = next(model.parameters()).device
    ddp = nn.parallel.DistributedDataParallel
    # torch >= 2.13 names the option forward_sync_buffers (and deprecates broadcast_buffers).
    sync: dict[str, Any] = (
        {"forward_sync_buffers": False}
        if "forward_sync_buffers" in inspect.signature(ddp).parameters
        else {"broadcast_buffers": False}
    )
    return ddp(
        model,
        device_ids=[device.index] if device.type == "cuda" else None,
        find_unused_parameters=bool(flag.item()),
        **sync,
    )


def _unused_parameters(model: nn.Module, probe: Callable[[nn.Module], torch.Tensor]) -> list[str]:
    """Names of trainable parameters that `probe(model)`'s gradient does not reach."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    training = model.training
    devices = [p.device for _, p in named if p.device.type == "cuda"][:1]
    with torch.random.fork_rng(devices=devices):
        model.train()
        loss = probe(model)
        grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    model.train(training)
    return [n for (n, _), g in zip(named, grads, strict=True) if g is None]


def mean_over_ranks(value: float) -> float:
    """The mean of `value` over the ranks (itself in a single process)."""
    w = world()
    if not w.distributed:
        return value
    total = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(total)
    return float(total.item()) / w.size


def broadcast_json(value: Any) -> Any:
    """Rank 0's `value` on every rank, sent as JSON (never pickle); other ranks' are ignored."""
    w = world()
    if not w.distributed:
        return value
    data = json.dumps(value).encode() if w.is_main else b""
    size = torch.tensor([len(data)], dtype=torch.int64)
    dist.broadcast(size, src=0)
    buffer = (
        torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if w.is_main
        else torch.empty(int(size.item()), dtype=torch.uint8)
    )
    dist.broadcast(buffer, src=0)
    return json.loads(buffer.numpy().tobytes().decode())


def on_rank0(fn: Callable[[], R], *, state: Any = None) -> R:
    """`fn()` run on rank 0 only; every rank returns its result (JSON-able). `state`, a
    dataclass of JSON-able fields, is then set to rank 0's on every rank (e.g. the best epoch
    and early-stopping count that `fn` updated). Without torchrun, `fn()`.

    Raises:
        RankFailed: on the other ranks, when `fn` raised on rank 0 (which raises its error).
    """
    w = world()
    if not w.distributed:
        return fn()
    payload: dict[str, Any] = {}
    if w.is_main:
        try:
            payload["result"] = fn()
        except BaseException as e:
            broadcast_json({"failed": f"{type(e).__name__}: {e}"})
            raise
        if state is not None:
            payload["state"] = asdict(state)
    payload = broadcast_json(payload)
    if "failed" in payload:
        raise RankFailed(f"rank 0 failed ({payload['failed']}); rank {w.rank} stops too")
    if state is not None and not w.is_main:
        assert is_dataclass(state)
        for f in fields(state):
            setattr(state, f.name, payload["state"][f.name])
    result: R = payload["result"]
    return result


@contextmanager
def rank0_context(
    make: Callable[P, AbstractContextManager[Any]], *args: P.args, **kwargs: P.kwargs
) -> Iterator[None]:
    """Enters `make(*args, **kwargs)` on rank 0 only (e.g. the run folder's lock); the other
    ranks go on once rank 0 is inside, or raise `RankFailed` when it failed to enter."""
    stack = ExitStack()

    def enter() -> None:
        stack.enter_context(make(*args, **kwargs))

    on_rank0(enter)
    with stack:
        yield


def check_agree(value: int, what: str) -> None:
    """Checks that every rank holds the same `value` (e.g. the epoch its checkpoint says).

    Raises:
        ValueError: the ranks differ (`what` names the value).
    """
    w = world()
    if not w.distributed:
        return
    low, high = torch.tensor([value]), torch.tensor([value])
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if low.item() != high.item():
        raise ValueError(
            f"the ranks disagree on {what} ({low.item()} to {high.item()}; rank {w.rank}: "
            f"{value}): every rank must read the same run folder (on several machines, put it "
            "on a filesystem they share)"
        )


def rank0_console(console: Console) -> Console:
    """`console` on rank 0, a silent one elsewhere (console output comes from rank 0 only)."""
    return console if world().is_main else Console(stderr=True, quiet=True)


def barrier() -> None:
    """Waits until every rank gets here (nothing without torchrun)."""
    if world().distributed:
        dist.barrier()
