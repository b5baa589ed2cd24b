"""Every model, training and the Matcher on a CUDA device, and in bf16 / fp16.

Deselected by default (the `gpu` marker); run on a machine with a CUDA device:

    python -m pytest -m gpu tests/test_gpu.py

(attnmatch installed, e.g. `pip install -e '.[dev]'`, or PYTHONPATH=src). Everything they need
is in the repository: the common model suite's tiny configs and the tiny pairs fixture, with
randomly initialised word vectors (no download). Without a CUDA device every test skips.

Tolerances: float32 on the GPU against float32 on the CPU, atol 1e-4 and rtol 1e-4, with
TF32 switched off (cuDNN convolutions and RNNs use TF32 by default, ~1e-3 relative error);
bf16 and fp16 forward passes are checked for finite outputs and gradients, and for the same
best candidate as fp32.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch.devices import autocast
from attnmatch.losses import auxiliary_loss, compute_loss
from attnmatch.matcher import Matcher
from attnmatch.training import ExperimentConfig, fit, train
from tests.models.conftest import model_batch, random_pairs, tiny_model
from tests.models.test_common import NAMES
from tests.models.test_encoded_inference import ENCODED
from tests.training.test_trainer import tiny_experiment as trainer_tiny_experiment

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available())"
    ),
]

CUDA = "cuda"
FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"
ATOL = RTOL = 1e-4  # float32 on the GPU vs the CPU, TF32 off

# A few models whose GPU path differs most from their CPU path: the hand-written CPU LSTM
# (aMV-LSTM, ESIM) against cuDNN, IARNN's step-by-step GRU, convolutions, attention blocks and a
# transformer.
CROSS_DEVICE = [
    "amvlstm_q",
    "esim",
    "iarnn_context",
    "hcrn",
    "mpcnn",
    "damm",
    "decomposable_attention",
    "matchpyramid",
    "minilm_cross_encoder",
]


@pytest.fixture
def no_tf32() -> Iterator[None]:
    """Full float32 matrix products and cuDNN kernels for the duration of a test."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("name", NAMES)
def test_every_model_forward_backward_on_cuda(name: str, precision: str) -> None:
    model = tiny_model(name, num_outputs=2, trainable=True).to(CUDA).train()
    left, right = random_pairs(8, seed=2)
    batch = model_batch(model, left, right, labels=[0, 1] * 4).to(CUDA)
    with autocast(torch.device(CUDA), precision):
        out = model(batch)  # (B, 2)
    assert out.device.type == torch.device(CUDA).type and out.shape == (8, 2)
    loss = compute_loss("cross_entropy", out.float(), batch)
    aux = auxiliary_loss(model)
    (loss if aux is None else loss + aux).backward()
    assert torch.isfinite(loss)
    for pname, param in model.named_parameters():
        assert param.grad is not None, f"{pname} got no gradient"
        assert param.grad.device.type == torch.device(CUDA).type
        assert torch.isfinite(param.grad).all(), f"{pname}: non-finite gradient"
        if precision == "fp32":  # in fp16 a tiny gradient may underflow (GradScaler's job)
            assert param.grad.abs().sum() > 0, f"{pname} got a zero gradient"


@pytest.mark.parametrize("name", NAMES)
def test_padding_invariance_on_cuda(name: str, no_tf32: None) -> None:
    """The GPU paths (cuDNN's packed LSTM/GRU in place of the hand-written CPU LSTM) read
    real tokens only, as the CPU ones do."""
    model = tiny_model(name).to(CUDA).eval()
    left, right = random_pairs(6, seed=1)
    with torch.inference_mode():
        batched = model(model_batch(model, left, right, extra_pad=3).to(CUDA))
        for i in range(len(left)):
            alone = model(model_batch(model, [left[i]], [right[i]]).to(CUDA))
            torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", CROSS_DEVICE)
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_cuda_equals_cpu(name: str, mode: str, no_tf32: None) -> None:
    """The same weights give the same outputs (eval mode) and the same gradients (train mode,
    dropout 0) on both devices."""
    cpu = tiny_model(name, num_outputs=2, trainable=True, dropout=0.0).train(mode == "train")
    gpu = tiny_model(name, num_outputs=2, trainable=True, dropout=0.0).to(CUDA)
    gpu.train(mode == "train")
    left, right = random_pairs(12, seed=4)
    batch = model_batch(cpu, left, right, labels=[0, 1] * 6)
    if mode == "eval":
        with torch.inference_mode():
            expected = cpu(batch)
            got = gpu(batch.to(CUDA)).cpu()
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=RTOL)
        return
    for model, b in ((cpu, batch), (gpu, batch.to(CUDA))):
        compute_loss("cross_entropy", model(b), b).backward()
    grads = {n: p.grad for n, p in cpu.named_parameters()}
    for pname, param in gpu.named_parameters():
        assert param.grad is not None and grads[pname] is not None
        torch.testing.assert_close(param.grad.cpu(), grads[pname], atol=ATOL, rtol=1e-3)


