"""Bulk scoring past one process: `attnmatch score --workers N` and `--shard RANK/WORLD`.

Both keep the chunks of a single process (`scoring.CHUNK_SIZE` pairs, one `predict_pairs`
each), so that every way of scoring a file writes the same bytes:

- `WorkerPool`: N processes on this machine, each with its own copy of the model, fed chunks in
  order with at most 2N in flight (memory bounded by the chunk, whatever the file's length);
  the parent reads, checks and writes.
- `write_shard`: shard RANK of WORLD scores the chunks i with i % WORLD == RANK into
  `OUT.parts/part-RANK-of-WORLD`, appending chunk by chunk: each chunk's lines are flushed and
  synced before `progress-RANK-of-WORLD.json` records them, so a shard killed at any moment
  resumes at its first unrecorded chunk (what follows it in the part is cut off). The shard
  that finishes last merges the parts, taking chunk sizes of lines from each part in turn,
  into OUT (atomically) and removes the parts folder.

Shards run as torchrun ranks (`--shard torchrun` reads RANK and WORLD_SIZE): torchrun is the
launcher the project already uses, it starts one process per rank on each machine and restarts
failed ones (`--max-restarts`), and a static partition needs nothing from a cluster engine
beyond that: no scheduler state, no new dependency. Ray or Spark would pay when the input does
not sit on a shared file system (Spark reads it from object stores in partitions) or when the
machines are uneven (dynamic task stealing); neither is the case for one file on shared storage
and equal nodes. Every rank reads the whole file (parsing only its own chunks) and writes to
the shared OUT.parts folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import socket
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.atomic import open_text_atomic, write_text_atomic
from attnmatch.matcher import Matcher
from attnmatch.scoring import CHUNK_SIZE, PairRecord, PairsFile, ScoredLayout, score_chunks

_WORKER: dict[str, Matcher] = {}  # the model of a worker process


def _worker_start(spec: str, device: str, precision: str, threads: int) -> None:
    from attnmatch.devices import set_torch_threads
    from attnmatch.matcher import load_matcher

    set_torch_threads(threads)  # for the worker process's life
    _WORKER["matcher"] = load_matcher(spec, device=device, precision=precision)


def _worker_score(pairs: list[tuple[str, str]]) -> tuple[np.ndarray, list[str] | None]:
    predictions = _WORKER["matcher"].predict_pairs(pairs)
    return predictions.scores, predictions.labels


class WorkerPool:
    """`workers` processes, each with the model `spec` loads (`load_matcher`), scoring chunks
    in order: a `scoring.ChunkScorer`. Use it as a context manager, which stops them.

    Args:
        spec: a model folder, an encoder or a lexical scorer, as `load_matcher` reads it.
        workers: processes (>= 1).
        threads: torch threads of each (default: this process's threads shared out, >= 1).
    """

    def __init__(
        self,
        spec: str,
        workers: int,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        threads: int | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        import torch

        threads = threads or max(1, torch.get_num_threads() // workers)
        context = multiprocessing.get_context("spawn")  # no fork of a process holding torch
        self.workers = workers
        self._pool = context.Pool(
            workers, initializer=_worker_start, initargs=(spec, device, precision, threads)
        )

    def __call__(
        self, chunks: Iterable[tuple[int, list[PairRecord]]]
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]:
        pending: deque[tuple[int, list[PairRecord], Any]] = deque()
        for index, records in chunks:
            pairs = [(r.left, r.right) for r in records]
            pending.append((index, records, self._pool.apply_async(_worker_score, (pairs,))))
            if len(pending) >= 2 * self.workers:
                index, records, result = pending.popleft()
                yield index, records, *result.get()
        while pending:
            index, records, result = pending.popleft()
            yield index, records, *result.get()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.terminate()
        self._pool.join()


@dataclass(frozen=True)
class Shard:
    """Shard `rank` of `world` (0 <= rank < world)."""

    rank: int
    world: int

    @classmethod
    def parse(cls, text: str, environ: dict[str, str] | None = None) -> Shard:
        """ "RANK/WORLD" ("3/8"), or "torchrun": the RANK and WORLD_SIZE torchrun sets.

        Raises:
            ValueError: another form, a rank outside 0..WORLD-1, or torchrun's variables unset.
        """
        env = os.environ if environ is None else environ
        if text == "torchrun":
            if "RANK" not in env or "WORLD_SIZE" not in env:
                raise ValueError(
                    "--shard torchrun: RANK and WORLD_SIZE are not set; launch with torchrun, "
                    "or give --shard RANK/WORLD"
                )
            text = f"{env['RANK']}/{env['WORLD_SIZE']}"
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not match:
            raise ValueError(f"--shard must be RANK/WORLD (e.g. 0/4) or torchrun, got {text!r}")
        rank, world = int(match[1]), int(match[2])
        if not 0 <= rank < world:
            raise ValueError(f"--shard {text}: the rank must be in 0..{world - 1}")
        return cls(rank, world)

    @property
    def name(self) -> str:
        return f"{self.rank:05d}-of-{self.world:05d}"


def parts_folder(output: str | Path) -> Path:
    """Where the shards of OUT write their parts: OUT.parts beside it."""
    output = Path(output)
    return output.with_name(output.name + ".parts")


def fingerprint(pairs_path: str | Path, spec: str, chunk_size: int, fmt: str) -> dict[str, Any]:
    """What the parts of a run depend on: a resumed shard must find the same."""
    path = Path(pairs_path)
    stat = path.stat()
    return {
        "pairs": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "model": spec,
        "chunk_size": chunk_size,
        "format": fmt,
    }


@dataclass(frozen=True)
class ShardOutcome:
    """What `write_shard` did: pairs scored now, chunks skipped as already done, and whether
    this shard merged the parts into the output."""

    scored: int
    resumed_chunks: int
    merged: bool
    finished_shards: int


def write_shard(
    matcher: Matcher,
    pairs: PairsFile,
    output: str | Path,
    shard: Shard,
    run: dict[str, Any],
    *,
    chunk_size: int = CHUNK_SIZE,
    scorer: Any = None,
) -> ShardOutcome:
    """Scores shard `shard` of `pairs` into OUT.parts (resuming where a killed run of this
    shard stopped), and merges the parts into `output` when every shard has finished.

    Args:
        run: `fingerprint` of this run; parts written for another one are an error.
        scorer: as `scoring.score_chunks`.

    Raises:
        ValueError: the parts folder holds parts of another run (another input, model, chunk
            size or shard count).
    """
    folder = parts_folder(output)
    folder.mkdir(parents=True, exist_ok=True)
    part = folder / f"part-{shard.name}"
    progress_path = folder / f"progress-{shard.name}.json"
    progress = _read_progress(progress_path, run, shard)
    done = int(progress["chunks"])
    with part.open("ab") as f:
        f.truncate(int(progress["bytes"]))  # what a killed run wrote past its last record
    layout = ScoredLayout.of(matcher, pairs, output)
    scored = 0
    if not progress["finished"]:

        def keep(index: int) -> bool:
            return index % shard.world == shard.rank and index // shard.world >= done

        with part.open("ab") as f:
            for chunk in score_chunks(matcher, pairs, chunk_size, scorer=scorer, keep=keep):
                f.write(layout.lines(chunk, pairs.source).encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
                progress["chunks"] = chunk.index // shard.world + 1
                progress["bytes"] = f.tell()
                write_text_atomic(progress_path, json.dumps(progress))
                scored += len(chunk.records)
        progress["finished"] = True
        write_text_atomic(progress_path, json.dumps(progress))
    finished, merged = _merge_when_complete(folder, output, shard.world, layout, chunk_size)
    return ShardOutcome(scored, done, merged, finished)


def merge_note(output: str | Path, outcome: ShardOutcome, shard: Shard) -> str:
    """One line on where the merged output stands after `write_shard`."""
    folder = parts_folder(output)
    if outcome.merged:
        return f"every shard finished: merged into {output}"
    if outcome.finished_shards < shard.world:
        return (
            f"{outcome.finished_shards} of {shard.world} shards finished; the last one merges "
            f"the parts of {folder} into {output}"
        )
    return (
        f"every shard finished; another process merges them ({folder / 'merging'}/owner); if "
        "none does, delete that folder and run any shard again"
    )


def _read_progress(path: Path, run: dict[str, Any], shard: Shard) -> dict[str, Any]:
    """This shard's progress (fresh when none), after checking that every progress file of the
    folder belongs to this run and shard count."""
    mine: dict[str, Any] = {
        "run": run,
        "shard": asdict(shard),
        "chunks": 0,
        "bytes": 0,
        "finished": False,
    }
    for other in sorted(path.parent.glob("progress-*.json")):
        try:
            progress = json.loads(other.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(
                f"{other}: unreadable ({e}); delete it to score that shard again"
            ) from e
        if progress.get("run") != run or progress.get("shard", {}).get("world") != shard.world:
            raise ValueError(
                f"{path.parent}: parts of another run ({other.name}: another input file, model, "
                "--format, --chunk-size or shard count); delete the folder to start over"
            )
        if other == path:
            mine = dict(progress)
    return mine


def _merge_when_complete(
    folder: Path, output: str | Path, world: int, layout: ScoredLayout, chunk_size: int
) -> tuple[int, bool]:
    """Merges the parts into `output` when all `world` shards are finished and no other shard
    is merging: (the shards finished, whether this process merged)."""
    shards = [Shard(rank, world) for rank in range(world)]
    finished = 0
    for shard in shards:
        path = folder / f"progress-{shard.name}.json"
        if path.exists() and json.loads(path.read_text(encoding="utf-8"))["finished"]:
            finished += 1
    if finished < world:
        return finished, False
    lock = folder / "merging"
    try:
        lock.mkdir()  # atomic: one shard merges
    except FileExistsError:  # another shard merges (or a merge was killed: see `merge_note`)
        return finished, False
    (lock / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n", encoding="utf-8")
    with open_text_atomic(output) as out:
        out.write(layout.header())
        _interleave(out, [folder / f"part-{s.name}" for s in shards], chunk_size)
    shutil.rmtree(folder)
    return finished, True


def _interleave(out: Any, parts: list[Path], chunk_size: int) -> None:
    """Chunk i of the file is chunk i // world of part i % world: `chunk_size` lines from each
    part in turn rebuild the order of a single process."""
    files = [p.open("rb") for p in parts]  # lines end in \n only (no \r in a scored record)
    try:
        while True:
            wrote = False
            for f in files:
                for _ in range(chunk_size):
                    line = f.readline()
                    if not line:
                        break
                    out.write(line.decode("utf-8"))
                    wrote = True
            if not wrote:
                return
    finally:
        for f in files:
            f.close()
