"""Bulk scoring (`attnmatch.bulk`): worker processes and shards write the bytes one process
writes, a killed shard resumes where it stopped, parts of another run are refused, and the
workers run the chosen backend (ONNX Runtime too, with the bytes of one process)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnmatch import bulk
from attnmatch.bulk import Shard, WorkerPool, fingerprint, parts_folder, write_shard
from attnmatch.cli import app
from attnmatch.matcher import Matcher
from attnmatch.scoring import PairRecord, PairsFile, matcher_scorer, write_scored
from attnmatch.tasks import Task
from tests.models.conftest import tiny_inputs, tiny_model
from tests.tiny_transformer import WORDS as TINY_WORDS
from tests.tiny_transformer import write_tiny_encoder

runner = CliRunner()
WORDS = [f"w{i}" for i in range(1, 10)]


def _save(path: Path, num_outputs: int, task: Task) -> Path:
    model = tiny_model("mvlstm", num_outputs=num_outputs)
    matcher = Matcher(model=model.eval(), model_type="mvlstm", inputs=tiny_inputs(model), task=task)
    return matcher.save(path)


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _save(tmp_path_factory.mktemp("models") / "ranker", 1, Task(kind="ranking"))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task = Task(kind="classification", class_names=("no", "yes"))
    return _save(tmp_path_factory.mktemp("models") / "cls", 2, task)


@pytest.fixture()
def pairs(tmp_path: Path) -> Path:
    """23 pairs with an id column (TSV with a header): 8 chunks of 3, the last one short."""
    rng = np.random.default_rng(0)
    lines = ["id\tleft\tright"]
    for i in range(23):
        left = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 5))))
        right = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 8))))
        lines.append(f"p{i}\t{left}\t{right}")
    path = tmp_path / "pairs.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _single(model: Path, pairs: Path, out: Path) -> bytes:
    with PairsFile(pairs) as records:
        write_scored(Matcher.load(model), records, out, chunk_size=3)
    return out.read_bytes()


def _shard(model: Path, pairs: Path, out: Path, shard: Shard, **kwargs: object) -> object:
    run = fingerprint(pairs, str(model), 3, "auto")
    with PairsFile(pairs) as records:
        return write_shard(Matcher.load(model), records, out, shard, run, chunk_size=3, **kwargs)


def test_worker_processes_write_the_bytes_of_one_process(
    ranker: Path, pairs: Path, tmp_path: Path
) -> None:
    expected = _single(ranker, pairs, tmp_path / "one.tsv")
    with WorkerPool(str(ranker), 2, threads=1) as pool, PairsFile(pairs) as records:
        count = write_scored(
            Matcher.load(ranker), records, tmp_path / "two.tsv", chunk_size=3, scorer=pool
        )
    assert count == 23
    assert (tmp_path / "two.tsv").read_bytes() == expected


@pytest.mark.parametrize("name", ["out.tsv", "out.jsonl"])
@pytest.mark.parametrize("world", [1, 3, 5])
def test_shards_in_any_order_merge_into_the_bytes_of_one_process(
    classifier: Path, pairs: Path, tmp_path: Path, name: str, world: int
) -> None:
    expected = _single(classifier, pairs, tmp_path / f"one-{name}")
    out = tmp_path / name
    ranks = list(range(world))[::-1]  # the last rank first: the merge waits for every shard
    outcomes = [_shard(classifier, pairs, out, Shard(rank, world)) for rank in ranks]
    assert [o.merged for o in outcomes] == [False] * (world - 1) + [True]  # type: ignore[attr-defined]
    assert out.read_bytes() == expected
    assert not parts_folder(out).exists()


class _Killed(Exception):
    pass


def _dies_after(chunks: int, matcher: Matcher):  # type: ignore[no-untyped-def]
    """A scorer that stops the process (as kill -9 would, for the files) after `chunks`."""
    score = matcher_scorer(matcher)

    def scorer(
        items: Iterable[tuple[int, list[PairRecord]]],
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]:
        for n, item in enumerate(score(items)):
            if n == chunks:
                raise _Killed
            yield item

    return scorer


def test_a_killed_shard_resumes_at_its_first_unrecorded_chunk(
    ranker: Path, pairs: Path, tmp_path: Path
) -> None:
    expected = _single(ranker, pairs, tmp_path / "one.tsv")
    out = tmp_path / "out.tsv"
    _shard(ranker, pairs, out, Shard(1, 2))
    with pytest.raises(_Killed):
        _shard(ranker, pairs, out, Shard(0, 2), scorer=_dies_after(2, Matcher.load(ranker)))
    part = parts_folder(out) / "part-00000-of-00002"
    with part.open("ab") as f:
        f.write(b"w1\tw2\t0.5")  # half a line written when the kill came
    outcome = _shard(ranker, pairs, out, Shard(0, 2))
    assert outcome.resumed_chunks == 2 and outcome.merged  # type: ignore[attr-defined]
    assert outcome.scored == 6  # type: ignore[attr-defined]  # chunks 4 and 6 of 0..7, of 3 pairs
    assert out.read_bytes() == expected


def test_parts_of_another_run_are_refused(ranker: Path, pairs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.tsv"
    _shard(ranker, pairs, out, Shard(0, 2))
    pairs.write_text(pairs.read_text(encoding="utf-8") + "p99\tw1\tw2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="parts of another run"):
        _shard(ranker, pairs, out, Shard(1, 2))


def test_shard_forms() -> None:
    assert Shard.parse("2/4") == Shard(2, 4)
    assert Shard.parse("torchrun", {"RANK": "3", "WORLD_SIZE": "8"}) == Shard(3, 8)
    for bad, needle in (("4/4", "0..3"), ("two", "RANK/WORLD"), ("torchrun", "torchrun")):
        with pytest.raises(ValueError, match=needle):
            Shard.parse(bad, {})


def test_the_cli_scores_with_workers_and_shards(ranker: Path, pairs: Path, tmp_path: Path) -> None:
    expected = _single(ranker, pairs, tmp_path / "one.tsv")
    base = ["score", str(ranker), str(pairs), "--chunk-size", "3"]
    result = runner.invoke(app, [*base, "-o", str(tmp_path / "w.tsv"), "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "w.tsv").read_bytes() == expected
    for rank in (0, 1):
        out = tmp_path / "s.tsv"
        result = runner.invoke(app, [*base, "-o", str(out), "--shard", f"{rank}/2"])
        assert result.exit_code == 0, result.output
    assert "every shard finished: merged into" in result.output
    assert (tmp_path / "s.tsv").read_bytes() == expected
    result = runner.invoke(app, [*base, "--shard", "0/2"])
    assert result.exit_code != 0 and "--shard" in result.output
    assert not (tmp_path / "s.tsv.parts").exists()


def test_progress_records_only_written_chunks(ranker: Path, pairs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.tsv"
    with pytest.raises(_Killed):
        _shard(ranker, pairs, out, Shard(0, 1), scorer=_dies_after(3, Matcher.load(ranker)))
    folder = parts_folder(out)
    progress = json.loads((folder / "progress-00000-of-00001.json").read_text(encoding="utf-8"))
    assert progress["chunks"] == 3 and not progress["finished"]
    lines = (folder / "part-00000-of-00001").read_bytes().splitlines()
    assert len(lines) == 9 and progress["bytes"] == (folder / "part-00000-of-00001").stat().st_size


BACKEND_LOG = "ATTNMATCH_TEST_BACKEND_LOG"


def logs_backend(
    matcher: Matcher, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[str] | None]:
    """A worker's work (`bulk.score_pairs`) that appends the backend it runs to a log file."""
    with open(os.environ[BACKEND_LOG], "a", encoding="utf-8") as log:
        log.write(f"{os.getpid()} {matcher.backend}\n")
    return bulk.score_pairs(matcher, pairs)


