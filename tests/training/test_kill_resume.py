"""kill -9 in the middle of a run, then `--resume`: the same run as an uninterrupted one, to
the last bit of every weight.

`attnmatch train` runs in a subprocess on a tiny experiment; the test watches its run folder
and sends SIGKILL while a checkpoint is being written (a `.checkpoint.*.tmp` folder exists),
or, should it never catch one, between two checkpoints. A run that ends before it could be
killed is started again (never more than a few times).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors import safe_open

from attnmatch.training import train
from attnmatch.training.config import load_experiment

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
SRC = Path(__file__).parents[2] / "src"
EPOCHS = 6

CONFIG = f"""
model = "mvlstm"
[model_overrides]
hidden_size = 8
k = 10
[data]
dataset = "pairs"
data_dir = "{FIXTURE}"
[inputs]
kind = "word_vectors"
vectors = "random"
dim = 8
[train]
epochs = {EPOCHS}
batch_size = 4
num_negatives = 2
lr = 0.01
patience = 0
floors = "none"
threads = 1
"""


def attnmatch(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "attnmatch", *args, "--no-progress"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def checkpoint_epoch(run: Path) -> int:
    try:
        return json.loads((run / "checkpoint" / "trainer_state.json").read_text())["epoch"]
    except (OSError, ValueError):  # none yet (or being swapped in)
        return 0


def kill_while_checkpointing(proc: subprocess.Popen[bytes], run: Path) -> str | None:
    """SIGKILLs `proc` while it writes a checkpoint after the first one, else once it has
    written its third; returns where it was killed, or None when the run ended first."""
    while proc.poll() is None:
        names = os.listdir(run) if run.is_dir() else []
        writing = any(n.startswith(".checkpoint.") and n.endswith(".tmp") for n in names)
        if "checkpoint" in names and (writing or checkpoint_epoch(run) >= 3):
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return "while writing a checkpoint" if writing else "between checkpoints"
        time.sleep(0.001)
    return None


def weights(path: Path) -> tuple[dict[str, str], dict[str, bytes]]:
    """A safetensors file's metadata and every tensor's bytes. (The file's bytes are not
    compared: safetensors writes its metadata map in an order that varies between
    processes.)"""
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        tensors = {key: f.get_tensor(key).numpy().tobytes() for key in f.keys()}  # noqa: SIM118
    return metadata, tensors


def test_kill_9_then_resume_is_the_uninterrupted_run(tmp_path: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG)
    for attempt in range(4):
        run = tmp_path / f"killed-{attempt}"
        proc = attnmatch("train", str(config), "-o", str(run))
        if (where := kill_while_checkpointing(proc, run)) is not None:
            break
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    else:
        pytest.fail("the run always ended before it could be killed")
    assert not (run / "result.json").exists()
    done = checkpoint_epoch(run)
    assert 1 <= done < EPOCHS, where

    resumed = attnmatch("train", str(config), "-o", str(run), "--resume")
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr.decode()
    assert f"after epoch {done}" in stderr.decode()

    reference = train(load_experiment(config), tmp_path / "uninterrupted", progress=False)
    got = json.loads((run / "result.json").read_text())
    assert got["best_epoch"] == reference.best_epoch
    assert got["dev"] == reference.dev and got["test"] == reference.test
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [(h["epoch"], h["train_loss"], h["dev"]) for h in log] == [
        (h["epoch"], h["train_loss"], h["dev"]) for h in reference.history
    ]
    for folder in ("model", "checkpoint/model"):
        a = weights(run / folder / "model.safetensors")
        b = weights(reference.output_dir / folder / "model.safetensors")
        assert a == b, f"{folder}/model.safetensors differs (killed {where})"
    print(f"killed {where}, after epoch {done}")
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp") or ".old-" in p.name]
