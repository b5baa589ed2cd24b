"""The memory of a run (`training.memory`).

- Gradient checkpointing under train.max_memory gives the same weights bit for bit (dropout
  on: the recomputed forward draws the same masks), and is said in one line; a limit above
  the estimate is said too, and changes nothing.
- Giving freed memory back after every step changes no weight.
- The process's peak resident memory is recorded in metrics.json and result.json and printed
  with the run's result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import safetensors.torch
from rich.console import Console

from attnmatch.training import ExperimentConfig, memory, train
from tests.hostile._util import run_cli
from tests.tiny_transformer import write_tiny_encoder
from tests.training.test_trainer import FIXTURE, tiny_experiment


@pytest.fixture(scope="module")
def dropout_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT of the transformer tests, with dropout (so that the RNG matters)."""
    words = tuple(
        dict.fromkeys(
            w
            for name in ("train.tsv", "dev.tsv", "test.tsv")
            for line in (FIXTURE / name).read_text().splitlines()[1:]
            for w in " ".join(line.split("\t")[1:3]).split()
        )
    )
    path = write_tiny_encoder(tmp_path_factory.mktemp("enc") / "bert", extra_words=words)
    config = json.loads((path / "config.json").read_text())
    config |= {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    (path / "config.json").write_text(json.dumps(config))
    return path


def _fine_tuning(encoder: Path, **train_overrides: object) -> ExperimentConfig:
    data = tiny_experiment(epochs=1, floors="none", **train_overrides).to_dict()
    data.update(model="minilm_bi_encoder", model_overrides={})
    data["inputs"] = {"kind": "transformer", "source": str(encoder), "trainable": True}
    return ExperimentConfig.from_dict(data)


def _weights(run: Path) -> dict:
    return safetensors.torch.load_file(str(run / "model" / "model.safetensors"))


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


def test_gradient_checkpointing_under_max_memory_gives_the_same_weights(
    dropout_encoder: Path, tmp_path: Path
) -> None:
    plain = Console(record=True, width=400)
    train(_fine_tuning(dropout_encoder), tmp_path / "a", progress=False, console=plain)
    assert "memory: " not in plain.export_text()
    limited = Console(record=True, width=400)
    config = _fine_tuning(dropout_encoder, max_memory=1)
    train(config, tmp_path / "b", progress=False, console=limited)
    text = limited.export_text()
    assert "is over train.max_memory = 1 MB: the encoder's activations are recomputed" in text
    assert _same(_weights(tmp_path / "a"), _weights(tmp_path / "b"))
    roomy = Console(record=True, width=400)
    config = _fine_tuning(dropout_encoder, max_memory=10**6)
    train(config, tmp_path / "c", progress=False, console=roomy)
    assert "under train.max_memory = 1,000,000 MB" in roomy.export_text()
    assert _same(_weights(tmp_path / "a"), _weights(tmp_path / "c"))


def test_giving_freed_memory_back_after_each_step_changes_no_weight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train(tiny_experiment(epochs=2, floors="none"), tmp_path / "a", progress=False)
    calls: list[int] = []
    trim = memory._malloc_trim()
    if trim is None:
        pytest.skip("not glibc: nothing is given back")

    def counted(pad: int) -> int:
        calls.append(pad)
        return int(trim(pad))

    monkeypatch.setattr(memory, "TRIM_ABOVE_MB", -1)  # after every step
    monkeypatch.setattr(memory, "_malloc_trim", lambda: counted)
    train(tiny_experiment(epochs=2, floors="none"), tmp_path / "b", progress=False)
    assert len(calls) >= 12  # 2 epochs of 6 steps, and the evaluations
    assert _same(_weights(tmp_path / "a"), _weights(tmp_path / "b"))


def test_the_peak_is_recorded_and_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.toml"
    config.write_text(
        'model = "mvlstm"\nmodel_overrides = { hidden_size = 8, k = 10 }\n'
        f'[data]\ndataset = "pairs"\ndata_dir = "{FIXTURE}"\n'
        '[inputs]\nkind = "word_vectors"\nvectors = "random"\ndim = 8\n'
        '[train]\nepochs = 1\nbatch_size = 4\nnum_negatives = 2\nfloors = "none"\n'
    )
    outcome = run_cli(["train", config, "-o", tmp_path / "run", "--no-progress"], capsys)
    assert outcome.code == 0, outcome.stderr
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    peak = result["metrics"]["peak_rss_mb"]
    assert peak == result["peak_rss_mb"] and 50 < peak < 100_000
    assert f"peak memory: {peak:,.0f} MB resident" in outcome.stdout
    metrics = json.loads((tmp_path / "run" / "model" / "metrics.json").read_text())
    assert metrics["peak_rss_mb"] == peak
    assert memory.peak_rss_mb() >= peak
