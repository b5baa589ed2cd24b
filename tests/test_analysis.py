"""Attention-by-position analysis: hand-computed binning, a saved model end to end, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from attnmatch.cli import app
from attnmatch.data.collate import collate
from attnmatch.data.datasets import load_split
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import Vocab
from attnmatch.matcher import Matcher
from attnmatch.research.analysis import (
    attention_position,
    attention_position_many,
    bin_positions,
    plot_attention_position,
)
from attnmatch.tasks import Task

FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"
runner = CliRunner()


# --- binning, by hand --------------------------------------------------------------------------

# bins = 4. Text A (m=3): positions 1/6, 1/2, 5/6 -> bins 0, 2, 3; mean 2 -> relative .5, .5, 2.
# Text B (m=2): positions 1/4, 3/4 -> bins 1, 3; mean 2 -> relative 1.5, .5.
# Text C (m=4, all zero): bins 0, 1, 2, 3; counts for raw weights and tokens, not for relative.
# The empty text counts for nothing.
TEXTS = [np.array([1.0, 1.0, 4.0]), np.array([3.0, 1.0]), np.zeros(4), np.array([])]
EXPECTED = {
    "bins": 4,
    "num_texts": 3,
    "num_zero_weight_texts": 1,
    "num_tokens": 9,
    "bin_edges": [0.0, 0.25, 0.5, 0.75, 1.0],
    "tokens_per_bin": [2, 2, 2, 3],
    "mean_weight": [0.5, 1.5, 0.5, 5 / 3],
    "mean_relative_weight": [0.5, 1.5, 0.5, 1.25],
    "first_last_ratio": 2.5,
}


def _assert_matches(result: dict, expected: dict) -> None:
    assert result.keys() == expected.keys()
    for key, value in expected.items():
        assert result[key] == pytest.approx(value, abs=1e-12), key


def test_bin_positions_by_hand() -> None:
    _assert_matches(bin_positions(TEXTS, bins=4), EXPECTED)


def test_bin_positions_padded_with_mask_equals_list() -> None:
    padded = np.array(
        [[1.0, 1.0, 4.0, 9.0], [3.0, 1.0, 9.0, 9.0], [0.0, 0.0, 0.0, 0.0], [9.0, 9.0, 9.0, 9.0]]
    )  # 9 on padding: the mask must hide it
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], dtype=bool)
    _assert_matches(bin_positions(padded, bins=4, mask=mask), EXPECTED)


def test_bin_positions_exact_bin_boundaries_and_empty_bins() -> None:
    # m=5, 10 bins: positions .1 .3 .5 .7 .9 sit on bin edges and fall in bins 1, 3, 5, 7, 9.
    result = bin_positions([np.arange(1.0, 6.0)], bins=10)
    assert result["tokens_per_bin"] == [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
    assert result["mean_weight"] == [None, 1.0, None, 2.0, None, 3.0, None, 4.0, None, 5.0]
    assert result["mean_relative_weight"][1::2] == pytest.approx([1 / 3, 2 / 3, 1, 4 / 3, 5 / 3])
    assert result["first_last_ratio"] is None  # the first bin is empty
    json.dumps(result, allow_nan=False)  # JSON-able: None, never NaN


def test_bin_positions_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="bins"):
        bin_positions(TEXTS, bins=0)
    with pytest.raises(ValueError, match="NaN"):
        bin_positions([np.array([0.5, np.nan])])
    with pytest.raises(ValueError, match="mask"):
        bin_positions(TEXTS, mask=np.ones((4, 4), dtype=bool))


# --- a saved model, end to end -----------------------------------------------------------------


def _save_tiny(path: Path, name: str) -> Path:
    """An untrained `name` on random word vectors (vocabulary: the fixture's training words)."""
    tokenizer = Tokenizer()
    examples = load_split("pairs", "train", data_dir=FIXTURE).examples
    texts = [t for ex in examples for t in (ex.left, ex.right)]
    overrides = {"hidden_size": 6, "k": 5} if name.startswith("amvlstm") else {}
    matcher = Matcher.untrained(
        name,
        inputs={"kind": "word_vectors", "vectors": "random", "dim": 8},
        task=Task(kind="ranking"),
        overrides=overrides,
        train_texts=texts,
        seed=0,
    )
    assert matcher.inputs.vocab == Vocab.build(tokenizer.tokenize(t) for t in texts)
    return matcher.save(path)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save_tiny(tmp_path_factory.mktemp("analysis") / "amvlstm_a", "amvlstm_a")


def test_attention_position_end_to_end(model_dir: Path) -> None:
    result = attention_position(
        model_dir, "pairs:test", key="right_gate", bins=5, data_dir=FIXTURE, batch_size=7
    )
    examples = load_split("pairs", "test", data_dir=FIXTURE).examples
    tokenizer = Tokenizer()
    right_tokens = sum(len(tokenizer.tokenize(ex.right)) for ex in examples)
    assert result["model_type"] == "mvlstm" and result["config"]["gate"] == "right"
    assert (result["dataset"], result["split"], result["key"]) == ("pairs", "test", "right_gate")
    assert result["num_texts"] == len(examples)
    assert sum(result["tokens_per_bin"]) == result["num_tokens"] == right_tokens
    for field in ("mean_weight", "mean_relative_weight", "tokens_per_bin"):
        assert len(result[field]) == 5
    assert result["bin_edges"] == pytest.approx([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    json.dumps(result, allow_nan=False)

    # Bucketed, padded batches give what one forward pass over every pair gives.
    loaded = Matcher.load(model_dir)
    data = loaded.encode(examples)
    batch = collate(data, np.arange(len(data)))
    with torch.inference_mode():
        gate = loaded.model.attention(batch)["right_gate"].numpy()
    direct = bin_positions(gate, bins=5, mask=batch.right_mask.numpy())
    for field in ("mean_weight", "mean_relative_weight"):
        assert result[field] == pytest.approx(direct[field], abs=1e-5)
    assert result["tokens_per_bin"] == direct["tokens_per_bin"]
    # A softmax gate: the relative weights over a text average to 1.
    rel = np.array(result["mean_relative_weight"])
    assert np.dot(rel, result["tokens_per_bin"]) / right_tokens == pytest.approx(1.0, abs=1e-5)


def test_attention_position_max_pairs_and_many(model_dir: Path) -> None:
    results = attention_position_many(
        [model_dir, model_dir],
        "pairs",  # the split defaults to test
        labels=["one", "two"],
        key="right_gate",
        max_pairs=3,
        data_dir=FIXTURE,
    )
    assert [r["label"] for r in results] == ["one", "two"]
    assert all(r["num_texts"] == 3 and r["split"] == "test" for r in results)
    assert results[0]["mean_relative_weight"] == results[1]["mean_relative_weight"]
    with pytest.raises(ValueError, match="1 labels for 2"):
        attention_position_many([model_dir, model_dir], "pairs:test", labels=["x"])


def test_missing_key_is_a_clear_error(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        attention_position(model_dir, "pairs:test", data_dir=FIXTURE)
    message = str(info.value)
    assert str(model_dir) in message and "'right_attention'" in message
    assert "right_gate" in message  # the keys the model does return
    no_attention = _save_tiny(tmp_path / "cbow", "cbow_mlp")
    with pytest.raises(ValueError, match=r"cbow.*no attention\(\) method.*right_gate"):
        attention_position(no_attention, "pairs:test", key="right_gate", data_dir=FIXTURE)


# --- the plot and the command line -------------------------------------------------------------


def test_plot_without_matplotlib_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # None in sys.modules: import fails
    result = bin_positions(TEXTS, bins=4) | {"dataset": "d", "split": "s", "key": "k"}
    with pytest.raises(ImportError, match=r"pip install 'attnmatch\[plot\]'"):
        plot_attention_position([result], ["m"], tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    a = bin_positions(TEXTS, bins=4) | {"dataset": "d", "split": "s", "key": "k"}
    b = bin_positions([np.arange(1.0, 6.0)], bins=4) | {"dataset": "d", "split": "s", "key": "k"}
    path = plot_attention_position([a, b], ["a", "b"], tmp_path / "sub" / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in path.parent.iterdir()] == ["p.png"]  # no temporary file left
    with pytest.raises(ValueError, match="labels"):
        plot_attention_position([a, b], ["a"], tmp_path / "q.png")


def _cli(model_dir: Path, prefix: Path, *extra: str) -> list[str]:
    return [
        "analyze",
        "attention-position",
        str(model_dir),
        str(model_dir),
        "--label",
        "A",
        "--label",
        "B",
        "--dataset",
        "pairs:test",
        "--data-dir",
        str(FIXTURE),
        "--key",
        "right_gate",
        "--bins",
        "4",
        "--output",
        str(prefix),
        *extra,
    ]


def test_cli_writes_json_and_png(model_dir: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, _cli(model_dir, tmp_path / "out" / "attn"))
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "out" / "attn.json").read_text())
    assert [m["label"] for m in saved["models"]] == ["A", "B"]
    assert all(len(m["mean_relative_weight"]) == 4 for m in saved["models"])
    first = saved["models"][0]["mean_relative_weight"][0]
    assert f"{first:.2f}" in result.output  # the table shows relative weights, 2 decimals
    pytest.importorskip("matplotlib")
    assert (tmp_path / "out" / "attn.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_no_plot_and_missing_matplotlib(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = runner.invoke(app, _cli(model_dir, tmp_path / "a", "--no-plot"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.json").is_file() and not (tmp_path / "a.png").exists()
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    result = runner.invoke(app, _cli(model_dir, tmp_path / "b"))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b.json").is_file() and not (tmp_path / "b.png").exists()
    assert "warning" in result.output and "attnmatch[plot]" in result.output


def test_cli_dataset_options(model_dir: Path, tmp_path: Path) -> None:
    """--dataset-option KEY=VALUE reaches the dataset loader (the old -o is --output now)."""
    plain = runner.invoke(app, _cli(model_dir, tmp_path / "plain", "--no-plot"))
    assert plain.exit_code == 0, plain.output
    args = _cli(model_dir, tmp_path / "opt", "--no-plot", "--dataset-option", "task=ranking")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "opt.json").read_text()) == json.loads(
        (tmp_path / "plain.json").read_text()
    )
    args = _cli(model_dir, tmp_path / "bad", "--no-plot", "--dataset-option", "nosuch=1")
    result = runner.invoke(app, args)
    assert result.exit_code != 0 and "unknown option(s) ['nosuch']" in str(result.exception)
    assert not (tmp_path / "bad.json").exists()


def test_cli_missing_key_is_one_clear_line(model_dir: Path, tmp_path: Path) -> None:
    args = _cli(model_dir, tmp_path / "x")
    args[args.index("right_gate")] = "right_attention"
    r = subprocess.run(
        [sys.executable, "-m", "attnmatch", *args], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "error:" in r.stderr
    assert "right_attention" in r.stderr and "right_gate" in r.stderr
    assert not (tmp_path / "x.json").exists()
