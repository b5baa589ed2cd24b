"""The model card (README.md) of every model directory: its fields checked against
metrics.json, its YAML header read by the Hugging Face Hub's own parser (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnmatch import Matcher
from attnmatch.model_card import render
from attnmatch.tasks import RankingTask
from attnmatch.training import train
from tests.training.test_trainer import tiny_experiment

hub = pytest.importorskip("huggingface_hub")


def card_of(model_dir: Path) -> object:
    return hub.ModelCard.load(model_dir / "README.md")


def test_a_trained_model_has_a_card_that_agrees_with_its_metrics(tmp_path: Path) -> None:
    result = train(tiny_experiment(epochs=2, floors="lexical"), tmp_path / "run", progress=False)
    metrics = json.loads((result.model_dir / "metrics.json").read_text())
    card = card_of(result.model_dir)
    data = card.data  # type: ignore[attr-defined]
    assert (data.library_name, data.license, data.pipeline_tag) == (
        "attnmatch",
        "unknown",  # your own pairs: the licence is yours, not recorded
        "text-ranking",
    )
    found = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    expected = {
        (split, name): value
        for split in ("dev", "test")
        for name, value in metrics[split].items()
        if not name.startswith("num_")
    }
    assert found == expected and len(found) >= 8
    assert {r.task_type for r in data.eval_results} == {"text-ranking"}
    text = card.text  # type: ignore[attr-defined]
    for split, info in metrics["data"].items():
        assert info["pairs"] > 0
        assert f"- {split}: {info['pairs']} pairs in {info['groups']} groups" in text
        assert f"sha256 `{info['sha256']}`" in text
    assert f"seed {metrics['experiment']['train']['seed']}" in text
    assert f"best epoch (selected on dev): {metrics['best_epoch']}" in text
    bm25 = metrics["floors"]["test"]["bm25"]["map"]
    dev_map = metrics["dev"]["map"]
    assert f"| map | {dev_map:.4f} | {metrics['test']['map']:.4f} |" in text
    assert f"/ {bm25:.4f} |" in text
    speed = metrics["speed"]
    assert speed["pairs"] == metrics["data"]["test"]["pairs"] and speed["pairs_per_s"] > 0
    assert f"{speed['pairs_per_s']} pairs/s on cpu with {speed['threads']} thread(s)" in text
    assert Matcher.load(result.model_dir).metrics == metrics  # the card is not read back


def test_matcher_save_writes_a_card_without_guessing_what_it_does_not_know(
    tmp_path: Path,
) -> None:
    matcher = Matcher.untrained(
        "mvlstm",
        inputs={"kind": "word_vectors", "vectors": "random", "dim": 8},
        task=RankingTask(),
        overrides={"hidden_size": 8, "k": 5},
        train_texts=["a question", "an answer"],
    )
    path = matcher.save(tmp_path / "m")
    card = card_of(path)
    assert card.data.eval_results is None  # type: ignore[attr-defined]
    text = card.text  # type: ignore[attr-defined]
    assert "No evaluation recorded." in text and "Not recorded" in text
    assert "Wan et al. AAAI 2016" in text  # the paper, from the model's registration
    Matcher.load(path)


def test_a_metric_that_is_not_a_number_is_left_out_of_the_header() -> None:
    header = {"model_type": "mvlstm", "task": {"kind": "regression"}}
    metrics = {"dataset": "sick", "dev": {"pearson": None, "spearman": 0.5}}
    text = render(header, metrics)
    card = hub.ModelCard(text)
    assert [(r.metric_type, r.metric_value) for r in card.data.eval_results] == [("spearman", 0.5)]
    assert card.data.datasets == ["sick"] and card.data.license == "other"
    assert "| pearson | - | - |" in text
