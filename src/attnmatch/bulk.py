"""Bulk scoring past one process: `attnmatch score --workers N` and `--shard RANK/WORLD`.

Both keep the chunks of a single process (`scoring.CHUNK_SIZE` pairs, one `predict_pairs`
each), so that every way of scoring a file writes the same bytes:

- `WorkerPool`: N processes on this machine, each with its own copy of the model, fed chunks in
  order with at most 2N in flight (memory bounded by the chunk, whatever the file's length);
  the parent reads, checks and writes. A worker that ends before it answers (kill -9, the
  out-of-memory killer) ends the command at once with one line naming it and the lines of its
  chunk; the parent waits on each worker's process as well as on its answer, so nothing waits
  for a dead worker.
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

import contextlib
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

import numpy as np

from attnmatch.atomic import open_text_atomic, write_text_atomic
from attnmatch.matcher import Matcher
from attnmatch.scoring import CHUNK_SIZE, PairRecord, PairsFile, ScoredLayout, score_chunks


class WorkerDied(ValueError):
    """A worker of a `WorkerPool` ended before it answered (kill -9, the out-of-memory killer,
    an error): the message names the worker, its pid and the pairs it held. A ValueError, as
    every error the command line prints as its one line."""


def score_pairs(
    matcher: Matcher, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[str] | None]:
    """What a worker does with one chunk: its scores and predicted labels (a test may pass
    another function to `WorkerPool` to stop a worker midway)."""
    predictions = matcher.predict_pairs(pairs)
    return predictions.scores, predictions.labels


Work = Callable[[Matcher, list[tuple[str, str]]], tuple[np.ndarray, list[str] | None]]


@dataclass(frozen=True)
class WorkerSettings:
    """How each worker loads its model (`load_matcher`) and runs: torch threads and `work`."""

    spec: str
    device: str
    precision: str
    backend: str
    threads: int
    work: Work


def _worker_main(tasks: Connection, results: Connection, settings: WorkerSettings) -> None:
    """A worker process: loads the model, says "ready", then answers each (index, pairs) task
    with ("done", index, scores, labels) until the parent closes `tasks` or sends None."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us
    from attnmatch.devices import set_torch_threads
    from attnmatch.matcher import load_matcher

    set_torch_threads(settings.threads)  # for the worker process's life
    try:
        matcher = load_matcher(
            settings.spec,
            device=settings.device,
            precision=settings.precision,
            backend=settings.backend,
        )
        results.send(("ready",))
        while (task := _next_task(tasks)) is not None:
            index, pairs = task
            results.send(("done", index, *settings.work(matcher, pairs)))
    except Exception as e:  # reported by the parent, which names this worker
        with contextlib.suppress(OSError):
            results.send(("error", _one_line(e)))


def _next_task(tasks: Connection) -> tuple[int, list[tuple[str, str]]] | None:
    try:
        task = tasks.recv()
    except EOFError:  # the parent is gone or closed the pipe
        return None
    return cast("tuple[int, list[tuple[str, str]]] | None", task)


def _one_line(error: BaseException) -> str:
    message = " ".join(str(error).split()) or type(error).__name__
    return (
        message if isinstance(error, ValueError | OSError) else f"{type(error).__name__}: {message}"
    )


@dataclass
class _Worker:
    """One worker process, its two pipes, the chunks it owes in the order it was sent them,
    and the thread that feeds it (so that a send never blocks the reader of answers: a chunk
    larger than a pipe's buffer would otherwise deadlock both sides)."""

    rank: int
    process: Any  # multiprocessing.process.BaseProcess
    tasks: Connection  # parent -> worker
    results: Connection  # worker -> parent
    outbox: queue.SimpleQueue[Any]
    owed: deque[tuple[int, list[PairRecord]]] = field(default_factory=deque)
    ready: bool = False

    def feed(self) -> None:
        """Sends the tasks of `outbox` until None, then closes the pipe (the worker reads its
        end and exits); owns `tasks`."""
        try:
            while (task := self.outbox.get()) is not None:
                self.tasks.send(task)
        except OSError:  # the worker is gone: the reader of answers says so
            pass
        finally:
            self.tasks.close()

    def receive(self) -> tuple[Any, ...] | None:
        """The worker's next message; None when it is gone (perhaps midway through one)."""
        try:
            return cast("tuple[Any, ...]", self.results.recv())
        except (EOFError, OSError):
            return None