def test_workers_run_the_chosen_backend_and_write_the_bytes_of_one_process_on_onnx(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoder = write_tiny_encoder(tmp_path / "tiny-bert")
    model = Matcher.from_encoder(str(encoder)).save(tmp_path / "bi")
    rng = np.random.default_rng(1)
    lines = [
        f"{' '.join(rng.choice(TINY_WORDS, 3))}\t{' '.join(rng.choice(TINY_WORDS, 7))}\n"
        for _ in range(40)
    ]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(lines), encoding="utf-8")
    log = tmp_path / "backends.log"
    monkeypatch.setenv(BACKEND_LOG, str(log))
    monkeypatch.setattr(bulk, "score_pairs", logs_backend)
    base = ["score", str(model), str(pairs), "--format", "tsv", "--chunk-size", "6"]
    outputs = {}
    for name, extra in {"one": [], "two": ["--workers", "2"]}.items():
        out = tmp_path / f"{name}.tsv"
        result = runner.invoke(app, [*base, "--backend", "onnx", "-o", str(out), *extra])
        assert result.exit_code == 0, result.output
        outputs[name] = out.read_bytes()
    assert outputs["two"] == outputs["one"]
    pids = {line.split()[0]: line.split()[1] for line in log.read_text().splitlines()}
    assert len(pids) == 2 and set(pids.values()) == {"onnx"}  # both workers, on ONNX Runtime
    out = tmp_path / "torch.tsv"
    result = runner.invoke(app, [*base, "--backend", "torch", "-o", str(out), "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert log.read_text().count(" torch\n") == 7  # the 7 chunks, on torch when asked
