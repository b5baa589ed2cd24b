"""Model-scored hard negatives (train.negatives = "model"): the pool is scored by the model as
it trains, in eval mode without gradients; runs resume exactly."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from rich.console import Console

from attnmatch.configs import ConfigError
from attnmatch.data.collate import collate
from attnmatch.data.sampling import SampledNegativesSampler
from attnmatch.tasks import ranking_scores
from attnmatch.training import ExperimentConfig, train
from attnmatch.training.experiment import build_experiment
from attnmatch.training.loop import make_sampler, pool_scores
from tests.training.test_trainer import tiny_experiment

HARD = {"negatives": "model", "hard_pool": 3, "hard_share": 1.0}


def with_dropout(config: ExperimentConfig) -> ExperimentConfig:
    return config.with_overrides({"model_overrides": {"dropout": 0.5}})


def test_pool_scores_are_eval_mode_without_gradients_and_keep_train_mode() -> None:
    exp = build_experiment(with_dropout(tiny_experiment(**HARD)))
    sampler = make_sampler(exp)
    assert isinstance(sampler, SampledNegativesSampler) and sampler.scored
    rows = np.unique(sampler.epoch(1)[0].reshape(-1, 4)[:, 1:])
    seen: list[tuple[bool, bool]] = []
    # Every submodule: MV-LSTM's whole-input inference path calls its parts, not `forward`.
    hooks = [
        m.register_forward_hook(
            lambda module, args, out: seen.append((module.training, torch.is_grad_enabled()))
        )
        for m in exp.model.modules()
    ]
    exp.model.train()
    first = pool_scores(exp, sampler.data, rows)
    again = pool_scores(exp, sampler.data, rows)
    for hook in hooks:
        hook.remove()
    assert seen and all(state == (False, False) for state in seen)
    assert exp.model.training  # restored
    np.testing.assert_array_equal(first, again)  # no dropout noise
    exp.model.eval()
    with torch.no_grad():
        plain = ranking_scores(exp.model(collate(sampler.data, rows))).numpy()
    np.testing.assert_allclose(first, plain, rtol=1e-5, atol=1e-6)


def test_each_step_trains_the_top_scored_of_the_pool_under_the_current_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recomputed beside the trainer, with the weights of that step: share 1 trains exactly
    the pool's top-k, and the scores change as the model trains."""
    chosen = SampledNegativesSampler.choose
    steps: list[np.ndarray] = []
    exps = []

    def spy(self: SampledNegativesSampler, batch: np.ndarray, score):  # type: ignore[no-untyped-def]
        out = chosen(self, batch, score)
        exp = exps[0]
        pools = batch.reshape(-1, 1 + self.hard_pool)[:, 1:]  # (G, P)
        was_training = exp.model.training
        exp.model.eval()
        with torch.no_grad():
            scores = ranking_scores(exp.model(collate(self.data, pools.reshape(-1)))).numpy()
        exp.model.train(was_training)
        scores = scores.reshape(pools.shape)  # (G, P)
        for pool, s, row in zip(pools, scores, out.reshape(-1, 3), strict=True):
            _, first = np.unique(pool, return_index=True)
            distinct = np.sort(first)
            top = pool[distinct[np.argsort(-s[distinct])]][:2]
            if len(top) < 2:  # one candidate: it twice
                top = np.repeat(top, 2)
            assert row[1:].tolist() == top.tolist()
        steps.append(scores)
        return out

    import attnmatch.training.loop as loop

    real_build = loop.make_sampler

    def make(exp):  # type: ignore[no-untyped-def]
        exps.append(exp)
        return real_build(exp)

    monkeypatch.setattr(SampledNegativesSampler, "choose", spy)
    monkeypatch.setattr(loop, "make_sampler", make)
    train(tiny_experiment(epochs=2, **HARD), tmp_path / "run", progress=False)
    assert len(steps) >= 4


def test_train_with_model_negatives_resumes_exactly(tmp_path: Path) -> None:
    """End to end, then as `test_resume_equals_uninterrupted_run`: the pools come from (seed,
    epoch) and the choice from the checkpointed model, so 2 + 2 epochs equal 4."""
    settings = HARD | {"hard_share": 0.5}
    out = io.StringIO()
    full = train(
        tiny_experiment(epochs=4, **settings),
        tmp_path / "full",
        progress=False,
        console=Console(file=out, width=200),
    )
    assert "negatives: model-scored: of the 2 of a positive, the 1 the current model" in (
        out.getvalue()
    )
    log = [json.loads(line) for line in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    assert [row["epoch"] for row in log] == [1, 2, 3, 4]
    assert all(np.isfinite(row["train_loss"]) for row in log)
    assert full.dev is not None and full.test is not None
    train(tiny_experiment(epochs=2, **settings), tmp_path / "part", progress=False)
    resumed = train(
        tiny_experiment(epochs=4, **settings), tmp_path / "part", resume=True, progress=False
    )
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in full.history]
    assert [h["dev"] for h in resumed.history] == [h["dev"] for h in full.history]
    a = safetensors.torch.load_file(
        str(tmp_path / "full" / "checkpoint" / "model" / "model.safetensors")
    )
    b = safetensors.torch.load_file(
        str(tmp_path / "part" / "checkpoint" / "model" / "model.safetensors")
    )
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=0, rtol=0)
    other = train(tiny_experiment(epochs=4, **HARD), tmp_path / "hardest", progress=False)
    assert [h["train_loss"] for h in other.history] != [h["train_loss"] for h in full.history]


def test_model_negatives_options_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"train: hard_pool \(1\) must be >= num_negatives \(2\)"):
        tiny_experiment(negatives="model", hard_pool=1)
    with pytest.raises(ConfigError, match=r"train: hard_share must be a fraction in \[0, 1\]"):
        tiny_experiment(hard_share=-0.1)
    tiny_experiment(hard_pool=1)  # the pool's size matters to "model" negatives only
    with pytest.raises(
        ConfigError, match=r'train.negatives = "model" .* not the ranking task with cross_entropy'
    ):
        train(
            tiny_experiment(negatives="model", loss="cross_entropy"), tmp_path / "x", progress=False
        )


def test_tune_searches_the_negative_source_and_its_options() -> None:
    """The space docs/tuning.md shows is accepted; a source that does not exist is not."""
    from attnmatch.research.tune import check_space, parse_space

    space = {
        "train.negatives": {"type": "categorical", "choices": ["random", "model"]},
        "train.hard_share": {"type": "float", "low": 0.0, "high": 1.0},
        "train.hard_pool": {"type": "categorical", "choices": [10, 20, 50]},
    }
    check_space(tiny_experiment(), parse_space({"params": space}))
    space["train.negatives"]["choices"] = ["random", "hardest"]
    with pytest.raises(ConfigError, match="tune.params.train.negatives: the value 'hardest'"):
        check_space(tiny_experiment(), parse_space({"params": space}))
