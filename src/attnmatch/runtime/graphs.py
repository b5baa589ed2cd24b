"""The graphs of an exported directory under ONNX Runtime, without torch: onnx.json read and
every file checked against it, one session per graph, and the whole-input inference path in
numpy (the torch backend's `attnmatch.export.runtime.OnnxModel` runs the same `OnnxGraphs`).

For the towers form every distinct text of the input is encoded once, in length-sorted batches
of `TEXT_BATCH` texts, then the head graph scores the pairs from the vectors; for the pairs and
packed forms the pairs run in length-bucketed batches (`attnmatch.data.collate.bucketed_batches`),
as `Matcher.predict` runs a torch model, of at most `PAIR_BATCH` pairs; the packed form's pairs
are packed here in numpy (`pack_pair_ids`), as the model packs them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.collate import bucketed_batches, pad_arrays
from attnmatch.data.encoding import EncodedPairs
from attnmatch.strict_json import read_json

FORMAT = "attnmatch.onnx/1"
MANIFEST = "onnx.json"
QUANTIZE = (None, "int8")
PAIR_INPUTS = ("left_ids", "left_mask", "right_ids", "right_mask")
PACKED_INPUTS = ("ids", "mask", "types")
# The graphs of each form (onnx.json's "form").
FORM_GRAPHS = {"towers": {"text", "head"}, "packed": {"packed"}, "pairs": {"pairs"}}
# The inputs of the towers' graphs, all of them.
GRAPH_INPUTS = {"text": ("ids", "mask"), "head": ("u", "v")}
# The graphs that may take some of their inputs (a traced graph drops those it does not read).
SOME_INPUTS = {"pairs": PAIR_INPUTS, "packed": PACKED_INPUTS}
# Texts per batch of the towers' text graph, length-sorted: small batches pad less and keep their
# activations in cache. MiniLM on one thread, 1,500 WikiQA test texts: batches of 8 run 1.12x
# (float32) and 1.13x (int8) faster than batches of 32; 64 are no faster than 32 (docs/speed.md).
TEXT_BATCH = 8
# Pairs per batch of the pairs graph, whatever the matcher's batch size: a batch is padded to its
# longest pair, and smaller length-sorted batches pad less and keep their (B, L, R) tensors in
# cache: the seed models' graphs run 1.7-2.9x faster than in batches of 512 on one thread
# (benchmarks/seed_onnx.py --pair-batches 512,32), the MiniLM cross-encoder's fp32 graph 0.79x ->
# 1.52x torch (benchmarks/onnx_speed.py; docs/speed.md).
PAIR_BATCH = 32
# ONNX Runtime's severity for a session's own log: fatal only. A failing run raises an error
# the project reports in its own line; the session's log would print the same error before it.
SESSION_LOG_SEVERITY = 4


def is_exported(path: str | Path) -> bool:
    """Whether `path` is an exported directory (it has onnx.json)."""
    return (Path(path) / MANIFEST).is_file()


def session(path: Path, threads: int) -> Any:
    """An ONNX Runtime CPU session of `path` on `threads` intra-op threads, all graph
    optimisations on, logging nothing below fatal (this session only)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = SESSION_LOG_SEVERITY
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def default_threads() -> int:
    """Intra-op threads when none are asked for: OMP_NUM_THREADS when set (as torch reads it),
    else one per core this process may run on."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return max(len(os.sched_getaffinity(0)), 1)


def pack_pair_ids(
    left: Sequence[np.ndarray], right: Sequence[np.ndarray], max_length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each pair as one sequence, as `models.pretrained.pack_pairs` packs it (and a tokenizer
    packs a pair): the left text's ids, then the right text's without its first token
    (`[CLS] a [SEP]` + `[CLS] b [SEP]` -> `[CLS] a [SEP] b [SEP]`), cut to `max_length`,
    right-padded with 0 to the longest (at least 1 column).

    Returns:
        ids (B, W) int64, mask (B, W) bool (True on real tokens), types (B, W) int64 (1 on the
        right text's tokens, 0 elsewhere).
    """
    n_left = np.fromiter((len(a) for a in left), dtype=np.int64, count=len(left))
    n_right = np.fromiter((max(len(b) - 1, 0) for b in right), dtype=np.int64, count=len(right))
    total = np.minimum(n_left + n_right, max_length)  # (B,)
    width = max(int(total.max(initial=0)), 1)
    ids = np.zeros((len(left), width), dtype=np.int64)  # (B, W)
    for row, (a, b) in enumerate(zip(left, right, strict=True)):
        seq = np.concatenate([a, b[1:]])[:max_length]
        ids[row, : len(seq)] = seq
    pos = np.arange(width)[None, :]  # (1, W)
    mask = pos < total[:, None]  # (B, W)
    types = (mask & (pos >= n_left[:, None])).astype(np.int64)  # (B, W)
    return ids, mask, types


