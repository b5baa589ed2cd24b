"""Devices and precision on the CPU: names and errors, bf16 inference and training, resume.

The GPU side is tests/test_gpu.py (`-m gpu`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch.configs import ConfigError
from attnmatch.devices import (
    autocast,
    check_device_name,
    check_precision,
    grad_scaler,
    module_device,
    resolve_device,
)
from attnmatch.matcher import Matcher
from attnmatch.metrics.regression import regression_metrics
from attnmatch.nn.recurrent import BiRNN
from attnmatch.training import ExperimentConfig, train
from attnmatch.training.run_dir import check_resumable
from tests.hostile._util import assert_clear_error, run_cli

from .training.test_trainer import FIXTURE, tiny_experiment

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")


# ------------------------------------------------------------------ names and errors


@pytest.mark.parametrize("name", ["cpu", "cuda", "cuda:0", "cuda:12", "auto", "CUDA:1", " cpu "])
def test_device_names(name: str) -> None:
    assert check_device_name(name) == name.strip().lower()


@pytest.mark.parametrize("name", ["gpu", "gpu0", "cuda:", "cuda:x", "cuda:-1", "meta", "", "0"])
def test_malformed_device_names_are_one_line_naming_the_option(name: str) -> None:
    with pytest.raises(ValueError, match=r"^--device '.*': not a device name \(cpu, cuda") as info:
        resolve_device(name, "--device")
    assert "\n" not in str(info.value)


def test_auto_is_the_cpu_without_cuda() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")


@no_cuda
@pytest.mark.parametrize("name", ["cuda", "cuda:1"])
def test_cuda_without_a_device(name: str) -> None:
    with pytest.raises(ValueError, match=f"^--device '{name}': no CUDA device is available"):
        resolve_device(name, "--device")


def test_precisions() -> None:
    cpu = torch.device("cpu")
    assert check_precision("bf16", cpu) == "bf16"
    assert check_precision("fp32", cpu) == "fp32"
    assert check_precision("fp16") == "fp16"  # by name only: no device given
    with pytest.raises(ValueError, match="^--precision 'fp16' is not supported on the CPU"):
        check_precision("fp16", cpu, "--precision")
    with pytest.raises(ValueError, match=r"^--precision 'fp8': not a precision \(fp32, bf16"):
        check_precision("fp8", cpu, "--precision")


def test_autocast_and_scaler() -> None:
    cpu = torch.device("cpu")
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    with autocast(cpu, "fp32"):  # nothing at all: the float32 computation of before
        assert not torch.is_autocast_enabled("cpu")
        assert (a @ b).dtype == torch.float32
    with autocast(cpu, "bf16"):
        assert (a @ b).dtype == torch.bfloat16
    assert grad_scaler(cpu, "fp32") is None and grad_scaler(cpu, "bf16") is None
    assert module_device(torch.nn.Module()) == cpu  # no tensors (a lexical scorer)


def test_train_config_fields() -> None:
    config = ExperimentConfig()
    assert (config.train.device, config.train.precision) == ("cpu", "fp32")
    with pytest.raises(ConfigError, match="train: device 'gpu0': not a device name"):
        ExperimentConfig.from_dict({"train": {"device": "gpu0"}})
    with pytest.raises(ConfigError, match="train.precision.*'fp8'"):
        ExperimentConfig.from_dict({"train": {"precision": "fp8"}})
    # A config naming CUDA loads anywhere (results are read on laptops); running it does not.
    assert ExperimentConfig.from_dict({"train": {"device": "cuda:1"}}).train.device == "cuda:1"


@no_cuda
def test_training_on_cuda_without_a_device_says_so_before_the_folder_is_made(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="^train.device 'cuda': no CUDA device"):
        train(tiny_experiment(device="cuda"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="^train.precision 'fp16' is not supported on the CPU"):
        train(tiny_experiment(precision="fp16"), tmp_path / "run", progress=False)


def test_resume_of_a_run_made_before_device_and_precision(tmp_path: Path) -> None:
    saved = tiny_experiment().to_dict()
    for key in ("device", "precision"):
        del saved["train"][key]  # a config recorded before these fields existed
    check_resumable(saved, tiny_experiment().to_dict())
    check_resumable(saved, tiny_experiment(device="auto").to_dict())  # where it runs may change
    with pytest.raises(ValueError, match=r"changed \(train.precision\)"):
        check_resumable(saved, tiny_experiment(precision="bf16").to_dict())


# ------------------------------------------------------------------ bf16 on the CPU


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("devices") / "run"
    return train(tiny_experiment(epochs=8, floors="none"), out, progress=False).model_dir


def _candidates() -> list[str]:
    rows = (FIXTURE / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return list(dict.fromkeys(row.split("\t")[2] for row in rows))[:40]


# bf16 keeps 8 bits of mantissa (~3 significant digits). On this model (scores 0.1 to 2.6)
# the largest difference measured was 0.008 and Spearman 0.9999 over 40 candidates; the bounds
# leave room for other CPUs' kernels, not for a wrong computation.
BF16_MAX_ABS = 0.05
BF16_MIN_SPEARMAN = 0.99


@pytest.mark.parametrize("query", ["what bridge window ?", "what apple river ?"])
def test_bf16_inference_ranks_as_fp32(model_dir: Path, query: str) -> None:
    fp32 = Matcher.load(model_dir)
    bf16 = Matcher.load(model_dir, precision="bf16")
    assert bf16.precision == "bf16" and bf16.device == torch.device("cpu")
    candidates = _candidates()
    assert len(candidates) == 40
    pairs = [(query, c) for c in candidates]
    a, b = fp32.score(pairs), bf16.score(pairs)
    assert a.dtype == b.dtype == np.float32
    assert not np.array_equal(a, b)  # bf16 did run
    assert np.abs(a - b).max() < BF16_MAX_ABS
    spearman = regression_metrics(a, b)["spearman"]
    assert spearman > BF16_MIN_SPEARMAN
    assert fp32.rank(query, candidates)[0].index == bf16.rank(query, candidates)[0].index


def test_matcher_to(model_dir: Path) -> None:
    m = Matcher.load(model_dir)
    assert m.to("auto" if not torch.cuda.is_available() else "cpu") is m
    assert m.to("cpu", precision="bf16").precision == "bf16"
    assert m.to("cpu").precision == "bf16"  # kept when not given
    with pytest.raises(ValueError, match="^precision 'fp16' is not supported on the CPU"):
        m.to("cpu", precision="fp16")
    with pytest.raises(ValueError, match="^precision 'half': not a precision"):
        Matcher.load(model_dir, precision="half")
    with pytest.raises(ValueError, match="^device 'gpu': not a device name"):
        m.to("gpu")


def test_hand_written_lstm_computes_in_float32_under_cpu_autocast() -> None:
    """The hand-written CPU LSTM is not autocast-aware: under bf16 it runs in float32, giving
    exactly the float32 states."""
    torch.manual_seed(0)
    rnn = BiRNN("lstm", 6, 5)
    x = torch.randn(30, 7, 6, requires_grad=True)  # a training batch: the hand-written path
    mask = torch.arange(7) < torch.randint(1, 8, (30, 1))  # (30, 7)
    expected = rnn(x, mask)
    with autocast(torch.device("cpu"), "bf16"):
        got = rnn(x.to(torch.bfloat16), mask)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, rnn(x.to(torch.bfloat16).float(), mask), atol=0, rtol=0)
    assert (got - expected).abs().max() < 0.02  # only the input's rounding to bf16 differs
    got.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_bf16_training_on_the_cpu_learns(tmp_path: Path) -> None:
    result = train(
        tiny_experiment(epochs=8, precision="bf16", floors="none"), tmp_path / "run", progress=False
    )
    # The fixture's answers share the question's words: a working model learns it (fp32
    # reaches 0.91 here, bf16 0.82).
    assert result.dev is not None and result.dev["map"] > 0.7
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0]
    loaded = Matcher.load(result.model_dir)
    assert loaded.metrics["device"] == "cpu"
    assert loaded.metrics["experiment"]["train"]["precision"] == "bf16"


def test_bf16_resume_equals_uninterrupted_run(tmp_path: Path) -> None:
    full = train(
        tiny_experiment(epochs=3, precision="bf16", floors="none"),
        tmp_path / "full",
        progress=False,
    )
    train(
        tiny_experiment(epochs=1, precision="bf16", floors="none"),
        tmp_path / "part",
        progress=False,
    )
    resumed = train(
        tiny_experiment(epochs=3, precision="bf16", floors="none"),
        tmp_path / "part",
        resume=True,
        progress=False,
    )
    assert [h["dev"] for h in resumed.history] == [h["dev"] for h in full.history]


# ------------------------------------------------------------------ the command line


@pytest.mark.parametrize("command", ["train", "evaluate", "score", "rank", "serve"])
def test_help_lists_device_and_precision(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli([command, "--help"], capsys)
    assert outcome.code == 0
    assert "--device" in outcome.stdout and "--precision" in outcome.stdout


def _rank(model_dir: Path, tmp_path: Path, *options: str) -> list[str]:
    candidates = tmp_path / "c.txt"
    candidates.write_text("\n".join(_candidates()[:12]) + "\n", encoding="utf-8")
    return ["rank", str(model_dir), "-q", "what bridge window ?", "-c", str(candidates), *options]


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        (("--device", "gpu0"), ("--device 'gpu0'", "not a device name", "cuda:N")),
        (("--precision", "fp16"), ("--precision 'fp16'", "not supported on the CPU", "bf16")),
    ],
)
def test_cli_device_errors(
    model_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    options: tuple[str, ...],
    needles: tuple[str, ...],
) -> None:
    assert_clear_error(run_cli(_rank(model_dir, tmp_path, *options), capsys), *needles)


@no_cuda
@pytest.mark.parametrize("command", ["rank", "score", "evaluate", "serve", "train"])
def test_cli_cuda_without_a_device(
    command: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {
        "rank": _rank(model_dir, tmp_path),
        "score": ["score", str(model_dir), str(FIXTURE / "dev.tsv")],
        "evaluate": ["evaluate", str(model_dir), "--dataset", f"pairs:{FIXTURE}:dev"],
        "serve": ["serve", str(model_dir), "--port", "0"],
        "train": ["train", "--dataset", "pairs", "--data-dir", str(FIXTURE), "-o", str(tmp_path)],
    }[command]
    outcome = run_cli([*args, "--device", "cuda"], capsys)
    assert_clear_error(outcome, "--device 'cuda'", "no CUDA device", "'cpu'")


def test_cli_rank_in_bf16(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fp32 = run_cli(_rank(model_dir, tmp_path, "--format", "json"), capsys)
    bf16 = run_cli(_rank(model_dir, tmp_path, "--format", "json", "--precision", "bf16"), capsys)
    assert fp32.code == bf16.code == 0, bf16.stderr
    best = [json.loads(o.stdout.splitlines()[0])["index"] for o in (fp32, bf16)]
    assert best[0] == best[1]


def test_checkpoints_made_before_the_loss_scale_was_saved_resume(tmp_path: Path) -> None:
    train(tiny_experiment(epochs=1, floors="none"), tmp_path / "run", progress=False)
    state_file = tmp_path / "run" / "checkpoint" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    assert state.pop("grad_scaler") is None  # fp32: no loss scale
    state_file.write_text(json.dumps(state))
    resumed = train(
        tiny_experiment(epochs=2, floors="none"), tmp_path / "run", resume=True, progress=False
    )
    assert [h["epoch"] for h in resumed.history] == [1, 2]


@pytest.mark.parametrize(
    ("default", "busy", "requested", "expected"),
    [
        (2, 0.0, 0, 2),  # a quiet machine: torch's default
        (2, 1.0, 0, 1),  # one CPU of two busy elsewhere: one thread, said
        (2, 5.0, 0, 1),  # a crowded machine: at least one
        (4, 1.0, 0, 3),
        (2, 1.0, 2, 2),  # asked for: kept, whatever the load
        (1, 3.0, 0, 1),  # torch already on one thread (torchrun's default)
    ],
)
def test_automatic_threads_leave_out_the_cpus_other_work_keeps_busy(
    monkeypatch: pytest.MonkeyPatch, default: int, busy: float, requested: int, expected: int
) -> None:
    import os

    from attnmatch import devices

    monkeypatch.setattr(devices, "busy_cpus", lambda: busy)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(default)), raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(default)
    try:
        threads, note = devices.cpu_threads(requested)
    finally:
        torch.set_num_threads(before)
    assert threads == expected
    assert (note is not None) == (requested == 0 and expected < default)
    if note is not None:
        assert note.startswith(f"threads: {expected} of {default}") and "train.threads" in note
        shown = float(note.split("(")[1].split(" of ")[0])
        assert shown <= default  # never more CPUs busy than the machine has (a load of 5 on 2)


def test_busy_cpus_reads_the_runnable_threads_less_the_reader() -> None:
    from attnmatch.devices import busy_cpus

    busy = busy_cpus(samples=3, interval=0.0)
    assert busy >= 0.0 and busy < 10_000


def test_a_run_says_when_it_uses_fewer_threads_than_the_cpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from attnmatch import devices

    monkeypatch.setattr(devices, "busy_cpus", lambda: 1.0)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    seen: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    from rich.console import Console

    console = Console(record=True, width=200)
    config = tiny_experiment(epochs=1)
    train(config, tmp_path / "run", progress=False, console=console)
    assert "threads: 1 of 2" in console.export_text()
    assert seen[0] == 1 and seen[-1] == 2  # one thread for the run, the caller's two after
