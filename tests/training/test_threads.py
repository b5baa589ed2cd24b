"""Training with T > 1 CPU threads: a batch's groups in T shares side by side
(attnmatch.training.threads), equal to the one-thread step and deterministic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from attnmatch.data.collate import collate
from attnmatch.training import ExperimentConfig, threads, train
from attnmatch.training.experiment import Experiment, build_experiment
from attnmatch.training.loop import backward, make_sampler
from tests.training.test_trainer import tiny_experiment


@pytest.fixture
def two_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _step(exp: Experiment, idx: np.ndarray, groups: np.ndarray, shards: int) -> tuple:
    exp.model.zero_grad(set_to_none=True)
    loss = backward(exp, exp.train, idx, groups, shards=shards)
    grads = {n: p.grad.clone() for n, p in exp.model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("model", ["mvlstm", "hcrn"])
def test_sharded_step_equals_the_one_thread_step_and_repeats_exactly(model: str) -> None:
    config = tiny_experiment(batch_size=5).to_dict()
    config["model"], config["model_overrides"] = model, {"hidden_size": 8, "dropout": 0.0}
    exp = build_experiment(ExperimentConfig.from_dict(config))
    exp.model.train()
    sampler = make_sampler(exp)
    idx = sampler.epoch(1)[0]
    groups = sampler.group_index(idx)
    assert groups.max() >= 2  # groups for both shares
    assert threads.shard_threads(exp, exp.model, None) == 2
    loss, grads = _step(exp, idx, groups, shards=1)
    sharded_loss, sharded = _step(exp, idx, groups, shards=2)
    assert torch.get_num_threads() == 2  # restored
    assert sharded_loss == pytest.approx(loss, rel=1e-6)
    assert sharded.keys() == grads.keys() and grads
    for name in grads:
        torch.testing.assert_close(sharded[name], grads[name], atol=1e-6, rtol=1e-5)
    _, again = _step(exp, idx, groups, shards=2)
    for name in sharded:  # the same sum in the same order: bitwise
        assert torch.equal(again[name], sharded[name])


def test_draws_random_sees_dropout_and_keeps_the_generator() -> None:
    for dropout, draws in ((0.0, False), (0.5, True)):
        config = tiny_experiment().with_overrides({"model_overrides": {"dropout": dropout}})
        exp = build_experiment(config)
        exp.model.train()
        sampler = make_sampler(exp)
        idx = sampler.epoch(1)[0]
        batch = collate(exp.train, idx, group_index=sampler.group_index(idx))
        state = torch.get_rng_state()
        assert threads.draws_random(exp.model, batch) is draws
        assert torch.equal(torch.get_rng_state(), state)


def test_shard_threads_only_on_one_cpu_process_in_float32(two_threads: None) -> None:
    exp = build_experiment(tiny_experiment())
    assert threads.shard_threads(exp, exp.model, None) == 2
    assert threads.shard_threads(exp, exp.model, object()) == 1  # a loss scaler (fp16)
    assert threads.shard_threads(exp, torch.nn.Linear(1, 1), None) == 1  # a wrapped model
    torch.set_num_threads(1)
    assert threads.shard_threads(exp, exp.model, None) == 1


def _trained(config: ExperimentConfig, run: Path) -> dict[str, torch.Tensor]:
    result = train(config, run, progress=False)
    return safetensors.torch.load_file(str(Path(result.model_dir) / "model.safetensors"))


@pytest.mark.usefixtures("two_threads")
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_training_on_two_threads_repeats_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dropout: float
) -> None:
    calls: list[int] = []
    sharded = threads.sharded_backward

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return sharded(*args, **kwargs)

    monkeypatch.setattr(threads, "sharded_backward", spy)
    config = tiny_experiment(epochs=2).with_overrides({"model_overrides": {"dropout": dropout}})
    first = _trained(config, tmp_path / "a")
    assert bool(calls) is (dropout == 0.0)  # with dropout: the one-thread step
    second = _trained(config, tmp_path / "b")
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name
