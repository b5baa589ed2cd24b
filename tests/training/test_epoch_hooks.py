"""The fit loop's `on_epoch` callback (what `attnmatch tune` prunes with) and `--log
tensorboard`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from attnmatch.training import train
from tests.training.test_trainer import tiny_experiment


class Stop(Exception):
    pass


def test_on_epoch_sees_each_logged_epoch_and_may_stop_the_run(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def on_epoch(entry: dict[str, Any]) -> None:
        seen.append(entry)
        if entry["epoch"] == 2:
            raise Stop

    with pytest.raises(Stop):
        train(tiny_experiment(epochs=4), tmp_path / "run", progress=False, on_epoch=on_epoch)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in seen] == [1, 2] and seen == log  # checkpointed before the call
    assert all(e["dev"] is not None and "map" in e["dev"] for e in seen)
    resumed = train(tiny_experiment(epochs=4), tmp_path / "run", resume=True, progress=False)
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3, 4]


def test_tensorboard_writes_scalars_per_epoch(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(tiny_experiment(epochs=2), tmp_path / "run", progress=False, tensorboard=True)
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/loss", "dev/map", "dev/mrr"} <= set(tags)
    assert [s.step for s in events.Scalars("dev/map")] == [1, 2]
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [s.value for s in events.Scalars("train/loss")] == pytest.approx(
        [e["train_loss"] for e in log]
    )


def test_missing_tensorboard_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from attnmatch import cli

    monkeypatch.setitem(sys.modules, "tensorboard", None)
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    argv = [
        "attnmatch",
        "train",
        "--epochs",
        "1",
        "-o",
        str(tmp_path / "r"),
        "--log",
        "tensorboard",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert message.startswith("error:") and "pip install 'attnmatch[tensorboard]'" in message
    assert not (tmp_path / "r").exists()