def tiny_experiment(**train: object) -> ExperimentConfig:
    """The trainer tests' tiny experiment, with 8 epochs and no floors unless told."""
    return trainer_tiny_experiment(**{"epochs": 8, "floors": "none", **train})


def _pairs(path: Path) -> list[tuple[str, str]]:
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    return [(r[1], r[2]) for r in rows]


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_train_on_cuda(precision: str, tmp_path: Path) -> None:
    """A tiny run trains on the GPU in each precision, learns (dev MAP > 0.7: the fixture's
    answers share the question's words), and its model loads on the CPU with the same scores."""
    result = train(
        tiny_experiment(device=CUDA, precision=precision), tmp_path / "run", progress=False
    )
    assert result.dev is not None and result.dev["map"] > 0.7, result.dev
    metrics = json.loads((result.model_dir / "metrics.json").read_text())
    assert metrics["device"].startswith(CUDA)
    assert metrics["experiment"]["train"]["precision"] == precision
    pairs = _pairs(FIXTURE / "test.tsv")
    on_gpu = Matcher.load(result.model_dir, device=CUDA)  # fp32 inference
    on_cpu = Matcher.load(result.model_dir, device="cpu")
    assert on_gpu.device.type == torch.device(CUDA).type and on_cpu.device.type == "cpu"
    gpu_scores, cpu_scores = on_gpu.score(pairs), on_cpu.score(pairs)
    assert gpu_scores.dtype == np.float32 and cpu_scores.dtype == np.float32
    np.testing.assert_allclose(gpu_scores, cpu_scores, atol=1e-3, rtol=1e-3)


def test_checkpoint_made_on_cuda_resumes_on_cpu(tmp_path: Path) -> None:
    """optimizer.pt and the weights are written from CPU tensors: a run started on the GPU
    continues on the CPU (train.device may change on resume)."""
    train(tiny_experiment(epochs=2, device=CUDA), tmp_path / "run", progress=False)
    raw = torch.load(tmp_path / "run" / "checkpoint" / "optimizer.pt", weights_only=True)
    devices = {t.device.type for s in raw["state"].values() for t in s.values()}
    assert devices == {"cpu"}
    resumed = train(
        tiny_experiment(epochs=3, device="cpu"), tmp_path / "run", resume=True, progress=False
    )
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3]


def test_fp16_resume_continues_with_its_loss_scale(tmp_path: Path) -> None:
    """The GradScaler's state is checkpointed: a resumed fp16 run starts from the scale the
    interrupted one had reached, not from the initial 65536."""
    train(
        tiny_experiment(epochs=2, device=CUDA, precision="fp16"), tmp_path / "run", progress=False
    )
    state_file = tmp_path / "run" / "checkpoint" / "trainer_state.json"
    saved = json.loads(state_file.read_text())["grad_scaler"]
    assert saved["scale"] > 0 and saved["_growth_tracker"] >= 0
    resumed = train(
        tiny_experiment(epochs=3, device=CUDA, precision="fp16"),
        tmp_path / "run",
        resume=True,
        progress=False,
    )
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3]
    after = json.loads(state_file.read_text())["grad_scaler"]
    # 6 more steps without overflow add 6 to the tracker (or an overflow halves the scale).
    assert (after["_growth_tracker"] == saved["_growth_tracker"] + 6) or (
        after["scale"] < saved["scale"]
    )


