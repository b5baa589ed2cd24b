"""What a run says before its first epoch: each step of building the experiment as it starts
(reading the data, its notes once, building the model), then, without a progress bar drawn, an
epoch's steps in plain lines; and the scoring and floors at its end."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from attnmatch.training import train
from tests.training.test_trainer import FIXTURE, tiny_experiment


def test_a_run_says_each_step_before_its_first_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmatch.training.loop import StepLines

    monkeypatch.setattr(StepLines, "EVERY_S", 0.0)
    console = Console(record=True, width=400)
    train(tiny_experiment(epochs=1, floors="none"), tmp_path / "run", console=console)
    text = console.export_text()  # progress on, but no terminal: no bar is drawn
    steps = [
        f"data: reading pairs ({FIXTURE}) ...",
        "task: ranking",
        "model: building mvlstm on word_vectors inputs for ",
        "budget: 1 epochs x 6 optimiser steps",
        "epoch 1/1: 1/6 steps, loss ",
        "epoch   1  loss ",
        "scoring dev (40 pairs) and test (40 pairs) with the selected model ...",
    ]
    where = [text.index(step) for step in steps]
    assert where == sorted(where), text
    assert text.count("task: ranking") == 1  # said once, as soon as the data is read
    assert "6/6 steps" not in text  # the epoch's own line says the end
    floors = Console(record=True, width=400)
    config = tiny_experiment(epochs=1, floors="lexical")
    train(config, tmp_path / "floors", progress=False, console=floors)
    assert "floors (dev): scoring 40 pairs (random, word overlap, BM25) ..." in floors.export_text()
