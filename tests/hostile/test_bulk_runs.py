"""Hostile bulk scoring: `attnmatch score --workers N` and `--shard RANK/WORLD`
(`attnmatch.bulk`; docs/robustness.md, "Files read back").

- c3: a worker killed with SIGKILL (as kill -9 or the out-of-memory killer does) ends the
  command within 10 s, with one line naming the worker, its pid and the lines it held, and
  exit status 2; the same command run again finishes (a shard resumes at its first unwritten
  chunk) with the bytes one process writes. A shard whose own part was cut short is refused
  on resume and left as it is (never grown with NUL bytes).
- c4: a part that differs from its progress record (cut short, edited in place, grown, missing),
  a model replaced between shards, a part and record of another input: refused before the
  merge, one line naming the file and what differs, exit status 2, nothing written.
- c2: a damaged progress record (garbage, a field of the wrong type) is one line naming it.
- c7: deleting what the line names and running that shard again merges the bytes of one
  process; an error raised in a worker names the worker and the lines of its chunk.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch import bulk
from attnmatch.matcher import Matcher
from attnmatch.scoring import ChunkScorer, PairRecord, PairsFile, matcher_scorer, write_scored
from attnmatch.tasks import Task
from tests.hostile._util import Outcome, assert_clear_error, assert_clear_exception, run_cli
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


def fails_at_marker(
    matcher: Matcher, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[str] | None]:
    """A worker's work that raises on the chunk holding MARKER, as a model error would."""
    if any(left == MARKER for left, _ in pairs):
        raise ValueError("the model failed on this chunk")
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


# --- parts of --shard, checked against their progress records --------------------------------

PART_1 = "part-00001-of-00002"
PROGRESS_1 = "progress-00001-of-00002.json"
Damage = Callable[[Path, Path], None]  # (the parts folder, the test's folder)


@pytest.fixture(scope="module")
def other_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(7)
    net = tiny_model("mvlstm", num_outputs=1)
    matcher = Matcher(
        model=net.eval(), model_type="mvlstm", inputs=tiny_inputs(net), task=Task(kind="ranking")
    )
    return matcher.save(tmp_path_factory.mktemp("models") / "other")


def _shard_args(model: Path, pairs: Path, out: Path, rank: int) -> list[object]:
    return ["score", model, pairs, "-o", out, "--shard", f"{rank}/2", "--chunk-size", "3"]


def _cut(name: str) -> Damage:
    def damage(parts: Path, _: Path) -> None:
        path = parts / name
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    return damage


def _edit_in_place(parts: Path, _: Path) -> None:
    path = parts / PART_1
    data = path.read_bytes()
    i = data.index(b"\t0.") + 3  # a digit of the first score
    edited = data[:i] + (b"1" if data[i : i + 1] != b"1" else b"2") + data[i + 1 :]
    path.write_bytes(edited)


def _append_line(parts: Path, _: Path) -> None:
    with (parts / PART_1).open("ab") as f:
        f.write(b"w1\tw2\tp99\t0.5\n")


def _remove_part(parts: Path, _: Path) -> None:
    (parts / PART_1).unlink()


def _garbage_record(parts: Path, _: Path) -> None:
    (parts / PROGRESS_1).write_bytes(b"\x00\x17not json")


def _record_field_as_text(parts: Path, _: Path) -> None:
    record = json.loads((parts / PROGRESS_1).read_text(encoding="utf-8"))
    record["bytes"] = str(record["bytes"])
    (parts / PROGRESS_1).write_text(json.dumps(record), encoding="utf-8")


DAMAGES: list[tuple[str, Damage, list[str]]] = [
    ("c4-part-cut-short", _cut(PART_1), [PART_1, "cut short", PROGRESS_1]),
    ("c4-part-edited-in-place", _edit_in_place, [PART_1, "changed or replaced", "sha256"]),
    ("c4-part-grown", _append_line, [PART_1, "grown"]),
    ("c4-part-missing", _remove_part, [PART_1, "missing", PROGRESS_1]),
    ("c2-progress-record-garbage", _garbage_record, [PROGRESS_1, "unreadable"]),
    ("c2-progress-record-field-as-text", _record_field_as_text, [PROGRESS_1, "'bytes'"]),
]


@pytest.mark.parametrize(("damage", "needles"), [pytest.param(d, n, id=i) for i, d, n in DAMAGES])
def test_a_part_that_differs_from_its_record_is_refused_before_the_merge(
    damage: Damage,
    needles: list[str],
    model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23)
    out = tmp_path / "out.tsv"
    assert run_cli(_shard_args(model, pairs, out, 1), capsys).code == 0
    damage(bulk.parts_folder(out), tmp_path)
    outcome = run_cli(_shard_args(model, pairs, out, 0), capsys)
    assert_clear_error(outcome, *needles)
    assert not out.exists() and outcome.stdout == ""