def test_matcher_fit_on_cuda_saved_and_loaded_on_cpu(tmp_path: Path, no_tf32: None) -> None:
    train_rows = [
        tuple(line.split("\t")[:4])
        for line in (FIXTURE / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    ]
    pairs = [(left, right, int(label), group) for group, left, right, label in train_rows]
    matcher = fit(
        pairs,
        model="mvlstm",
        inputs="random",
        epochs=3,
        floors="none",
        batch_size=4,
        device=CUDA,
    )
    assert matcher.device.type == torch.device(CUDA).type
    matcher.save(tmp_path / "m")
    loaded = Matcher.load(tmp_path / "m")  # the default device: cpu
    assert loaded.device.type == "cpu"
    test_pairs = _pairs(FIXTURE / "test.tsv")
    np.testing.assert_allclose(
        loaded.score(test_pairs), matcher.score(test_pairs), atol=ATOL, rtol=RTOL
    )


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_lower_precision_inference_ranks_as_fp32(precision: str, tmp_path: Path) -> None:
    result = train(tiny_experiment(epochs=4), tmp_path / "run", progress=False)
    fp32 = Matcher.load(result.model_dir, device=CUDA)
    low = Matcher.load(result.model_dir, device=CUDA, precision=precision)
    query = "what bridge window ?"
    candidates = [right for _, right in _pairs(FIXTURE / "train.tsv")][:40]
    a, b = fp32.rank(query, candidates), low.rank(query, candidates)
    assert a[0].index == b[0].index
    scores_a = np.array([r.score for r in sorted(a, key=lambda r: r.index)])
    scores_b = np.array([r.score for r in sorted(b, key=lambda r: r.index)])
    assert np.abs(scores_a - scores_b).max() < 0.1


def test_cli_rank_on_cuda(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from attnmatch.cli import app

    result = train(tiny_experiment(epochs=2), tmp_path / "run", progress=False)
    candidates = tmp_path / "c.txt"
    candidates.write_text("music on a bridge\nstone window\n", encoding="utf-8")
    outcome = CliRunner().invoke(
        app,
        [
            "rank",
            str(result.model_dir),
            "-q",
            "what bridge window ?",
            "-c",
            str(candidates),
            "--format",
            "json",
            "--device",
            "cuda",
            "--precision",
            "bf16",
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    rows = [json.loads(line) for line in outcome.stdout.splitlines()]
    assert sorted(r["index"] for r in rows) == [0, 1]


def test_distinct_rows_on_cuda_equal_the_cpu_ones() -> None:
    """`distinct_rows` on CUDA (`torch.unique`) finds the texts the CPU's hashes find; the
    models themselves share encodings on the CPU only (`distinct_sides`)."""
    from attnmatch.nn.distinct import distinct_rows, distinct_sides
    from tests.models.conftest import make_batch

    left, right = random_pairs(80, seed=5)
    left = [left[i // 20] for i in range(80)]  # 4 distinct questions
    batch = make_batch(left, right)
    on_cpu = distinct_rows(batch.left_ids, batch.left_mask)
    on_cuda = distinct_rows(batch.left_ids.to(CUDA), batch.left_mask.to(CUDA))
    assert len(on_cpu.first) == len(on_cuda.first) == 4
    torch.testing.assert_close(on_cuda.inverse.cpu(), on_cpu.inverse)
    gpu = batch.to(CUDA)
    sides = distinct_sides(gpu.left_ids, gpu.left_mask, gpu.right_ids, gpu.right_mask)
    assert all(not side.repeats for side in sides)  # the plain path on a GPU


@pytest.mark.parametrize("name", ENCODED)
def test_whole_input_inference_on_cpu_equals_forward_on_cuda(name: str, no_tf32: None) -> None:
    """`Matcher.predict` on the CPU takes the model's whole-input path (`models/fast/`); on
    CUDA it runs `forward` per batch. Both give the same outputs in the input order, hard cases
    (empty and 1-token texts, repeated answers) included."""
    from attnmatch.models import model_type_of
    from attnmatch.tasks import Task
    from tests.models.conftest import ranking_data

    torch.manual_seed(1)
    matcher = Matcher(
        model=tiny_model(name).eval(),
        model_type=model_type_of(name),
        inputs=None,  # type: ignore[arg-type]  # predict reads ids only
        task=Task(kind="ranking"),
        batch_size=64,
    )
    data = ranking_data(90, seed=4)
    on_cpu = matcher.predict(data)
    on_cuda = matcher.to(CUDA).predict(data)
    np.testing.assert_allclose(on_cpu, on_cuda, atol=ATOL, rtol=RTOL)
