"""Hostile inputs to training runs: run folders held by another process, resumes of damaged or
changed runs, killed folder swaps and their leftovers, OS errors while writing, odd training
options, paths and modes.

Most cases copy one tiny finished run (2 epochs, trained once per module) and run
`attnmatch train` on the copy through the real entry point.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from attnmatch import atomic
from attnmatch.training import train
from attnmatch.training.config import load_experiment
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
SRC = Path(__file__).parents[2] / "src"

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
epochs = 2
batch_size = 4
num_negatives = 2
lr = 0.01
patience = 0
floors = "none"
threads = 1
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def finished(config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 2-epoch run (not to be changed: tests copy it)."""
    path = tmp_path_factory.mktemp("finished") / "run"
    train(load_experiment(config), path, progress=False)
    return path


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished run, to change."""
    path = tmp_path / "run"
    shutil.copytree(finished, path, symlinks=True)
    return path


def train_cli(config: Path, run: Path, capsys: pytest.CaptureFixture[str], *args: str):  # type: ignore[no-untyped-def]
    return run_cli(["train", str(config), "-o", str(run), "--no-progress", *args], capsys)


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}


@pytest.fixture
def holder() -> Iterator[object]:
    """Starts processes that hold a run folder's lock as `attnmatch train` does; kills them
    at the end."""
    procs: list[subprocess.Popen[str]] = []

    def hold(folder: Path) -> subprocess.Popen[str]:
        script = (
            "import fcntl, os, socket, sys, time\n"
            f"fd = os.open({str(folder / '.lock')!r}, os.O_RDWR | os.O_CREAT, 0o666)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.ftruncate(fd, 0)\n"
            "os.write(fd, f'{os.getpid()} {socket.gethostname()}'.encode())\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n"
        )
        folder.mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        return proc

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


def leftovers(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if atomic.is_leftover(p.name)
    )


def exchange_supported(folder: Path) -> bool:
    a, b = folder / "probe-a", folder / "probe-b"
    a.mkdir()
    b.mkdir()
    try:
        return atomic.exchange(a, b)
    finally:
        a.rmdir()
        b.rmdir()


def state_epoch(run: Path) -> int:
    return json.loads((run / "checkpoint" / "trainer_state.json").read_text())["epoch"]


# ------------------------------------------------------------------- c3: one process a folder


@pytest.mark.parametrize("case", ["c3-second-run-while-held"], ids=str)
def test_a_second_run_into_a_held_folder_fails_at_once(
    case: str, config: Path, tmp_path: Path, holder, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "run"
    proc = holder(folder)
    line = assert_clear_error(train_cli(config, folder, capsys), str(folder), f"pid {proc.pid}")
    assert "in use" in line
    assert sorted(p.name for p in folder.iterdir()) == [".lock"]  # nothing written


@pytest.mark.parametrize("case", ["c3-overwrite-while-held"], ids=str)
def test_overwrite_never_deletes_a_held_folder(
    case: str, config: Path, run: Path, holder, capsys: pytest.CaptureFixture[str]
) -> None:
    before = sorted(p.name for p in run.iterdir())
    proc = holder(run)
    outcome = train_cli(config, run, capsys, "--overwrite")
    assert_clear_error(outcome, str(run), f"pid {proc.pid}")
    assert sorted(p.name for p in run.iterdir()) == before
    assert (run / "model" / "model.safetensors").is_file()


@pytest.mark.parametrize("case", ["c3-resume-while-held"], ids=str)
def test_resume_of_a_held_folder_fails_at_once(
    case: str, config: Path, run: Path, holder, capsys: pytest.CaptureFixture[str]
) -> None:
    result = (run / "result.json").read_bytes()
    proc = holder(run)
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert_clear_error(outcome, str(run), f"pid {proc.pid}")
    assert (run / "result.json").read_bytes() == result and state_epoch(run) == 2


@pytest.mark.parametrize("case", ["c3-lock-freed-by-kill"], ids=str)
def test_a_killed_holder_leaves_no_stale_lock(
    case: str, config: Path, run: Path, holder, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = holder(run)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    outcome = train_cli(config, run, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert "reusing result.json" in outcome.stderr


# ------------------------------------------------------------------- c3: what resume reuses


@pytest.mark.parametrize("case", ["c3-resume-model-deleted"], ids=str)
def test_resume_of_a_finished_run_without_its_model(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(run / "model")
    outcome = train_cli(config, run, capsys, "--resume")
    assert_clear_error(outcome, str(run / "model"), "missing", "--overwrite")
    assert "model saved" not in outcome.stdout


@pytest.mark.parametrize("case", ["c3-resume-model-weights-damaged"], ids=str)
def test_resume_of_a_finished_run_with_damaged_weights(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weights = run / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:40])
    outcome = train_cli(config, run, capsys, "--resume")
    assert_clear_error(outcome, str(run / "model"), "damaged")
    assert "model saved" not in outcome.stdout


@pytest.mark.parametrize("case", ["c3-resume-zero-epochs"], ids=str)
def test_resume_of_a_finished_run_for_zero_epochs_is_refused(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = (run / "result.json").read_bytes()
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "0")
    assert_clear_error(outcome, str(run), "0 epochs", "done 2")
    assert (run / "result.json").read_bytes() == result


@pytest.mark.parametrize("case", ["c3-resume-model-changed"], ids=str)
def test_resume_with_another_model_shape_names_the_key_not_the_weights(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "result.json").unlink()
    outcome = train_cli(config, run, capsys, "--resume", "--set", "model_overrides.hidden_size=6")
    assert_clear_error(outcome, "model_overrides.hidden_size", "only train.epochs may change")


@pytest.mark.parametrize("case", ["c3-interrupted-model-deleted"], ids=str)
def test_resume_of_an_interrupted_run_without_its_best_model(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "result.json").unlink()  # as if killed before the end
    shutil.rmtree(run / "model")
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert_clear_error(outcome, str(run / "model"), "best model")
    assert state_epoch(run) == 2


@pytest.mark.parametrize("case", ["c3-resume-fewer-epochs"], ids=str)
def test_resume_for_fewer_epochs_than_done_is_refused(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = (run / "result.json").read_bytes()
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "1")
    assert_clear_error(outcome, str(run), "1 epochs", "done 2")
    assert (run / "result.json").read_bytes() == result  # never a result that contradicts itself


@pytest.mark.parametrize("case", ["c3-resume-more-epochs"], ids=str)
def test_resume_for_more_epochs_writes_a_consistent_result(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert outcome.code == 0, outcome.stderr
    assert "after epoch 2" in outcome.stderr
    result = json.loads((run / "result.json").read_text())
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert result["metrics"]["experiment"]["train"]["epochs"] == 3
    assert [h["epoch"] for h in log] == [1, 2, 3]
    assert 1 <= result["best_epoch"] <= 3
    assert result["best_epoch"] == max(log, key=lambda h: h["dev"]["map"])["epoch"]


@pytest.mark.parametrize("case", ["c3-config-changed-no-checkpoint"], ids=str)
def test_resume_under_another_config_never_replaces_a_finished_run(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(run / "checkpoint")
    result = (run / "result.json").read_bytes()
    outcome = train_cli(config, run, capsys, "--resume", "--set", "train.lr=0.5")
    assert_clear_error(outcome, "train.lr", "cannot resume")
    assert (run / "result.json").read_bytes() == result


@pytest.mark.parametrize(
    ("case", "name", "damage", "needles"),
    [
        pytest.param(
            "c3-result-json-truncated",
            "result.json",
            lambda text: text[: len(text) // 2],
            ("result.json", "line", "invalid JSON"),
            id="c3-result-json-truncated",
        ),
        pytest.param(
            "c3-result-json-not-an-object",
            "result.json",
            lambda text: "[1, 2]\n",
            ("result.json", "not a JSON object"),
            id="c3-result-json-not-an-object",
        ),
        pytest.param(
            "c3-result-json-field-missing",
            "result.json",
            lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "dev"}),
            ("result.json", "'dev'"),
            id="c3-result-json-field-missing",
        ),
        pytest.param(
            "c7-log-jsonl-bad-line",
            "log.jsonl",
            lambda text: text.splitlines()[0] + "\n{not json\n",
            ("log.jsonl", "line 2"),
            id="c7-log-jsonl-bad-line",
        ),
    ],
)
def test_a_damaged_file_of_a_finished_run_is_named(
    case: str,
    name: str,
    damage,
    needles: tuple[str, ...],
    config: Path,
    run: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = run / name
    path.write_text(damage(path.read_text()))
    outcome = train_cli(config, run, capsys, "--resume")
    assert_clear_error(outcome, str(path), *needles)
    assert "model saved" not in outcome.stdout


@pytest.mark.parametrize(
    ("case", "damage", "needles"),
    [
        pytest.param(
            "c3-trainer-state-not-json",
            lambda ckpt: (ckpt / "trainer_state.json").write_text('{"epoch": 2,'),
            ("trainer_state.json", "line 1", "invalid JSON"),
            id="c3-trainer-state-not-json",
        ),
        pytest.param(
            "c3-trainer-state-bad-field",
            lambda ckpt: (ckpt / "trainer_state.json").write_text(
                json.dumps(json.loads((ckpt / "trainer_state.json").read_text()) | {"epoch": "two"})
            ),
            ("trainer_state.json", "'epoch'"),
            id="c3-trainer-state-bad-field",
        ),
        pytest.param(
            "c3-trainer-state-history-short",
            lambda ckpt: (ckpt / "trainer_state.json").write_text(
                json.dumps(json.loads((ckpt / "trainer_state.json").read_text()) | {"history": []})
            ),
            ("trainer_state.json", "history has 0 entries for 2 epochs"),
            id="c3-trainer-state-history-short",
        ),
        pytest.param(
            "c3-optimizer-damaged",
            lambda ckpt: (ckpt / "optimizer.pt").write_bytes(b"PK\x03\x04 not a zip"),
            ("optimizer.pt", "not a readable optimizer state"),
            id="c3-optimizer-damaged",
        ),
        pytest.param(
            "c3-checkpoint-weights-missing",
            lambda ckpt: (ckpt / "model" / "model.safetensors").unlink(),
            ("model.safetensors", "missing"),
            id="c3-checkpoint-weights-missing",
        ),
        pytest.param(
            "c3-checkpoint-weights-damaged",
            lambda ckpt: (ckpt / "model" / "model.safetensors").write_bytes(b"\x08" + b"\0" * 20),
            ("model.safetensors", "cannot resume"),
            id="c3-checkpoint-weights-damaged",
        ),
    ],
)
def test_a_damaged_checkpoint_is_named(
    case: str,
    damage,
    needles: tuple[str, ...],
    config: Path,
    run: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run / "result.json").unlink()  # an interrupted run: resumed from its checkpoint
    damage(run / "checkpoint")
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert_clear_error(outcome, str(run / "checkpoint"), *needles)
    assert not (run / "result.json").exists()


@pytest.mark.parametrize("case", ["c3-checkpoint-of-another-model"], ids=str)
def test_a_checkpoint_of_another_model_is_refused(
    case: str, config: Path, run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = load_experiment(config).with_overrides(
        {"model_overrides": {"hidden_size": 6}, "train": {"epochs": 1}}
    )
    train(other, tmp_path / "other", progress=False)
    (run / "result.json").unlink()
    shutil.rmtree(run / "checkpoint" / "model")
    shutil.copytree(tmp_path / "other" / "checkpoint" / "model", run / "checkpoint" / "model")
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert_clear_error(outcome, str(run / "checkpoint"), "another model", "--overwrite")


@pytest.mark.parametrize("case", ["c3-log-completed-at-finish"], ids=str)
def test_a_kill_between_checkpoint_and_log_still_ends_in_a_complete_log(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = (run / "log.jsonl").read_text().splitlines()
    (run / "log.jsonl").write_text(log[0] + "\n")  # killed after the last checkpoint
    (run / "result.json").unlink()
    outcome = train_cli(config, run, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert (run / "log.jsonl").read_text().splitlines() == log


# ------------------------------------------------------------------- c3: swaps and leftovers

_KILL_DRIVER = """
import os, sys
from pathlib import Path
from attnmatch import atomic
step = sys.argv[2]
if step == "between-renames":
    atomic.exchange = lambda a, b: False  # the two-step swap of other systems
    real = os.replace
    def replace(src, dst):
        real(src, dst)
        os._exit(9)  # killed after moving the old folder aside, before the new one is in
    os.replace = replace