@pytest.mark.parametrize("case", ["c4-model-replaced-between-shards"], ids=str)
def test_a_model_replaced_between_shards_is_refused(
    case: str,
    model: Path,
    other_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23)
    out = tmp_path / "out.tsv"
    folder = Path(shutil.copytree(model, tmp_path / "model"))
    assert run_cli(_shard_args(folder, pairs, out, 1), capsys).code == 0
    shutil.copy(other_model / "model.safetensors", folder / "model.safetensors")
    outcome = run_cli(_shard_args(folder, pairs, out, 0), capsys)
    assert_clear_error(outcome, PROGRESS_1, "parts of another run", "model's files changed")
    assert not out.exists()


@pytest.mark.parametrize("case", ["c4-part-and-record-of-another-input"], ids=str)
def test_a_part_of_another_input_is_refused(
    case: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23)
    other = _pairs(tmp_path / "other.tsv", 29)
    out, elsewhere = tmp_path / "out.tsv", tmp_path / "elsewhere.tsv"
    assert run_cli(_shard_args(model, other, elsewhere, 1), capsys).code == 0
    foreign = bulk.parts_folder(elsewhere)
    parts = bulk.parts_folder(out)
    parts.mkdir()
    for name in (PART_1, PROGRESS_1):
        shutil.copy(foreign / name, parts / name)
    outcome = run_cli(_shard_args(model, pairs, out, 0), capsys)
    assert_clear_error(outcome, PROGRESS_1, "another input file")
    assert not out.exists()


@pytest.mark.parametrize("case", ["c3-resume-on-a-cut-part-grows-nothing"], ids=str)
def test_resuming_a_part_cut_short_is_refused_and_leaves_it_as_it_is(
    case: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23)
    out = tmp_path / "out.tsv"
    run = bulk.fingerprint(pairs, str(model), 3, "auto")
    with PairsFile(pairs) as records, pytest.raises(_Stop):
        bulk.write_shard(
            Matcher.load(model), records, out, bulk.Shard(0, 2), run, chunk_size=3,
            scorer=_stops_after(2, Matcher.load(model)),
        )  # fmt: skip
    part = bulk.parts_folder(out) / "part-00000-of-00002"
    part.write_bytes(part.read_bytes()[:10])  # fewer bytes than the record vouches for
    outcome = run_cli(_shard_args(model, pairs, out, 0), capsys)
    assert_clear_error(outcome, "part-00000-of-00002", "cut short", "10 bytes")
    assert part.stat().st_size == 10 and b"\0" not in part.read_bytes()  # not grown with NULs


@pytest.mark.parametrize("case", ["c7-the-named-repair-merges-the-bytes-of-one-process"], ids=str)
def test_deleting_what_the_line_names_and_running_the_shard_again_repairs(
    case: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23)
    expected = _single(model, pairs, tmp_path / "one.tsv", 3)
    out = tmp_path / "out.tsv"
    assert run_cli(_shard_args(model, pairs, out, 1), capsys).code == 0
    _cut(PART_1)(bulk.parts_folder(out), tmp_path)
    line = assert_clear_error(run_cli(_shard_args(model, pairs, out, 0), capsys), PART_1)
    assert f"delete it and {PROGRESS_1} to score shard 1/2 again" in line
    for name in (PART_1, PROGRESS_1):
        (bulk.parts_folder(out) / name).unlink()
    outcome = run_cli(_shard_args(model, pairs, out, 1), capsys)
    assert outcome.code == 0 and "merged into" in outcome.stderr, outcome.stderr
    assert out.read_bytes() == expected


class _Stop(Exception):
    pass


def _stops_after(chunks: int, matcher: Matcher) -> ChunkScorer:
    """A scorer that stops the shard (as a kill would, for the files) after `chunks` chunks."""
    score = matcher_scorer(matcher)

    def scorer(
        items: Iterable[tuple[int, list[PairRecord]]],
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]:
        for n, item in enumerate(score(items)):
            if n == chunks:
                raise _Stop
            yield item

    return scorer


@pytest.mark.parametrize("case", ["c7-worker-error-names-the-worker-and-lines"], ids=str)
def test_an_error_in_a_worker_names_it_and_the_lines_it_held(
    case: str, model: Path, tmp_path: Path
) -> None:
    pairs = _pairs(tmp_path / "pairs.tsv", 23, marker_at=13)  # lines 14-16: chunk 4, worker 1
    with PairsFile(pairs) as records:
        pool = bulk.WorkerPool(
            str(model), 2, threads=1, source=records.source, work=fails_at_marker
        )
        with pool, pytest.raises(bulk.WorkerDied) as failed:
            write_scored(
                Matcher.load(model), records, tmp_path / "out.tsv", chunk_size=3, scorer=pool
            )
    needles = ("the model failed on this chunk", "worker 1 of 2", f"lines 14-16 of {pairs}")
    assert_clear_exception(failed.value, *needles)
    assert not (tmp_path / "out.tsv").exists()
