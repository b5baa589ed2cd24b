"""Bulk scoring past one process: `attnmatch score --workers N` and `--shard RANK/WORLD`.

Both keep the chunks of a single process (`scoring.CHUNK_SIZE` pairs, one `predict_pairs`
each), so that every way of scoring a file writes the same bytes:

- `WorkerPool`: N processes on this machine, each with its own copy of the model, fed chunks in
  order with at most 2N in flight (memory bounded by the chunk, whatever the file's length);
  the parent reads, checks and writes. Each worker runs the chosen backend: on ONNX Runtime
  they all load one exported copy (`worker_model`). A worker that ends before it answers (kill -9, the
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
import hashlib
import json
import multiprocessing
import os
import queue
import re
import shutil
import signal
import socket
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from attnmatch.atomic import open_text_atomic, write_text_atomic
from attnmatch.scoring import CHUNK_SIZE, PairRecord, PairsFile, ScoredLayout, score_chunks

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher
    from attnmatch.runtime import ExportedMatcher


@contextmanager
def worker_model(
    spec: str, backend: str, device: str = "cpu", precision: str = "fp32"
) -> Iterator[str]:
    """The model `spec` as the workers (and the parent) load it: `spec` itself, or with backend
    "onnx" on a model that is not exported, a temporary exported copy written once here and
    removed after the block (each worker would otherwise export it again, and every process
    runs the same graphs: the bytes of one process on ONNX Runtime).

    Raises:
        ValueError: ONNX Runtime on another device or precision than the CPU in fp32, or the
            model does not export (as `export_onnx` says).
    """
    from attnmatch.runtime import is_exported

    if backend != "onnx" or is_exported(spec):
        yield spec
        return
    from attnmatch.devices import resolve_device
    from attnmatch.export import export_onnx
    from attnmatch.matcher import load_matcher
    from attnmatch.matcher_load import check_onnx_device

    check_onnx_device(resolve_device(device), precision)
    with tempfile.TemporaryDirectory(prefix="attnmatch-onnx-") as tmp:
        yield str(export_onnx(load_matcher(spec), Path(tmp) / "model"))


class WorkerDied(ValueError):
    """A worker of a `WorkerPool` ended before it answered (kill -9, the out-of-memory killer,
    an error): the message names the worker, its pid and the pairs it held. A ValueError, as
    every error the command line prints as its one line."""


def score_pairs(
    matcher: Matcher | ExportedMatcher, pairs: list[tuple[str, str]]
) -> tuple[np.ndarray, list[str] | None]:
    """What a worker does with one chunk: its scores and predicted labels (a test may pass
    another function to `WorkerPool` to stop a worker midway)."""
    predictions = matcher.predict_pairs(pairs)
    return predictions.scores, predictions.labels


Work = Callable[
    ["Matcher | ExportedMatcher", list[tuple[str, str]]], tuple[np.ndarray, list[str] | None]
]


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
    try:
        matcher = _worker_matcher(settings)
        results.send(("ready",))
        while (task := _next_task(tasks)) is not None:
            index, pairs = task
            results.send(("done", index, *settings.work(matcher, pairs)))
    except Exception as e:  # reported by the parent, which names this worker
        with contextlib.suppress(OSError):
            results.send(("error", _one_line(e)))


def _worker_matcher(settings: WorkerSettings) -> Matcher | ExportedMatcher:
    """A worker's model: an exported directory on `attnmatch.runtime` (no torch imported),
    anything else by `load_matcher`, on `settings.threads` threads for the process's life."""
    from attnmatch.loading import load_served
    from attnmatch.runtime import is_exported

    if not is_exported(settings.spec):
        from attnmatch.devices import set_torch_threads

        set_torch_threads(settings.threads)
    return load_served(
        settings.spec,
        settings.device,
        settings.precision,
        settings.backend,
        threads=settings.threads,
    )