@dataclass
class OnnxGraphs:
    """The sessions of an exported directory's graphs (`load_graphs`).

    Args:
        form: "towers" (graphs "text" and "head"), "packed" (graph "packed") or "pairs"
            (graph "pairs").
        sessions: one ONNX Runtime session per graph name.
        quantize: None or "int8", as exported.
        max_length: the packed form's cut of a pair (onnx.json's `max_length`); else None.
    """

    form: str
    sessions: dict[str, Any]
    quantize: str | None
    max_length: int | None = None

    def vectors(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The text graph: (B, T) ids and mask -> (B, E)."""
        return self.sessions["text"].run(None, {"ids": ids, "mask": mask})[0]  # (B, E)

    def head(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The head graph: (B, E) vectors of each side -> (B, C)."""
        return self.sessions["head"].run(None, {"u": u, "v": v})[0]  # (B, C)

    def pairs(self, li: np.ndarray, lm: np.ndarray, ri: np.ndarray, rm: np.ndarray) -> np.ndarray:
        """The pairs graph: padded ids and masks of each side -> (B, C)."""
        feed = {"left_ids": li, "left_mask": lm, "right_ids": ri, "right_mask": rm}
        graph = self.sessions["pairs"]
        names = [i.name for i in graph.get_inputs()]  # a traced graph drops unused inputs
        return graph.run(None, {name: feed[name] for name in names})[0]  # (B, C)

    def packed(self, left: Sequence[np.ndarray], right: Sequence[np.ndarray]) -> np.ndarray:
        """The packed graph on pairs of texts' ids (each text's real tokens): -> (B, C)."""
        assert self.max_length is not None  # the packed form's manifest records it
        ids, mask, types = pack_pair_ids(left, right, self.max_length)  # (B, W) each
        feed = {"ids": ids, "mask": mask, "types": types}
        graph = self.sessions["packed"]
        names = [i.name for i in graph.get_inputs()]  # a traced graph drops unused inputs
        return graph.run(None, {name: feed[name] for name in names})[0]  # (B, C)

    def predict(self, data: EncodedPairs, batch_size: int) -> np.ndarray:
        """Every pair of `data` through the graphs (module docstring): (N, C) float32."""
        if self.form == "towers":
            vectors = self._text_vectors(data)  # (texts, E)
            chunks = [
                self.head(
                    vectors[data.left[i : i + batch_size]],
                    vectors[data.right[i : i + batch_size]],
                )  # (b, C)
                for i in range(0, len(data), batch_size)
            ]
            return np.concatenate(chunks)  # (N, C)
        out: np.ndarray | None = None
        for idx in bucketed_batches(data, min(batch_size, PAIR_BATCH)):
            lefts = [data.texts[t] for t in data.left[idx]]
            rights = [data.texts[t] for t in data.right[idx]]
            if self.form == "packed":
                scores = self.packed(lefts, rights)  # (b, C)
            else:
                (li, lm), (ri, rm) = pad_arrays(lefts), pad_arrays(rights)  # (b, L), (b, R)
                scores = self.pairs(li, lm, ri, rm)  # (b, C)
            if out is None:
                out = np.empty((len(data), scores.shape[1]), dtype=np.float32)
            out[idx] = scores
        assert out is not None  # no empty input is run
        return out

    def _text_vectors(self, data: EncodedPairs) -> np.ndarray:
        """The vector of every text the pairs of `data` use, each encoded once, in batches of
        similar lengths; rows of texts no pair uses stay zero. -> (len(data.texts), E)."""
        used = np.unique(np.concatenate([data.left, data.right]))
        order = used[np.argsort(data.text_lengths[used], kind="stable")]
        vectors: np.ndarray | None = None
        for start in range(0, len(order), TEXT_BATCH):
            rows = order[start : start + TEXT_BATCH]
            ids, mask = pad_arrays([data.texts[t] for t in rows])  # (b, T)
            out = self.vectors(ids, mask)  # (b, E)
            if vectors is None:
                vectors = np.zeros((len(data.texts), out.shape[1]), dtype=np.float32)
            vectors[rows] = out
        assert vectors is not None
        return vectors


def load_graphs(path: str | Path, num_outputs: int | None, threads: int) -> OnnxGraphs:
    """The graphs of an exported directory under ONNX Runtime on `threads` intra-op threads,
    each checked: the graphs onnx.json names, each of its kind, fitting each other and
    config.json's `num_outputs`.

    Raises:
        FileNotFoundError: onnx.json or a graph file is missing (named).
        ValueError: onnx.json is malformed (the field named) or a graph cannot be read.
    """
    path = Path(path)
    manifest_file = path / MANIFEST
    manifest = read_json(manifest_file)
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ValueError(f"{manifest_file}: not an {FORMAT} manifest (field 'format')")
    form, graphs, quantize = manifest.get("form"), manifest.get("graphs"), manifest.get("quantize")
    expected = FORM_GRAPHS.get(str(form))
    if expected is None:
        raise ValueError(
            f"{manifest_file}: field 'form' must be 'towers', 'packed' or 'pairs', got {form!r}"
        )
    if not isinstance(graphs, dict) or set(graphs) != expected:
        raise ValueError(f"{manifest_file}: field 'graphs' must name the graphs {sorted(expected)}")
    if quantize not in QUANTIZE:
        raise ValueError(f"{manifest_file}: field 'quantize' must be null or 'int8'")
    max_length = manifest.get("max_length")
    if form == "packed" and not (
        isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 2
    ):
        raise ValueError(f"{manifest_file}: field 'max_length' must be an integer >= 2")
    sessions = {}
    for name, file in graphs.items():
        graph_file = path / str(file)
        if not isinstance(file, str) or Path(file).name != file or not graph_file.is_file():
            raise FileNotFoundError(
                f"{graph_file}: the {name} graph named in {manifest_file} is missing"
            )
        try:
            sessions[name] = session(graph_file, threads)
        except Exception as e:  # onnxruntime raises its own exception types
            reason = " ".join(str(e).split())[:300]
            raise ValueError(
                f"{graph_file}: not an ONNX graph ONNX Runtime can run ({reason})"
            ) from e
        _check_graph(graph_file, name, sessions[name])
    _check_sizes(path, graphs, sessions, num_outputs)
    return OnnxGraphs(str(form), sessions, quantize, max_length if form == "packed" else None)


def _check_graph(file: Path, name: str, graph: Any) -> None:
    """The graph `name` of an export takes that graph's inputs and gives one output; a graph
    of another kind (another file copied over it) is a ValueError naming the file."""
    got = tuple(i.name for i in graph.get_inputs())
    wanted = GRAPH_INPUTS.get(name)
    some = SOME_INPUTS.get(name, ())
    fits = got == wanted if wanted else bool(got) and set(got) <= set(some)
    if not fits or len(graph.get_outputs()) != 1:
        raise ValueError(
            f"{file}: not the {name} graph of an export (inputs {list(got)}, "
            f"{len(graph.get_outputs())} outputs; the {name} graph takes "
            f"{list(wanted or some)} and gives one output): export the model again"
        )


def _check_sizes(
    path: Path, files: dict[str, Any], graphs: dict[str, Any], num_outputs: int | None
) -> None:
    """The graphs fit each other and config.json: the text graph's vectors are as wide as the
    head reads, and the scoring graph gives config.json's `num_outputs` columns (where the
    graphs fix those sizes)."""
    last = {name: _last_dims(graph) for name, graph in graphs.items()}
    if "text" in last and "head" in last:
        width, reads = last["text"][1], last["head"][0]
        if isinstance(width, int) and isinstance(reads, int) and width != reads:
            raise ValueError(
                f"{path / files['head']}: reads vectors of {reads}, the text graph "
                f"{files['text']} gives {width}: graphs of two exports; export the model again"
            )
    scorer = "head" if "head" in last else next(iter(last))  # the graph giving the outputs
    columns = last[scorer][1]
    if num_outputs is not None and isinstance(columns, int) and columns != num_outputs:
        raise ValueError(
            f"{path / files[scorer]}: gives {columns} outputs, {path / 'config.json'} says "
            f"{num_outputs}: files of two exports; export the model again"
        )


def _last_dims(graph: Any) -> tuple[object, object]:
    """The last dimension of a graph's first input and of its output (an int, or a name)."""
    first, out = graph.get_inputs()[0].shape, graph.get_outputs()[0].shape
    return (first[-1] if first else None), (out[-1] if out else None)


def check_exported_files(path: str | Path) -> None:
    """Checks every file onnx.json records (its `files`: exports since it was added) against
    its record: the size, then the sha256. A file changed, replaced or removed since the
    export is refused, naming it; an export without the record is read as it is.

    Raises:
        FileNotFoundError: a recorded file is missing (named).
        ValueError: a file differs from its record, or the record is malformed (named).
    """
    path = Path(path)
    manifest_file = path / MANIFEST
    manifest = read_json(manifest_file)
    records = manifest.get("files") if isinstance(manifest, dict) else None
    if records is None:
        return
    again = f"export the model again (attnmatch export MODEL --format onnx --output {path})"
    if not isinstance(records, dict) or not all(
        _is_file_record(name, record) for name, record in records.items()
    ):
        raise ValueError(f"{manifest_file}: field 'files' is malformed; {again}")
    for name, record in records.items():
        file = path / name
        if not file.is_file():
            raise FileNotFoundError(f"{file}: missing ({MANIFEST} records it); {again}")
        size = file.stat().st_size
        if size != record["bytes"]:
            raise ValueError(
                f"{file}: {size:,} bytes, {MANIFEST} records {record['bytes']:,}: changed since "
                f"it was exported; {again}"
            )
        if sha256(file) != record["sha256"]:
            raise ValueError(
                f"{file}: its sha256 differs from the one {MANIFEST} records (same size): "
                f"changed since it was exported; {again}"
            )


def _is_file_record(name: object, record: object) -> bool:
    """A `files` entry of onnx.json: a plain file name (no folder) and its size and sha256."""
    if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
        return False
    if not isinstance(record, dict) or set(record) != {"bytes", "sha256"}:
        return False
    size, digest = record["bytes"], record["sha256"]
    return (
        isinstance(size, int)
        and not isinstance(size, bool)
        and size >= 0
        and isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
    )


def recorded_files(folder: Path) -> dict[str, dict[str, Any]]:
    """The size and sha256 of every file of an export being written (onnx.json aside)."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != MANIFEST
    }


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
