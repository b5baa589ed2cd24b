"""Hostile bulk scoring: `attnmatch score --workers N` and `--shard RANK/WORLD`
(`attnmatch.bulk`; docs/robustness.md, "Files read back").

- c3: a worker killed with SIGKILL (as kill -9 or the out-of-memory killer does) ends the
  command within 10 s, with one line naming the worker, its pid and the lines it held, and
  exit status 2; the same command run again finishes (a shard resumes at its first unwritten
  chunk) with the bytes one process writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from attnmatch import bulk
from attnmatch.matcher import Matcher
from attnmatch.scoring import PairsFile, write_scored
from attnmatch.tasks import Task
from tests.hostile._util import Outcome, assert_clear_error, run_cli
from tests.models.conftest import tiny_inputs, tiny_model

WORDS = [f"w{i}" for i in range(1, 10)]
MARKER = "w9 w8 w7 w6 w5"  # the left text of the pair whose worker a test kills (5 words: unique)
KILL_FLAG = "ATTNMATCH_TEST_KILL_FLAG"  # a file: the worker that meets MARKER removes it, dies
BOUND_S = 10.0  # a killed worker ends the command within this


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    net = tiny_model("mvlstm", num_outputs=1)
    matcher = Matcher(
        model=net.eval(), model_type="mvlstm", inputs=tiny_inputs(net), task=Task(kind="ranking")
    )
    return matcher.save(tmp_path_factory.mktemp("models") / "ranker")


def _pairs(path: Path, count: int, marker_at: int | None = None) -> Path:
    """`count` pairs with an id column (TSV with a header); pair `marker_at` has MARKER."""
    rng = np.random.default_rng(0)
    lines = ["id\tleft\tright"]
    for i in range(count):
        left = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))
        right = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 8))))
        lines.append(f"p{i}\t{MARKER if i == marker_at else left}\t{right}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _single(model: Path, pairs: Path, out: Path, chunk_size: int) -> bytes:
    with PairsFile(pairs) as records:
        write_scored(Matcher.load(model), records, out, chunk_size=chunk_size)
    return out.read_bytes()


def dies_at_marker(
    matcher: Matcher, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[str] | None]:
    """A worker's work (`bulk.score_pairs`) that SIGKILLs its own process on the chunk holding
    MARKER while the file named by KILL_FLAG exists (replacing it by FLAG.at, holding the
    time of the kill: one death a run)."""
    flag = Path(os.environ[KILL_FLAG])
    if any(left == MARKER for left, _ in pairs) and flag.exists():
        flag.with_suffix(".at").write_text(repr(time.time()), encoding="utf-8")
        flag.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return bulk.score_pairs(matcher, pairs)


def _workers(pid: int) -> list[int]:
    """The pids of `pid`'s worker processes (multiprocessing's spawned children)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            if b"spawn_main" in cmdline:
                found.append(int(child))
    return found


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc for the workers")
@pytest.mark.parametrize("case", ["c3-worker-killed-ends-the-command"], ids=str)
def test_a_killed_worker_ends_the_command_and_a_rerun_finishes(
    case: str, model: Path, tmp_path: Path
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 400)
    expected = _single(model, pairs, tmp_path / "one.tsv", 4)
    out = tmp_path / "out.tsv"
    args = [sys.executable, "-m", "attnmatch", "score", str(model), str(pairs), "-o", str(out)]
    args += ["--workers", "2", "--chunk-size", "4"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while len(workers := _workers(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(workers) == 2, "the workers did not start"
        os.kill(workers[1], signal.SIGKILL)
        killed = time.monotonic()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # it hung: end it and its workers
            proc.kill()
            proc.communicate()
    assert time.monotonic() - killed < BOUND_S
    outcome = Outcome(proc.returncode, stdout, stderr)
    line = assert_clear_error(outcome, "worker 2 of 2", f"pid {workers[1]}")
    assert "SIGKILL" in line and "run the same command again" in line
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    again = subprocess.run(args, capture_output=True, text=True, timeout=600, check=False)
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == expected


@pytest.mark.parametrize("case", ["c3-worker-killed-mid-shard-resumes"], ids=str)
def test_a_shard_whose_worker_is_killed_resumes_where_it_stopped(
    case: str,
    model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23, marker_at=13)  # line 15, chunk 4 (of 3 pairs)
    expected = _single(model, pairs, tmp_path / "one.tsv", 3)
    flag = tmp_path / "kill-once"
    flag.touch()
    monkeypatch.setenv(KILL_FLAG, str(flag))
    monkeypatch.setattr(bulk, "score_pairs", dies_at_marker)
    out = tmp_path / "out.tsv"
    args = ["score", model, pairs, "-o", out, "--shard", "0/1", "--workers", "2"]
    args += ["--chunk-size", "3"]
    outcome = run_cli(args, capsys)
    assert not flag.exists(), "the worker met the marker"
    assert time.time() - float(flag.with_suffix(".at").read_text(encoding="utf-8")) < BOUND_S
    line = assert_clear_error(outcome, "worker 1 of 2", "lines 14-16 of", "SIGKILL")
    assert "resumes" in line and not out.exists()
    outcome = run_cli(args, capsys)  # the flag is gone: no worker dies
    assert outcome.code == 0, outcome.stderr
    assert "resumed after" in outcome.stderr and "merged into" in outcome.stderr
    assert out.read_bytes() == expected
