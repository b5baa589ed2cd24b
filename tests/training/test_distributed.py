"""Data-parallel training: the sharding rule, the gradient it gives, and `torchrun` end to end.

The end-to-end test trains the tiny fixture experiment with `torchrun --nproc-per-node 2`
(gloo, one thread per process, dropout 0) and checks that its weights equal those of one
process with the same global batch within atol 1e-5 (measured: 2.4e-7 after 15 Adam steps,
the order of float reductions), before and after a resume of the 2-process run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from torch import nn

from attnmatch.data.collate import collate
from attnmatch.training import ExperimentConfig, build_experiment, train
from attnmatch.training.config import load_experiment
from attnmatch.training.distributed import World, _unused_parameters, shard, world
from attnmatch.training.loop import batch_loss, make_sampler

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
SRC = Path(__file__).parents[2] / "src"
ATOL = 1e-5


def experiment_toml(epochs: int) -> str:
    # 24 ranking groups, 5 a batch: batches of 5, 5, 5, 5, 4 groups, split 3 + 2 and 2 + 2,
    # so the weighting of unequal shares is exercised. Trainable word vectors, dropout 0.
    return f"""
model = "mvlstm"
[model_overrides]
hidden_size = 8
k = 10
dropout = 0.0
[data]
dataset = "pairs"
data_dir = "{FIXTURE}"
[inputs]
kind = "word_vectors"
vectors = "random"
dim = 8
trainable = true
[train]
epochs = {epochs}
batch_size = 5
num_negatives = 2
lr = 0.01
patience = 0
floors = "none"
threads = 1
"""


def groups_of(sizes: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes)


def test_shard_takes_whole_groups_interleaved() -> None:
    index = groups_of([3] * 5)  # 5 ranking groups of 3 pairs
    first, second = shard(index, 0, 2), shard(index, 1, 2)
    assert first.rows.tolist() == [0, 1, 2, 6, 7, 8, 12, 13, 14]  # groups 0, 2, 4
    assert second.rows.tolist() == [3, 4, 5, 9, 10, 11]  # groups 1, 3
    assert first.group_index.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert second.group_index.tolist() == [0, 0, 0, 1, 1, 1]
    assert (first.weight, second.weight) == pytest.approx((3 * 2 / 5, 2 * 2 / 5))


def test_shard_covers_the_batch_once_with_weights_summing_to_the_world() -> None:
    rng = np.random.default_rng(0)
    for _ in range(200):
        size = int(rng.integers(1, 6))
        index = groups_of([int(rng.integers(1, 4))] * int(rng.integers(1, 12)))
        parts = [shard(index, r, size) for r in range(size)]
        kept = [p for p in parts if p.weight > 0]
        rows = np.concatenate([p.rows for p in kept])
        assert sorted(rows.tolist()) == list(range(len(index)))
        assert sum(p.weight for p in parts) == pytest.approx(size)
        for p in parts:  # groups whole, renumbered 0..g-1 in order
            g = p.group_index
            assert g[0] == 0 and np.all(np.diff(g) >= 0) and np.all(np.diff(g) <= 1)


def test_shard_single_process_and_fewer_groups_than_ranks() -> None:
    index = groups_of([2, 2])
    alone = shard(index, 0, 1)
    assert alone.rows.tolist() == [0, 1, 2, 3] and alone.weight == 1.0
    idle = shard(index, 2, 3)  # 2 groups, 3 ranks: rank 2 computes group 0 and adds nothing
    assert idle.rows.tolist() == [0, 1] and idle.group_index.tolist() == [0, 0]
    assert idle.weight == 0.0
    with pytest.raises(ValueError, match="numbered 0..G-1"):
        shard(np.array([1, 1, 2]), 0, 2)
    with pytest.raises(ValueError, match="without gaps"):
        shard(np.array([0, 2]), 0, 2)


SAMPLERS = {  # name: (fixture, data options, train settings)
    "rank_hinge groups": ("pairs_tiny", {}, {}),
    "listwise, in-batch negatives": (
        "pairs_tiny",
        {},
        {"loss": "listwise", "negatives": "in_batch"},
    ),
    "pointwise pairs": ("pairs_tiny", {}, {"loss": "cross_entropy"}),
    "regression pairs (kl)": ("pairs_sts_tiny", {"task": "regression"}, {"batch_size": 7}),
}


@pytest.mark.parametrize("name", list(SAMPLERS))
def test_weighted_shares_give_the_global_batch_gradient(name: str) -> None:
    """DDP averages the ranks' gradients; with each share's loss weighted by `shard`, that mean
    is the gradient of the global batch's loss, also for unequal shares and idle ranks."""
    fixture, options, settings = SAMPLERS[name]
    config = ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {
                "dataset": "pairs",
                "data_dir": str(FIXTURE.parent / fixture),
                "options": options,
            },
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8, "trainable": True},
            "train": {"epochs": 1, "batch_size": 5, "num_negatives": 2, **settings},
        }
    )
    exp = build_experiment(config)
    sampler = make_sampler(exp)
    idx = sampler.epoch(1)[0]
    data = getattr(sampler, "data", exp.train)
    groups = sampler.group_index(idx)
    params = [p for p in exp.model.parameters() if p.requires_grad]

    def gradient(rows: np.ndarray, index: np.ndarray, weight: float) -> list[torch.Tensor]:
        loss = batch_loss(exp, collate(data, idx[rows], group_index=index)) * weight
        return list(torch.autograd.grad(loss, params))

    exp.model.train()
    whole = gradient(np.arange(len(idx)), groups, 1.0)
    num_groups = int(groups[-1]) + 1
    for size in (2, 3, num_groups + 1):  # shares of 3 + 2, 2 + 2 + 1, ..., and an idle rank
        parts = [shard(groups, r, size) for r in range(size)]
        grads = [gradient(p.rows, p.group_index, p.weight) for p in parts]
        for i, expected in enumerate(whole):
            mean = sum(g[i] for g in grads) / size
            torch.testing.assert_close(mean, expected, atol=1e-6, rtol=1e-5)


