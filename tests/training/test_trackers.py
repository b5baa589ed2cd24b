"""`--log mlflow|wandb`: each epoch's metrics recorded in an MLflow run (a local file store)
and a Weights & Biases run (offline, no network), read back from what they wrote."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from attnmatch.training import train
from tests.training.test_trainer import tiny_experiment


class Stop(Exception):
    pass


def epoch_log(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def mlflow_client(run: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())


def wandb_history(run: Path) -> list[dict[str, Any]]:
    """The history records of the run's offline .wandb file (LevelDB-style log: 32 KiB blocks
    of records with a 7-byte header: CRC, length, type; full = 1, first 2, middle 3, last 4)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (file,) = run.glob("wandb/offline-run-*/run-*.wandb")
    raw = file.read_bytes()
    assert raw[:4] == b":W&B"
    block, pos, part, history = 32768, 7, b"", []
    while pos + 7 <= len(raw):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        part += raw[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(part)
            part = b""
            if record.WhichOneof("record_type") == "history":
                items = record.history.item
                history.append(
                    {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in items}
                )
    return history


def test_mlflow_and_wandb_offline_record_every_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("wandb")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    train(tiny_experiment(epochs=2, floors="none"), run, progress=False, log=["mlflow", "wandb"])
    log = epoch_log(run)
    assert [e["epoch"] for e in log] == [1, 2]

    client = mlflow_client(run, monkeypatch)
    (found,) = client.search_runs([client.get_experiment_by_name("attnmatch").experiment_id])
    assert (found.info.run_name, found.info.status) == ("run", "FINISHED")
    assert found.data.params["train.epochs"] == "2" and found.data.params["model"] == "mvlstm"
    for metric in log[0]["dev"]:
        name = f"dev/{metric}".replace("@", "_at_")
        history = client.get_metric_history(found.info.run_id, name)
        assert [(m.step, m.value) for m in history] == [(e["epoch"], e["dev"][metric]) for e in log]
    losses = client.get_metric_history(found.info.run_id, "train/loss")
    assert [m.value for m in losses] == pytest.approx([e["train_loss"] for e in log])

    history = wandb_history(run)
    assert [h["_step"] for h in history] == [1, 2]
    assert [h["dev/map"] for h in history] == [e["dev"]["map"] for e in log]
    assert [h["train/loss"] for h in history] == pytest.approx([e["train_loss"] for e in log])


def test_a_run_that_fails_is_marked_failed_in_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)

    def stop(entry: dict[str, Any]) -> None:
        raise Stop

    with pytest.raises(Stop):
        train(
            tiny_experiment(epochs=3, floors="none"),
            tmp_path / "r",
            progress=False,
            on_epoch=stop,
            log=["mlflow"],
        )
    client = mlflow_client(tmp_path / "r", monkeypatch)
    (found,) = client.search_runs([client.get_experiment_by_name("attnmatch").experiment_id])
    assert found.info.status == "FAILED"
    assert [m.step for m in client.get_metric_history(found.info.run_id, "dev/map")] == [1]


def test_the_cli_takes_several_trackers_and_names_a_missing_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from attnmatch import cli
    from attnmatch.cli import training

    seen: dict[str, Any] = {}
    monkeypatch.setattr(training, "_train_and_report", lambda *a, **k: seen.update(k))
    argv = ["attnmatch", "train", "--epochs", "1", "-o", str(tmp_path / "r")]
    monkeypatch.setattr(sys, "argv", [*argv, "--log", "mlflow", "--log", "wandb"])
    with pytest.raises(SystemExit) as done:
        cli.main()
    assert done.value.code == 0 and seen["log"] == ("mlflow", "wandb")
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    message = " ".join(capsys.readouterr().err.split())
    assert "pip install 'attnmatch[mlflow]'" in message