else:  # "deleting-old": killed after the exchange, while deleting the old copy
    atomic._remove = lambda path: os._exit(9)
with atomic.atomic_directory(Path(sys.argv[1])) as tmp:
    (tmp / "trainer_state.json").write_text("{}")
"""


def kill_during_swap(folder: Path, step: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_DRIVER, str(folder), step], env=env(), check=False
    )
    assert proc.returncode == 9


@pytest.mark.parametrize("case", ["c3-swap-killed-between-renames"], ids=str)
def test_a_swap_killed_between_its_two_renames_is_recovered(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = (run / "log.jsonl").read_text().splitlines()
    (run / "result.json").unlink()
    kill_during_swap(run / "checkpoint", "between-renames")
    assert not (run / "checkpoint").exists() and leftovers(run)
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert outcome.code == 0, outcome.stderr
    assert "after epoch 2" in outcome.stderr  # not silently from epoch 1
    assert (run / "log.jsonl").read_text().splitlines()[:2] == log
    assert state_epoch(run) == 3 and leftovers(run) == []


@pytest.mark.parametrize("case", ["c3-killed-while-deleting-old-copy"], ids=str)
def test_a_swap_killed_while_deleting_the_old_copy_keeps_the_new_folder(
    case: str, tmp_path: Path
) -> None:
    if not exchange_supported(tmp_path):
        pytest.skip("no atomic exchange here")
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    (folder / "old.txt").write_text("old")
    kill_during_swap(folder, "deleting-old")
    assert (folder / "trainer_state.json").is_file()
    assert len(leftovers(tmp_path)) == 1  # the old copy, killed while being deleted
    atomic.recover(folder)
    assert leftovers(tmp_path) == []
    assert (folder / "trainer_state.json").is_file() and not (folder / "old.txt").exists()


@pytest.mark.parametrize("case", ["c3-swap-has-no-window"], ids=str)
def test_the_folder_exists_at_every_step_of_a_swap(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not exchange_supported(tmp_path):
        pytest.skip("no atomic exchange here")
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    seen: list[bool] = []
    for name in ("replace", "rename"):
        real = getattr(os, name)

        def spy(src, dst, *args, _real=real, **kwargs):  # type: ignore[no-untyped-def]
            _real(src, dst, *args, **kwargs)
            seen.append(folder.exists())

        monkeypatch.setattr(os, name, spy)
    for i in range(3):
        with atomic.atomic_directory(folder) as tmp:
            (tmp / "n").write_text(str(i))
    monkeypatch.undo()
    assert all(seen) and (folder / "n").read_text() == "2" and leftovers(tmp_path) == []


@pytest.mark.parametrize("case", ["c3-leftovers-swept-on-start"], ids=str)
def test_leftovers_of_killed_writes_are_swept_when_a_run_starts(
    case: str, config: Path, run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / ".checkpoint.999999-0a1b.tmp").mkdir()  # a temporary checkpoint, half written
    (run / ".checkpoint.999999-0a1b.tmp" / "optimizer.pt").write_bytes(b"half")
    (run / ".model.old-999999").mkdir()  # an old model set aside (model/ exists)
    (run / ".result.json.abc_12xy.tmp").write_text("{")  # an earlier version's temporary name
    (run / "model" / ".metrics.json.999999-77.tmp").write_text("{")
    (run / "notes.tmp").write_text("mine")  # not a leftover: kept
    outcome = train_cli(config, run, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert leftovers(run) == [] and (run / "notes.tmp").read_text() == "mine"


@pytest.mark.parametrize("case", ["c3-recover-spares-live-writers"], ids=str)
def test_recover_removes_only_leftovers_of_processes_that_are_gone(
    case: str, tmp_path: Path
) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        (tmp_path / f".out.tsv.{live.pid}-aa.tmp").write_text("being written")
        (tmp_path / f".out.tsv.{dead.pid}-bb.tmp").write_text("left by a killed write")
        (tmp_path / f".other.tsv.{dead.pid}-cc.tmp").write_text("another target's")
        atomic.write_text_atomic(tmp_path / "out.tsv", "done\n")
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            f".other.tsv.{dead.pid}-cc.tmp",
            f".out.tsv.{live.pid}-aa.tmp",
            "out.tsv",
        ]
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------- c2: OS errors


@pytest.mark.parametrize("case", ["c2-disk-full-during-checkpoint"], ids=str)
def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(
    case: str,
    config: Path,
    run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (run / "result.json").unlink()
    before = (run / "checkpoint" / "trainer_state.json").read_bytes()
    real = Path.write_bytes

    def full(self: Path, data: bytes) -> int:
        if self.name == "optimizer.pt":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    outcome = train_cli(config, run, capsys, "--resume", "--epochs", "3")
    assert_clear_error(outcome, str(run / "checkpoint"), "no space left", "free some space")
    assert (run / "checkpoint" / "trainer_state.json").read_bytes() == before
    assert leftovers(run) == []


@pytest.mark.parametrize("case", ["c2-file-size-limit"], ids=str)
def test_a_file_size_limit_is_one_line_and_leaves_nothing_behind(
    case: str, config: Path, run: Path
) -> None:
    (run / "result.json").unlink()
    before = (run / "checkpoint" / "trainer_state.json").read_bytes()

    limited = (
        "import resource, runpy\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "runpy.run_module('attnmatch', run_name='__main__')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", limited, "train", str(config), "-o", str(run)]
        + ["--no-progress", "--resume", "--epochs", "3"],
        env=env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "File too large" in errors[0] and str(run) in errors[0], errors
    assert (run / "checkpoint" / "trainer_state.json").read_bytes() == before
    assert leftovers(run) == []


@pytest.mark.parametrize("case", ["c2-read-only-output"], ids=str)
def test_a_read_only_output_folder(
    case: str,
    config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    real = os.open

    def read_only(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).startswith(str(folder)) and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    outcome = train_cli(config, folder, capsys)
    assert_clear_error(outcome, str(folder), "read-only file system", "write elsewhere")


@pytest.mark.parametrize("case", ["c2-output-under-a-file"], ids=str)
def test_an_output_folder_under_a_file(case: str, config: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OSError) as info:  # the Python API (the command line checks --output)
        train(load_experiment(config), tmp_path / "notes.txt" / "run", progress=False)
    assert_clear_exception(info.value, f"cannot write {tmp_path / 'notes.txt' / 'run'}")
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("case", ["c2-output-is-a-file"], ids=str)
def test_an_output_folder_that_is_a_file(
    case: str, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "run").write_text("mine")
    outcome = train_cli(config, tmp_path / "run", capsys, "--overwrite")
    assert_clear_error(outcome, str(tmp_path / "run"), "is a file")
    assert (tmp_path / "run").read_text() == "mine"


@pytest.mark.parametrize("case", ["c2-atomic-write-disk-full"], ids=str)
def test_a_failed_atomic_write_keeps_the_file_and_names_it(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "result.json"
    path.write_text("before")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as info:
        atomic.write_text_atomic(path, "after")
    assert info.value.errno == errno.ENOSPC
    assert_clear_exception(info.value, f"cannot write {path}", "no space left")
    assert path.read_text() == "before" and leftovers(tmp_path) == []


# ------------------------------------------------------------------- c4: odd training options


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        pytest.param("train.threads=-1", "threads must be >= 0", id="c4-threads-negative"),
        pytest.param("train.patience=-2", "patience must be >= 0", id="c4-patience-negative"),
        pytest.param("train.bucket_pool=-1", "bucket_pool", id="c4-bucket-pool-negative"),
        pytest.param("train.seed=-1", "seed must be in", id="c4-seed-negative"),
        pytest.param("train.seed=18446744073709551616", "seed", id="c4-seed-huge"),
        pytest.param("train.grad_clip=-1.0", "grad_clip", id="c4-grad-clip-negative"),
        pytest.param("train.margin=-0.5", "margin", id="c4-margin-negative"),
        pytest.param("train.weight_decay=-0.1", "weight_decay", id="c4-weight-decay-negative"),
    ],
)
def test_odd_training_options_are_refused_before_a_run_starts(
    setting: str, needle: str, config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = train_cli(config, tmp_path / "run", capsys, "--set", setting)
    assert_clear_error(outcome, needle)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------- c5: paths


@pytest.mark.parametrize("case", ["c5-result-json-points-elsewhere"], ids=str)
def test_a_reused_result_names_the_model_in_its_own_folder(
    case: str, config: Path, run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    data = json.loads((run / "result.json").read_text())
    data["model_dir"] = str(elsewhere)  # e.g. the folder was moved, or the file edited
    (run / "result.json").write_text(json.dumps(data))
    outcome = train_cli(config, run, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert str(run / "model") in " ".join(outcome.stdout.split())
    assert str(elsewhere) not in outcome.stdout


@pytest.mark.parametrize("case", ["c5-leftover-symlink-not-followed"], ids=str)
def test_sweeping_a_leftover_symlink_never_touches_its_target(
    case: str, config: Path, run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (run / ".checkpoint.999999-ab.tmp").symlink_to(outside, target_is_directory=True)
    outcome = train_cli(config, run, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert not os.path.lexists(run / ".checkpoint.999999-ab.tmp")
    assert (outside / "keep.txt").read_text() == "mine"


@pytest.mark.parametrize("case", ["c5-overwrite-symlink-inside"], ids=str)
def test_overwrite_deletes_a_symlink_not_what_it_points_to(
    case: str, config: Path, run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine")
    (run / "data").symlink_to(outside, target_is_directory=True)
    outcome = train_cli(config, run, capsys, "--overwrite", "--epochs", "1")
    assert outcome.code == 0, outcome.stderr
    assert not os.path.lexists(run / "data") and (outside / "keep.txt").read_text() == "mine"


# ------------------------------------------------------------------- c1: markup in paths


@pytest.mark.parametrize("case", ["c1-run-folder-name-markup"], ids=str)
def test_a_run_folder_name_is_printed_as_it_is(
    case: str, config: Path, finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "[bold red]run"
    shutil.copytree(finished, folder)
    outcome = train_cli(config, folder, capsys, "--resume")
    assert outcome.code == 0, outcome.stderr
    assert f"{folder}: finished earlier" in " ".join(outcome.stderr.split())


# ------------------------------------------------------------------- c8: modes and settings


def modes(folder: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {"dirs": {stat.S_IMODE(folder.stat().st_mode)}, "files": set()}
    for path in folder.rglob("*"):
        out["dirs" if path.is_dir() else "files"].add(stat.S_IMODE(path.stat().st_mode))
    return out


@pytest.mark.parametrize(
    ("umask", "file_mode", "dir_mode"),
    [
        pytest.param(0o022, 0o644, 0o755, id="c8-umask-022"),
        pytest.param(0o077, 0o600, 0o700, id="c8-umask-077"),
    ],
)
def test_a_run_honours_the_umask(
    umask: int,
    file_mode: int,
    dir_mode: int,
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = os.umask(umask)
    try:
        outcome = train_cli(config, tmp_path / "run", capsys, "--epochs", "1")
    finally:
        os.umask(before)
    assert outcome.code == 0, outcome.stderr
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()
    assert modes(tmp_path / "run") == {"dirs": {dir_mode}, "files": {file_mode}}


@pytest.mark.parametrize("case", ["c8-replaced-file-keeps-its-mode"], ids=str)
def test_a_replaced_file_keeps_its_mode(case: str, tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text("{}")
    path.chmod(0o640)
    before = os.umask(0o022)
    try:
        atomic.write_text_atomic(path, '{"a": 1}')
        atomic.write_text_atomic(tmp_path / "new.json", "{}")
    finally:
        os.umask(before)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # as open() keeps it
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


@pytest.mark.parametrize("case", ["c8-torch-settings-after-a-failed-run"], ids=str)
def test_torch_settings_come_back_after_a_failed_run(case: str, config: Path, run: Path) -> None:
    (run / "result.json").unlink()
    (run / "checkpoint" / "optimizer.pt").write_bytes(b"damaged")
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="optimizer.pt"):
            train(
                load_experiment(config).with_overrides({"train": {"epochs": 3}}),
                run,
                resume=True,
                progress=False,
            )
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
