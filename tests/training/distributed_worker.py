"""Run by `test_distributed.py` under `torchrun --nproc-per-node 2`: the helpers of
`attnmatch.training.distributed` in a real 2-process gloo group. Prints `ok <rank>` at the end;
any failed check raises (non-zero exit)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attnmatch.training import distributed


@dataclass
class State:
    best: float | None = None
    epochs: int = 0


class WithUnused(nn.Module):
    """A model with a trainable parameter that its forward never reads."""

    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Linear(3, 1)
        self.unused = nn.Linear(3, 1)
        self.frozen = nn.Linear(3, 3)
        self.frozen.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.used(self.frozen(x)).squeeze(-1)  # (B,)


def main() -> None:
    w = distributed.world()
    assert w.size == 2 and w.distributed, w

    # Rank 0's value and state reach every rank; a failure on rank 0 stops the others.
    assert distributed.broadcast_json({"rank": w.rank, "x": [1.5]}) == {"rank": 0, "x": [1.5]}
    state = State()

    def decide() -> str:
        state.best, state.epochs = 0.75, 3
        return "decided"

    assert distributed.on_rank0(decide, state=state) == "decided"
    assert (state.best, state.epochs) == (0.75, 3), state

    def fail() -> None:
        raise ValueError("only rank 0 meets this")

    try:
        distributed.on_rank0(fail)
    except distributed.RankFailed as e:
        assert w.rank == 1 and "only rank 0 meets this" in str(e)
    except ValueError:
        assert w.rank == 0
    else:
        raise AssertionError("on_rank0 did not raise")

    assert distributed.mean_over_ranks(float(w.rank)) == 0.5
    try:
        distributed.check_agree(w.rank, "the rank")
    except ValueError as e:
        assert "disagree on the rank" in str(e)
    else:
        raise AssertionError("check_agree did not raise")

    # DDP with an unused and a frozen parameter: 3 groups (rows) split 2 + 1, weighted, give the
    # global batch's mean gradient, the same on both ranks.
    torch.manual_seed(0)
    model = WithUnused()
    reference = WithUnused()
    reference.load_state_dict(model.state_dict())
    trained = distributed.wrap(model, lambda m: m(torch.ones(2, 3)).sum())
    assert isinstance(trained, nn.parallel.DistributedDataParallel)
    assert trained.find_unused_parameters
    x = torch.arange(9, dtype=torch.float32).reshape(3, 3)
    part = distributed.shard_batch(np.arange(3))
    assert part.rows.tolist() == ([0, 2] if w.rank == 0 else [1])
    for _ in range(2):  # a second step fails if DDP waits for the unused parameter's gradient
        trained.zero_grad()
        (trained(x[part.rows]).pow(2).mean() * part.weight).backward()
    reference(x).pow(2).mean().backward()
    torch.testing.assert_close(model.used.weight.grad, reference.used.weight.grad)
    assert model.unused.weight.grad is None and model.frozen.weight.grad is None
    sys.stdout.write(f"ok {w.rank}\n")  # one write: the ranks share the pipe


if __name__ == "__main__":
    main()