def _process_threads(spec: str) -> int:
    """The threads this process computes on: ONNX Runtime's default for an exported
    directory (`attnmatch.runtime`), else torch's."""
    from attnmatch.runtime import is_exported
    from attnmatch.runtime.graphs import default_threads

    if is_exported(spec):
        return default_threads()
    import torch

    return torch.get_num_threads()


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
        threads = threads or max(1, _process_threads(spec) // workers)
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
            if message[0] == "error":
                raise WorkerDied(f"{message[1]} ({self._name(worker)}, {self._doing(worker)})")
            index, records = worker.owed.popleft()
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


PROGRESS_FORMAT = "attnmatch.score-shard/2"
_SKIPPED_IN_IDENTITY = ("README.md",)  # the model card: words about the model, not the model


def model_identity(spec: str) -> str:
    """What the scores of `spec` depend on, as one string: for a folder, the sha256 of the
    names and bytes of its files (hidden files and the model card aside); for a named encoder,
    its recorded weights digest; for a lexical scorer, its name."""
    path = Path(spec)
    if path.is_dir():
        digest = hashlib.sha256()
        for file in sorted(path.iterdir()):
            if (
                file.is_file()
                and not file.name.startswith(".")
                and file.name not in (_SKIPPED_IN_IDENTITY)
            ):
                digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
                _hash_file(digest, file, None)
        return "sha256:" + digest.hexdigest()
    from attnmatch.encoders import ENCODERS

    if spec in ENCODERS:
        return f"{spec}:sha256:{ENCODERS[spec].weights_sha256}"
    return spec


def _hash_file(digest: Any, path: Path, size: int | None) -> int:
    """Feeds the first `size` bytes of `path` (all when None) to `digest`; returns the number
    of lines among them."""
    lines = 0
    with path.open("rb") as f:
        left = size
        while left is None or left > 0:
            block = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not block:
                break
            digest.update(block)
            lines += block.count(b"\n")
            if left is not None:
                left -= len(block)
    return lines


def fingerprint(pairs_path: str | Path, spec: str, chunk_size: int, fmt: str) -> dict[str, Any]:
    """What the parts of a run depend on: a resumed shard must find the same (the input by
    path, size and time, the model by `model_identity`)."""
    path = Path(pairs_path)
    stat = path.stat()
    return {
        "pairs": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "model": spec,
        "model_identity": model_identity(spec),
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
    matcher: Matcher | ExportedMatcher,
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

    Every part is checked against its progress record (size, lines, sha256) before it is
    resumed or merged.

    Args:
        run: `fingerprint` of this run; parts written for another one are an error.
        scorer: as `scoring.score_chunks`.

    Raises:
        ValueError: the parts folder holds parts of another run (another input, model, chunk
            size or shard count), or a part differs from its record (cut short, changed,
            missing) or a record is damaged; the message names the file and what differs.
    """
    folder = parts_folder(output)
    folder.mkdir(parents=True, exist_ok=True)
    part = _Part(folder, shard)
    progress = _read_progress(part.progress, run, shard)
    digest = part.check(progress, finished=progress["finished"])  # cuts a killed run's tail
    done = int(progress["chunks"])
    layout = ScoredLayout.of(matcher, pairs, output)
    scored = 0
    if not progress["finished"]:

        def keep(index: int) -> bool:
            return index % shard.world == shard.rank and index // shard.world >= done

        with part.path.open("ab") as f:
            for chunk in score_chunks(matcher, pairs, chunk_size, scorer=scorer, keep=keep):
                data = layout.lines(chunk, pairs.source).encode("utf-8")
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
                digest.update(data)
                progress["chunks"] = chunk.index // shard.world + 1
                progress["bytes"] = f.tell()
                progress["lines"] += data.count(b"\n")
                progress["sha256"] = digest.hexdigest()
                write_text_atomic(part.progress, json.dumps(progress))
                scored += len(chunk.records)
        progress["finished"] = True
        write_text_atomic(part.progress, json.dumps(progress))
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


class _Part:
    """The part file of one shard and its progress record, checked against each other."""

    def __init__(self, folder: Path, shard: Shard) -> None:
        self.shard = shard
        self.path = folder / f"part-{shard.name}"
        self.progress = folder / f"progress-{shard.name}.json"

    def _again(self) -> str:
        return (
            f"delete it and {self.progress.name} to score shard {self.shard.rank}/"
            f"{self.shard.world} again"
        )

    def check(self, progress: dict[str, Any], *, finished: bool) -> Any:
        """The sha256 state of the part's recorded bytes, after checking that the part holds
        exactly what `progress` records: its size (a finished part's exactly; an unfinished
        part's tail past the record, which a killed run left, is cut off), line count and
        sha256. A part cut short, changed, replaced or missing is a ValueError naming it."""
        recorded = int(progress["bytes"])
        if not self.path.is_file():
            if recorded:
                raise ValueError(
                    f"{self.path}: missing, {self.progress.name} records {recorded:,} bytes "
                    f"written; delete {self.progress.name} to score shard {self.shard.rank}/"
                    f"{self.shard.world} again"
                )
            self.path.touch()
            return hashlib.sha256()
        size = self.path.stat().st_size
        if size < recorded or (finished and size != recorded):
            how = "cut short" if size < recorded else "grown since it was written"
            raise ValueError(
                f"{self.path}: {size:,} bytes, {self.progress.name} records {recorded:,}: "
                f"{how}; {self._again()}"
            )
        digest = hashlib.sha256()
        lines = _hash_file(digest, self.path, recorded)
        if lines != progress["lines"] or digest.hexdigest() != progress["sha256"]:
            raise ValueError(
                f"{self.path}: its {recorded:,} bytes ({lines:,} lines, sha256 "
                f"{digest.hexdigest()[:12]}) differ from what {self.progress.name} records "
                f"({progress['lines']:,} lines, sha256 {progress['sha256'][:12]}): changed or "
                f"replaced since it was written; {self._again()}"
            )
        if size > recorded:  # what a killed run wrote past its last record
            with self.path.open("r+b") as f:
                f.truncate(recorded)
        return digest


def _fresh_progress(run: dict[str, Any], shard: Shard) -> dict[str, Any]:
    return {
        "format": PROGRESS_FORMAT,
        "run": run,
        "shard": asdict(shard),
        "chunks": 0,
        "lines": 0,
        "bytes": 0,
        "sha256": hashlib.sha256().hexdigest(),
        "finished": False,
    }


def _load_progress(path: Path) -> dict[str, Any]:
    """A progress record, every field checked (a damaged record is a ValueError naming it)."""
    again = "delete it and its part to score that shard again"
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: unreadable ({e}); {again}") from e
    if not isinstance(progress, dict) or progress.get("format") != PROGRESS_FORMAT:
        raise ValueError(
            f"{path}: not a {PROGRESS_FORMAT} progress record (an earlier attnmatch's, or "
            f"damaged); delete the folder {path.parent} to start over"
        )
    fields: dict[str, Callable[[Any], bool]] = {
        "chunks": _count,
        "lines": _count,
        "bytes": _count,
        "sha256": lambda v: isinstance(v, str) and re.fullmatch("[0-9a-f]{64}", v) is not None,
        "finished": lambda v: isinstance(v, bool),
        "run": lambda v: isinstance(v, dict),
        "shard": lambda v: isinstance(v, dict) and all(_count(v.get(k)) for k in ("rank", "world")),
    }
    for name, valid in fields.items():
        if not valid(progress.get(name)):
            raise ValueError(f"{path}: field {name!r} is missing or malformed; {again}")
    return progress


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _read_progress(path: Path, run: dict[str, Any], shard: Shard) -> dict[str, Any]:
    """This shard's progress (fresh when none), after checking that every progress file of the
    folder belongs to this run and shard count (naming what differs)."""
    mine = _fresh_progress(run, shard)
    for other in sorted(path.parent.glob("progress-*.json")):
        progress = _load_progress(other)
        recorded = {**progress["run"], "shards": progress["shard"]["world"]}
        differ = [k for k, v in {**run, "shards": shard.world}.items() if recorded.get(k) != v]
        if differ:
            raise ValueError(
                f"{other}: parts of another run: {_what_differs(differ)} (the recorded "
                f"{', '.join(differ)} {'differs' if len(differ) == 1 else 'differ'} from this "
                f"run's); delete the folder "
                f"{path.parent} to start over"
            )
        if other == path:
            mine = progress
    return mine


_MEANINGS = {
    "pairs": "another input file",
    "size": "the input changed",
    "mtime_ns": "the input changed",
    "model": "another model",
    "model_identity": "the model's files changed",
    "chunk_size": "another --chunk-size",
    "format": "another --format",
    "shards": "another shard count",
}


def _what_differs(keys: list[str]) -> str:
    return "; ".join(dict.fromkeys(_MEANINGS.get(k, k) for k in keys))


def _merge_when_complete(
    folder: Path, output: str | Path, world: int, layout: ScoredLayout, chunk_size: int
) -> tuple[int, bool]:
    """Merges the parts into `output` when all `world` shards are finished and no other shard
    is merging, each part checked against its record first: (the shards finished, whether
    this process merged)."""
    parts = [_Part(folder, Shard(rank, world)) for rank in range(world)]
    records = [_load_progress(p.progress) for p in parts if p.progress.exists()]
    finished = sum(1 for r in records if r["finished"])
    if finished < world:
        return finished, False
    for part, record in zip(parts, records, strict=True):
        part.check(record, finished=True)
    lock = folder / "merging"
    try:
        lock.mkdir()  # atomic: one shard merges
    except FileExistsError:  # another shard merges (or a merge was killed: see `merge_note`)
        return finished, False
    (lock / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n", encoding="utf-8")
    with open_text_atomic(output) as out:
        out.write(layout.header())
        wrote = _interleave(out, [p.path for p in parts], chunk_size)
        expected = sum(int(r["lines"]) for r in records)
        if wrote != expected:
            raise ValueError(
                f"{folder}: the parts gave {wrote:,} lines, their records {expected:,}: a part "
                f"changed while it was merged; {output} was not written, run any shard again"
            )
    shutil.rmtree(folder)
    return finished, True


def _interleave(out: Any, parts: list[Path], chunk_size: int) -> int:
    """Chunk i of the file is chunk i // world of part i % world: `chunk_size` lines from each
    part in turn rebuild the order of a single process. Returns the lines written."""
    files = [p.open("rb") for p in parts]  # lines end in \n only (no \r in a scored record)
    count = 0
    try:
        while True:
            wrote = count
            for f in files:
                for _ in range(chunk_size):
                    line = f.readline()
                    if not line:
                        break
                    out.write(line.decode("utf-8"))
                    count += 1
            if count == wrote:
                return count
    finally:
        for f in files:
            f.close()
