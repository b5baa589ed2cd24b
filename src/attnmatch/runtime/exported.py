"""`ExportedMatcher`: an exported directory served by ONNX Runtime alone, with no torch.

It answers as `Matcher.load` of the same directory does (the same `score`, `rank`, `classify`
and `predict_pairs`, the same numbers: the same inputs encode the texts, the same
`OnnxGraphs.predict` runs the graphs, the same `Task.decode` reads the outputs). Deviations
from `Matcher`: the model config is not rebuilt (torch's model registry): of it only
`num_outputs` and the encoder's `kind` and `vocab_size` are read and checked; there are no
attention maps (`explain` refuses in one line), no `embed` or `to`; it runs on the CPU in
float32.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from attnmatch.answering import (
    Ranked,
    check_finite,
    check_pairs,
    check_ranking,
    classified,
    evaluation_split,
    ranked,
)
from attnmatch.data.encoding import EncodedPairs, encode_examples
from attnmatch.data.schema import Example
from attnmatch.evaluation import Report, report_from_outputs
from attnmatch.inputs import Inputs, load_inputs
from attnmatch.model_header import check_task_fits, load_task, read_exported_header, read_metrics
from attnmatch.runtime.graphs import OnnxGraphs, check_exported_files, default_threads, load_graphs
from attnmatch.tasks import Predictions, Task


@dataclass
class ExportedMatcher:
    """An exported directory on ONNX Runtime (module docstring); build one with
    `attnmatch.runtime.load`.

    Args:
        graphs: the directory's graphs under ONNX Runtime.
        model_type: the registered name of the exported model.
        inputs: how texts become the graphs' ids.
        task: what the outputs mean.
        metrics: how it was trained and evaluated (metrics.json).
        path: the exported directory.
        batch_size: pairs per inference batch.
        num_outputs: C, the outputs per pair (config.json's `num_outputs`).
    """

    graphs: OnnxGraphs
    model_type: str
    inputs: Inputs
    task: Task
    metrics: dict[str, Any]
    path: Path
    batch_size: int = 512
    num_outputs: int = 1

    backend: ClassVar[str] = "onnx"
    explains: ClassVar[bool] = False  # no attention maps in the graphs

    def encode(self, examples: Sequence[Example]) -> EncodedPairs:
        """Examples as id arrays (each distinct text encoded once)."""
        return encode_examples(examples, self.inputs.encode)

    def predict(self, data: EncodedPairs) -> np.ndarray:
        """Raw outputs for every pair of `data`, in order: (N, num_outputs) float32."""
        if len(data) == 0:
            return np.zeros((0, self.num_outputs), dtype=np.float32)
        return self.graphs.predict(data, self.batch_size)

    def outputs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The raw outputs (scores or logits) for (left, right) pairs: (N, num_outputs)."""
        check_pairs(pairs)
        if len(pairs) == 0:
            return np.zeros((0, 1), dtype=np.float32)
        data = self.encode([Example(left=a, right=b, label=0) for a, b in pairs])
        return check_finite(self.predict(data), "output", str(self.path))

    def predict_pairs(self, pairs: Sequence[tuple[str, str]]) -> Predictions:
        """What the model predicts for the pairs, decoded by its task (`Matcher.predict_pairs`)."""
        predictions = self.task.decode(self.outputs(pairs))
        check_finite(predictions.scores, "score", str(self.path))
        return predictions

    def score(self, pairs: Iterable[tuple[str, str]]) -> np.ndarray:
        """One score per (left, right) pair, higher = better match (`Matcher.score`, without
        its table columns): (N,) float32."""
        pairs = pairs if isinstance(pairs, Sequence) else list(pairs)
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float32)
        return self.predict_pairs(pairs).scores

    def rank(self, query: str, candidates: Sequence[str], top_k: int | None = None) -> list[Ranked]:
        """Candidates sorted by score, best first (ties keep the input order)."""
        check_ranking(query, candidates, top_k)
        return ranked(self.score([(query, c) for c in candidates]), candidates, top_k)

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The predicted class name of each pair (classification models only)."""
        return classified(self.task, pairs, self.predict_pairs)

    def evaluate(
        self, dataset: str, *, data_dir: str | Path | None = None, **options: Any
    ) -> Report:
        """Evaluates on a dataset split under its official protocol (`Matcher.evaluate`)."""
        examples, protocol = evaluation_split(self.task, dataset, data_dir, options)
        return self.evaluate_examples(examples, protocol)

    def evaluate_examples(self, examples: Sequence[Example], protocol: Task) -> Report:
        """The protocol's metrics of this model on `examples` (`Matcher.evaluate_examples`).

        Raises:
            ValueError: no examples, or this model's task cannot be evaluated under `protocol`.
        """
        self.task.check_evaluable(protocol, f"the {protocol.name} examples")
        data = self.encode(examples)
        outputs = check_finite(self.predict(data), "output", str(self.path))
        return report_from_outputs(outputs, data, protocol, task=self.task)

    def explain(self, left: str, right: str) -> dict[str, Any]:
        """Refused: an exported model has no attention maps."""
        raise ValueError(
            f"{self.path} is an exported model: its ONNX graphs have no attention maps to "
            "explain (explain the model directory it was exported from, on torch)"
        )


def load(path: str | Path, *, batch_size: int = 512, threads: int | None = None) -> ExportedMatcher:
    """An exported directory (`attnmatch export MODEL --format onnx`) on ONNX Runtime, with no
    torch: every file checked first against what onnx.json recorded at export, then
    config.json's task and inputs, and the graphs against both.

    Args:
        batch_size: pairs per inference batch.
        threads: ONNX Runtime's intra-op threads (default: OMP_NUM_THREADS, else one per core).

    Raises:
        FileNotFoundError: the directory or one of its files is missing (named).
        ValueError: a file is malformed or does not fit the others (the file named), or
            `batch_size` is not a positive integer.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    path = Path(path)
    check_exported_files(path)
    header = read_exported_header(path)
    config_file = path / "config.json"
    num_outputs, kind, vocab_size = _model_sizes(config_file, header["config"])
    task = load_task(config_file, header["task"])
    check_task_fits(config_file, task, num_outputs)
    graphs = load_graphs(path, num_outputs, threads or default_threads())
    try:
        inputs = load_inputs(path, header["inputs"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{config_file}: inputs: {' '.join(str(e).split())}") from e
    if kind != inputs.kind:
        raise ValueError(
            f"{config_file}: the inputs are {inputs.kind} but the model reads {kind} "
            "(config.encoder.kind): the files do not belong together"
        )
    inputs.check_fits(vocab_size, path)
    return ExportedMatcher(
        graphs,
        header["model_type"],
        inputs,
        task,
        read_metrics(path),
        path,
        batch_size,
        num_outputs,
    )


def check_exported_backend(path: str | Path, backend: str) -> None:
    """An exported directory runs on ONNX Runtime alone: backend "auto" or "onnx"."""
    if backend == "torch":
        raise ValueError(
            f"{path} is an exported directory (ONNX graphs, no torch weights): load it with "
            "backend 'onnx' or 'auto', or load the model directory it was exported from"
        )


def check_cpu_fp32(device: str, precision: str) -> None:
    """An exported model runs on the CPU in float32 (ONNX Runtime's CPU provider): `device`
    "cpu" or "auto" (no CUDA for ONNX Runtime here), `precision` "fp32"."""
    if device not in ("cpu", "auto") or precision != "fp32":
        raise ValueError(
            f"an ONNX model runs on the CPU in fp32 (got device {device}, precision "
            f"{precision}): use backend torch on the model directory it was exported from for "
            "a GPU or another precision"
        )


def _model_sizes(config_file: Path, config: dict[str, Any]) -> tuple[int, str, int]:
    """(num_outputs, encoder kind, encoder vocab_size) of config.json's model config."""
    encoder = config.get("encoder")
    encoder = encoder if isinstance(encoder, dict) else {}
    num_outputs, kind = config.get("num_outputs", 1), encoder.get("kind")
    vocab_size = encoder.get("vocab_size")
    for name, value in (("num_outputs", num_outputs), ("encoder.vocab_size", vocab_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{config_file}: field 'config.{name}' must be an integer >= 1")
    if not isinstance(kind, str):
        raise ValueError(f"{config_file}: field 'config.encoder.kind' must be a string")
    return int(num_outputs), kind, int(vocab_size)  # type: ignore[arg-type]  # checked above