class WorkerPool:
    """`workers` processes, each with the model `spec` loads (`load_matcher`), scoring chunks
    in order: a `scoring.ChunkScorer`. Use it as a context manager, which stops them.

    Chunk n goes to worker n % workers, at most two chunks a worker in flight. The parent
    waits on the answer it needs and on the process of every worker that owes one, so a
    worker that ends without answering (kill -9, the out-of-memory killer, an error) ends the
    run at once with `WorkerDied`, naming it and the lines of its chunk.

    Args:
        spec: a model folder, an encoder or a lexical scorer, as `load_matcher` reads it.
        workers: processes (>= 1).
        backend: as `load_matcher` ("onnx": each worker runs ONNX Runtime).
        threads: torch threads of each (default: this process's threads shared out, >= 1).
        source: the input's name, for messages.
        work: what a worker does with a chunk (default `score_pairs`).
    """

    def __init__(
        self,
        spec: str,
        workers: int,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        backend: str = "auto",
        threads: int | None = None,
        source: str = "the input",
        work: Work | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        import torch

        threads = threads or max(1, torch.get_num_threads() // workers)
        settings = WorkerSettings(spec, device, precision, backend, threads, work or score_pairs)
        self.workers = workers
        self.source = source
        self._pool: list[_Worker] = []
        context = multiprocessing.get_context("spawn")  # no fork of a process holding torch
        try:
            for rank in range(workers):
                self._pool.append(_start_worker(context, rank, settings))
        except BaseException:
            self.close(stop=True)
            raise

    @property
    def pids(self) -> list[int]:
        """The workers' process ids, in rank order."""
        return [int(w.process.pid) for w in self._pool]

    def __call__(
        self, chunks: Iterable[tuple[int, list[PairRecord]]]
    ) -> Iterator[tuple[int, list[PairRecord], np.ndarray, list[str] | None]]:
        order: deque[_Worker] = deque()  # who answers next, in the chunks' order
        for n, (index, records) in enumerate(chunks):
            worker = self._pool[n % self.workers]
            worker.owed.append((index, records))
            worker.outbox.put((index, [(r.left, r.right) for r in records]))
            order.append(worker)
            if len(order) >= 2 * self.workers:
                yield self._answer(order.popleft())
        while order:
            yield self._answer(order.popleft())

    def _answer(
        self, worker: _Worker
    ) -> tuple[int, list[PairRecord], np.ndarray, list[str] | None]:
        """`worker`'s answer to the oldest chunk it owes, or `WorkerDied` as soon as it or any
        other worker that owes a chunk has ended."""
        while True:
            owing = {w.process.sentinel: w for w in self._pool if w.owed}
            ready = wait([worker.results, *owing])
            if worker.results not in ready:
                raise WorkerDied(self._death(owing[cast(int, ready[0])]))
            message = worker.receive()
            if message is None:
                raise WorkerDied(self._death(worker))
            if message[0] == "ready":
                worker.ready = True
                continue
            index, records = worker.owed.popleft()
            if message[0] == "error":
                raise WorkerDied(f"{message[1]} ({self._name(worker)}, {self._doing(worker)})")
            _, answered, scores, labels = message
            assert answered == index, (answered, index)  # a worker answers in order
            return index, records, scores, labels

    def _name(self, worker: _Worker) -> str:
        return f"worker {worker.rank + 1} of {self.workers} (pid {worker.process.pid})"

    def _doing(self, worker: _Worker) -> str:
        if not worker.ready:
            return "loading its model"
        if not worker.owed:
            return "idle"
        records = worker.owed[0][1]
        return f"scoring the pairs on lines {records[0].line}-{records[-1].line} of {self.source}"

    def _death(self, worker: _Worker) -> str:
        """What happened to a worker that ended without answering, in one line (its messages
        not read yet say how far it got)."""
        while worker.results.poll() and (message := worker.receive()) is not None:
            if message[0] == "ready":
                worker.ready = True
            elif message[0] == "done":
                worker.owed.popleft()
        worker.process.join(timeout=2)
        code = worker.process.exitcode
        if code is None:
            how = "closed its pipe"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        cause = " (kill -9, or the out-of-memory killer)" if code == -signal.SIGKILL else ""
        return (
            f"{self._name(worker)} {how}{cause} while {self._doing(worker)}: run the same "
            "command again (a --shard run resumes at its first unwritten chunk), with fewer "
            "--workers if memory ran short (each holds its own copy of the model)"
        )

    def close(self, *, stop: bool = False) -> None:
        """Ends the workers: each finishes and exits, or (`stop`, after an error) is
        terminated at once; a worker that lingers is killed."""
        for worker in self._pool:
            worker.outbox.put(None)
            if stop:
                worker.process.terminate()
        for worker in self._pool:
            worker.process.join(timeout=1 if stop else 10)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.results.close()
        self._pool = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.close(stop=kind is not None)


def _start_worker(context: Any, rank: int, settings: WorkerSettings) -> _Worker:
    """Starts worker `rank` and the thread that feeds it."""
    task_reader, task_writer = context.Pipe(duplex=False)
    result_reader, result_writer = context.Pipe(duplex=False)
    process = context.Process(
        target=_worker_main,
        args=(task_reader, result_writer, settings),
        name=f"attnmatch-score-worker-{rank + 1}",
        daemon=True,
    )
    process.start()
    task_reader.close()  # the worker's ends: a dead worker's pipes then read as closed
    result_writer.close()
    worker = _Worker(rank, process, task_writer, result_reader, queue.SimpleQueue())
    threading.Thread(target=worker.feed, name=process.name + "-feed", daemon=True).start()
    return worker


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