def test_unused_parameter_probe_ignores_frozen_ones() -> None:
    model = nn.ModuleDict({"used": nn.Linear(2, 1), "unused": nn.Linear(2, 1)})
    frozen = nn.Linear(2, 2)
    frozen.requires_grad_(False)
    model["frozen"] = frozen
    x = torch.ones(3, 2)
    names = _unused_parameters(model, lambda m: m["used"](m["frozen"](x)).sum())
    assert names == ["unused.weight", "unused.bias"]


def test_without_torchrun_the_world_is_one_process() -> None:
    assert "WORLD_SIZE" not in os.environ
    assert world() == World(rank=0, size=1, local_rank=0)


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(run / "checkpoint" / "model" / "model.safetensors"))


def _assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], atol=ATOL, rtol=0, msg=key)


def _torchrun(
    config: Path, run: Path, *extra: str, ok: bool = True, nproc: int = 2
) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "-m",
        "attnmatch",
        "train",
        str(config),
        "-o",
        str(run),
        "--no-progress",
        *extra,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode == 0) == ok, done.stderr[-3000:]
    return done


def test_two_processes_train_as_one_and_resume(tmp_path: Path) -> None:
    short, full = tmp_path / "short.toml", tmp_path / "full.toml"
    short.write_text(experiment_toml(2))
    full.write_text(experiment_toml(3))

    single = tmp_path / "single"
    train(load_experiment(short), single, progress=False)
    after_two = _weights(single)
    one_full = train(load_experiment(full), single, resume=True, progress=False)

    pair = tmp_path / "pair"
    done = _torchrun(short, pair)
    _assert_same_weights(_weights(pair), after_two)
    assert done.stdout.count("model saved to") == 1  # rank 0 alone prints
    assert done.stderr.count("epoch   2  loss") == 1
    assert (pair / "result.json").is_file()

    # The checkpoint does not depend on the number of processes: one process resumes it.
    shutil.copytree(pair, tmp_path / "pair-then-one")
    train(load_experiment(full), tmp_path / "pair-then-one", resume=True, progress=False)
    _assert_same_weights(_weights(tmp_path / "pair-then-one"), _weights(single))

    done = _torchrun(full, pair, "--resume")
    assert "resuming" in done.stderr and done.stderr.count("epoch   3  loss") == 1
    _assert_same_weights(_weights(pair), _weights(single))
    log = [h for h in train(load_experiment(full), pair, resume=True, progress=False).history]
    assert [h["train_pairs"] for h in log] == [h["train_pairs"] for h in one_full.history]
    for mine, theirs in zip(log, one_full.history, strict=True):
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], abs=1e-6)


def test_a_failure_on_rank_0_stops_every_rank(tmp_path: Path) -> None:
    """Rank 0 cannot take the run folder (it holds another file): it says why, the other rank
    stops at once instead of waiting for it."""
    config = tmp_path / "exp.toml"
    config.write_text(experiment_toml(1))
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.txt").write_text("mine")
    done = _torchrun(config, tmp_path / "run", ok=False)
    assert "error: " in done.stderr and "is not empty" in done.stderr
    assert (tmp_path / "run" / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["notes.txt"]


def test_helpers_in_a_two_process_group() -> None:
    """`distributed_worker.py` under torchrun: broadcasts, rank 0's decisions and failures,
    disagreement, and DDP with an unused and a frozen parameter on unequal shares."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    worker = Path(__file__).with_name("distributed_worker.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc-per-node", "2", str(worker)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    # The two processes share the pipe: their lines may interleave.
    assert sorted(re.findall(r"ok [01]", done.stdout)) == ["ok 0", "ok 1"], done.stdout


@pytest.mark.gpu
def test_torchrun_on_cuda_trains_as_one_process(tmp_path: Path) -> None:
    """Under torchrun on a GPU machine: NCCL for CUDA tensors, the model on cuda:LOCAL_RANK, DDP
    with device_ids. One process per GPU (NCCL refuses two ranks on one GPU), compared with a
    plain run on the same GPU within 1e-4 (some CUDA backward kernels are not deterministic)."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    config = tmp_path / "exp.toml"
    config.write_text(experiment_toml(2) + 'device = "cuda"\n')
    single = tmp_path / "single"
    train(load_experiment(config), single, progress=False)
    nproc = torch.cuda.device_count()
    done = _torchrun(config, tmp_path / "ddp", nproc=nproc)
    assert done.stdout.count("model saved to") == 1
    if nproc == 1:  # the same global batch on one GPU: the same weights
        for key, value in _weights(single).items():
            torch.testing.assert_close(_weights(tmp_path / "ddp")[key], value, atol=1e-4, rtol=0)
