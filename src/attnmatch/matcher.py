"""`Matcher`: the one object users load, save, score, rank, classify and explain with.

A Matcher is a model with everything needed to feed it text (its inputs: tokenizer, vocabulary
or sub-word encoder) and to read its outputs (its task). In the spirit of sentence-transformers'
`CrossEncoder`. Functions of their packages train one (`attnmatch.training.fit`, `distill`),
export one (`attnmatch.export.export_onnx`) and rerank with one
(`attnmatch.retrieval.SearchIndex.search(..., reranker=matcher)`).

Example:
    >>> from attnmatch import Matcher
    >>> m = Matcher.from_encoder("minilm-l6")                       # doctest: +SKIP
    >>> m.rank("how are glacier caves formed?", ["A glacier cave is ...", "The Alps ..."])  # doctest: +SKIP
    [Ranked(index=0, text='A glacier cave is ...', score=0.61), Ranked(index=1, ...)]
    >>> m.save("my-matcher"); Matcher.load("my-matcher")            # doctest: +SKIP
    >>> Matcher.from_lexical("bm25").rank("caves", ["The Alps", "Caves ..."])  # doctest: +SKIP
    [Ranked(index=1, text='Caves ...', score=0.28), Ranked(index=0, text='The Alps', score=0.0)]

Zero-shot matchers (`from_encoder`, `from_lexical`) give one similarity per pair; for a
classification or regression task it is calibrated on labelled pairs (`attnmatch.zero_shot`).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmatch import model_dir
from attnmatch.answering import (
    Ranked,
    check_finite,
    check_pairs,
    check_ranking,
    classified,
    evaluation_split,
    ranked,
    type_of,
)
from attnmatch.data.collate import bucketed_batches, collate, pad_ids, token_budget_batches
from attnmatch.data.encoding import EncodedPairs, encode_examples
from attnmatch.data.schema import Example
from attnmatch.data.tabular import table_columns
from attnmatch.devices import (
    Precision,
    autocast,
    check_precision,
    module_device,
    resolve_device,
)
from attnmatch.evaluation import NO_PAIRS, Report, report_from_outputs
from attnmatch.export import export_onnx, is_exported
from attnmatch.export.runtime import OnnxModel
from attnmatch.inputs import Inputs, check_accepts, parse_inputs
from attnmatch.matcher_load import (
    check_backend,
    check_batch_size,
    check_exported_backend,
    check_onnx_device,
    read_exported,
    read_model_dir,
    save_text_model,
)
from attnmatch.models import build_model, get_model_entry, input_layer, resolve_model_config
from attnmatch.models.contract import (
    TextModel,
    attention_maps,
    capabilities,
    model_config,
    unwrap,
)
from attnmatch.models.fast import inference_for
from attnmatch.models.pretrained import BiEncoder
from attnmatch.nn.overlap import WithOverlapFeatures
from attnmatch.tasks import Predictions, RankingTask, Task

# Padded tokens per batch of `Matcher.embed` on the CPU (at most `batch_size` texts too): small
# length-sorted batches keep MiniLM's activations in cache; on one thread 512 tokens score 1.36x /
# 1.30x sentence-transformers' pairs/s at 300 / 1,000 WikiQA pairs, 4,096 tokens 1.01x / 1.19x
# (docs/speed.md). On an accelerator, where larger batches pay, `EMBED_TOKENS_ACCELERATOR`.
EMBED_TOKENS = 512
EMBED_TOKENS_ACCELERATOR = 4096

# Labelled pairs that calibrate a zero-shot matcher: Examples or (left, right, label) tuples.
Calibration = Sequence[Example] | Sequence[tuple[str, str, int | float]]


@dataclass
class Matcher:
    """A text-pair model with its inputs and task.

    Build one with `Matcher.load(path)`, `attnmatch.training.fit(...)`,
    `Matcher.from_encoder(source)` or `Matcher.from_lexical(kind)`.

    Args:
        model: a registered model (`attnmatch.models`), or a model that reads the texts
            themselves (`attnmatch.models.contract.TextModel`: a lexical matcher).
        model_type: its registered name (a text model: its kind, e.g. "bm25").
        inputs: how texts become the model's ids (`attnmatch.inputs`); None for a text model.
        task: what its outputs mean (`attnmatch.tasks.Task`).
        metrics: how it was trained and evaluated (metrics.json).
        path: the directory it was loaded from, if any.
        batch_size: pairs per inference batch.
        precision: of inference: "fp32", or "bf16"/"fp16" under `torch.autocast`
            (`attnmatch.devices`); outputs are float32 either way. The device is the model's
            (`device`, `to`).
    """

    model: nn.Module
    model_type: str
    inputs: Inputs | None
    task: Task
    metrics: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    batch_size: int = 512
    precision: Precision = "fp32"
    # The model when it reads texts (decided once, here): it is given texts, never ids.
    _text: TextModel | None = field(init=False, default=None, repr=False, compare=False)
    # A bi-encoder's last ranked candidate set, its vectors and what they were computed with.
    _candidate_vectors: tuple[tuple[Any, ...], torch.Tensor] | None = field(
        init=False, default=None, repr=False, compare=False
    )

    # ----------------------------------------------------------------- construction

    def __post_init__(self) -> None:
        check_batch_size(self.batch_size)
        check_precision(self.precision)
        self._text = self.model if isinstance(self.model, TextModel) else None
        if self._text is not None and self.inputs is not None:
            raise ValueError(
                f"the {self.model_type} model reads the texts themselves: it takes no inputs"
            )

    @property
    def explains(self) -> bool:
        """Whether the model shows attention maps (`explain`)."""
        return self._text is None and capabilities(self.model).explains

    @property
    def num_outputs(self) -> int:
        """C, the model's outputs per pair (`outputs`, `predict`): a score or value, one logit
        per class, or one per integer score level."""
        if self._text is not None:
            return self._text.num_outputs
        return model_config(self.model).num_outputs

    def _inputs(self) -> Inputs:
        """The inputs of a model that reads ids."""
        if self.inputs is None:
            raise TypeError(f"the {self.model_type} matcher has no inputs")
        return self.inputs

    @property
    def device(self) -> torch.device:
        """Where the model runs (the CPU for a lexical matcher, which has no tensors)."""
        return module_device(self.model)

    def to(self, device: str | torch.device, *, precision: str | None = None) -> Matcher:
        """Moves the model to `device` ("cpu", "cuda", "cuda:N", "auto"), in place, and sets
        the inference precision when given; returns self.

        Raises:
            ValueError: `device` is misspelt or not here, or `precision` is unknown or does
                not run on the device (fp16 on the CPU).
        """
        torch_device = resolve_device(device)
        chosen = check_precision(precision or self.precision, torch_device)
        if self.backend == "onnx":
            check_onnx_device(torch_device, chosen)
        self.model.to(torch_device)
        self.precision = chosen
        return self

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        device: str | torch.device = "cpu",
        precision: str = "fp32",
        batch_size: int = 512,
        backend: str = "auto",
    ) -> Matcher:
        """Loads a model directory strictly: every key known and of its type, every weight
        present, shaped, typed and finite, the vocabulary as large as the embedding table.
        Loads an exported directory (`attnmatch.export.export_onnx`) onto ONNX Runtime, with
        no Python class of the model.

        Loading changes no global state (the model is built under a forked random generator).
        The weights load onto any device, wherever they were trained.

        Args:
            device: "cpu", "cuda", "cuda:N" or "auto" (`attnmatch.devices`).
            precision: of inference, "fp32", "bf16" or "fp16" (not on the CPU).
            backend: "torch", "onnx" or "auto": an exported directory runs on ONNX Runtime
                (its only runtime), a model directory on torch; "onnx" on a model directory
                exports it in float32 first (seconds for MiniLM; `export_onnx` once instead,
                docs/speed.md). ONNX runs on the CPU in float32.

        Raises:
            FileNotFoundError: the directory or one of its files is missing (named).
            OSError: a file cannot be read (named).
            ValueError: a file is malformed, of an unknown format, or does not fit the others
                (the file named, with the field or tensor); `device`, `precision`,
                `batch_size` or `backend` is invalid, or the model does not export.
        """
        check_backend(backend)
        if is_exported(path):
            check_exported_backend(path, backend)
            check_onnx_device(resolve_device(device), precision)
            check_batch_size(batch_size)
            return cls(**read_exported(Path(path))._asdict(), batch_size=batch_size)
        torch_device = resolve_device(device)
        chosen = check_precision(precision, torch_device)
        check_batch_size(batch_size)
        parts = read_model_dir(path, torch_device)._asdict()
        matcher = cls(**parts, batch_size=batch_size, precision=chosen)
        return _onnx_copy(matcher) if backend == "onnx" else matcher

    @property
    def backend(self) -> str:
        """What runs the model: "onnx" (ONNX Runtime, an exported model) or "torch"."""
        return "onnx" if isinstance(self.model, OnnxModel) else "torch"

    @classmethod
    def from_encoder(
        cls,
        source: str = "minilm-l6",
        *,
        task: Task | None = None,
        calibration: Calibration | None = None,
        metric: str = "accuracy",
        layer: int = -1,
        max_length: int = 256,
    ) -> Matcher:
        """A zero-shot matcher: the cosine of mean-pooled sentence vectors of a pretrained
        encoder ("minilm-l6" or a Hugging Face / sentence-transformers directory); no training.

        Args:
            task: ranking (default: the cosine), classification of 2 classes (the last class
                above a threshold) or regression (a line onto the score range); see
                `attnmatch.zero_shot`.
            calibration: labelled pairs, Examples or (left, right, label) tuples, that fit the
                threshold or the line (required to classify; without them a regression maps
                cosines [-1, 1] onto [min_score, max_score]).
            metric: what the threshold maximises: "accuracy", "f1" or "macro_f1".

        The head is the model config's scale, shift and cosine_logits (`BiEncoderConfig`), so
        `save` / `load` round-trip it.

        Raises:
            ValueError: a task of more than 2 classes, classification without calibration, or
                calibration for a ranking task.
        """
        from attnmatch.inputs import TransformerInputsConfig

        config = TransformerInputsConfig(source=source, layer=layer, max_length=max_length)
        cosine = cls.untrained("bi_encoder", inputs=config, task=RankingTask())
        return cls.with_cosine_head(cosine, task=task, calibration=calibration, metric=metric)

    @classmethod
    def with_cosine_head(
        cls,
        cosine: Matcher,
        *,
        task: Task | None = None,
        calibration: Calibration | None = None,
        metric: str = "accuracy",
    ) -> Matcher:
        """A bi-encoder ranking by cosine (`cosine`), read as `task` through a calibrated,
        weightless head (`from_encoder` has the arguments)."""
        task = _zero_shot_task(task, calibration)
        if task.similarity_is_output:
            return cosine
        pairs, labels = _labelled_pairs(calibration or (), task)
        head = task.zero_shot_head(
            cosine.score(pairs) if pairs else None,
            labels,
            metric=metric,
            similarity_range=(-1.0, 1.0),
        )
        cosine_config: Any = cosine.model.config  # a BiEncoderConfig
        model_config = replace(
            cosine_config,
            num_outputs=head.num_outputs,
            scale=head.scale,
            shift=head.shift,
            cosine_logits=head.num_outputs == 2,
        )
        with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was
            net = build_model("bi_encoder", model_config)
        net.load_state_dict(cosine.model.state_dict())  # the same encoder, a weightless head
        return cls(model=net.eval(), model_type="bi_encoder", inputs=cosine.inputs, task=task)

    @classmethod
    def from_lexical(
        cls,
        kind: str = "bm25",
        *,
        task: Task | None = None,
        calibration: Calibration | None = None,
        metric: str = "accuracy",
        corpus: Sequence[str] = (),
    ) -> Matcher:
        """A lexical matcher: "bm25", "overlap" or "idf_overlap" (`attnmatch.lexical`); no
        weights: `save` writes its head and corpus (`attnmatch.lexical_dir`).

        Args:
            task, calibration, metric: as `from_encoder` (a regression without calibration maps
                the overlaps' [0, 1] onto the score range; BM25 has no fixed range and needs
                calibration).
            corpus: background texts that join every scored collection for BM25 and IDF
                statistics; the calibration pairs' right texts are added to it.
        """
        from attnmatch.lexical import LexicalModel, LexicalScorer

        if isinstance(corpus, str):
            raise ValueError("corpus must be a list of texts, not one string")
        for i, text in enumerate(corpus):
            if not isinstance(text, str):
                raise ValueError(f"corpus text {i} is not a string: got {type_of(text)}")
        task = _zero_shot_task(task, calibration)
        pairs, labels = _labelled_pairs(calibration or (), task)
        scorer = LexicalScorer(kind).fit([*corpus, *(right for _, right in pairs)])
        similarities = scorer.score(pairs) if pairs else None  # none for ranking (refused)
        head = task.zero_shot_head(
            similarities, labels, metric=metric, similarity_range=scorer.similarity_range
        )
        return cls(model=LexicalModel(scorer, head), model_type=kind, inputs=None, task=task)

    @classmethod
    def untrained(
        cls,
        model: str,
        *,
        inputs: str | dict[str, Any] | Any,
        task: Task,
        loss: str = "auto",
        overrides: dict[str, Any] | None = None,
        train_texts: Sequence[str] = (),
        eval_texts: Sequence[str] = (),
        seed: int = 0,
    ) -> Matcher:
        """A new model (preset or model type) on fitted inputs (`train_texts` fit the
        vocabulary), initialised from pretrained weights where the inputs have them."""
        from attnmatch.inputs import build_inputs
        from attnmatch.models import default_inputs, model_type_of

        config = parse_inputs(inputs, default=default_inputs(model))
        check_accepts(model, get_model_entry(model_type_of(model)).inputs, config)
        built = build_inputs(config)
        built.fit(train_texts, eval_texts, seed=seed)
        model_type, model_config = resolve_model_config(
            model,
            encoder=built.encoder_config(),
            num_outputs=task.num_outputs(task.resolve_loss(loss)),
            overrides=overrides,
        )
        with torch.random.fork_rng(devices=[]):  # the caller's generator is left as it was
            torch.manual_seed(seed)
            net = build_model(model_type, model_config)
        built.init_encoder(input_layer(net))
        return cls(model=net.eval(), model_type=model_type, inputs=built, task=task)

    def save(self, path: str | Path, *, metrics: dict[str, Any] | None = None) -> Path:
        """Writes the model directory (atomically) and returns its path.

        A lexical matcher's folder holds its head and background corpus (`lexical_dir`).
        """
        metrics = self.metrics if metrics is None else metrics
        if self._text is not None:
            return save_text_model(self._text, Path(path), self.task, metrics)
        if self.backend == "onnx":
            raise ValueError(
                "this matcher runs an exported model (ONNX graphs): copy its directory, or save "
                "the torch model it was exported from"
            )
        header: dict[str, Any] = {
            "model_type": self.model_type,
            "config": model_dir.config_dict(self.model),
            "task": self.task.to_dict(),
        }
        if isinstance(self.model, WithOverlapFeatures):
            header["features"] = {"overlap": self.model.idf_size}
        return model_dir.write(
            Path(path),
            header=header,
            model=self.model,
            save_inputs=self._inputs().save,
            metrics=metrics,
        )

    # ----------------------------------------------------------------- inference

    def encode(self, examples: Sequence[Example]) -> EncodedPairs:
        """Examples as id arrays for this model (each distinct text encoded once); a text model
        reads no ids (empty arrays keep the pairs' labels and groups)."""
        return encode_examples(
            examples, _no_ids if self._text is not None else self._inputs().encode
        )

    def predict(self, data: EncodedPairs, *, device: str | None = None) -> np.ndarray:
        """Raw outputs for every pair of `data`, in order: (N, num_outputs) float32.

        Batches are length-bucketed and run under `torch.inference_mode` on `device` (default:
        the model's), autocast to the matcher's `precision`. With no pairs no
        forward pass runs: (0, num_outputs).
        """
        model = self.model
        if self._text is not None:
            raise TypeError(
                f"a {self.model_type} matcher scores texts, not ids: use outputs, score, rank, "
                "evaluate or evaluate_examples"
            )
        if len(data) == 0:
            return np.zeros((0, self.num_outputs), dtype=np.float32)
        run_on = resolve_device(device) if device is not None else self.device
        was_training = model.training
        model.eval()
        outputs: np.ndarray | None = None
        try:
            encoded = _encoded_inference(model, run_on, self.precision)
            if encoded is not None:
                with torch.inference_mode():
                    return encoded(data, self.batch_size).numpy()
            with torch.inference_mode(), autocast(run_on, self.precision):
                for idx in bucketed_batches(data, self.batch_size):
                    out = model(collate(data, idx).to(run_on)).float().cpu().numpy()  # (b, C)
                    if outputs is None:
                        outputs = np.empty((len(data), out.shape[1]), dtype=np.float32)
                    outputs[idx] = out
        finally:
            model.train(was_training)
        assert outputs is not None  # len(data) > 0: at least one batch ran
        return outputs

    def outputs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's raw outputs (scores or logits) for (left, right) pairs: (N, num_outputs)."""
        check_pairs(pairs)
        if len(pairs) == 0:
            return np.zeros((0, 1), dtype=np.float32)
        if self._text is not None:
            return self._finite(self._text.score_texts(pairs), "output")
        if self._embedder() is not None:  # a bi-encoder: each distinct text encoded once
            return self._finite(self._embedded_outputs(pairs), "output")
        data = self.encode([Example(left=a, right=b, label=0) for a, b in pairs])
        return self._finite(self.predict(data), "output")

    def predict_pairs(self, pairs: Sequence[tuple[str, str]]) -> Predictions:
        """What the model predicts for (left, right) pairs, decoded by its task
        (`Task.decode`): scores and, where the task has them, class labels, probabilities
        and relevance. `score`, `rank`, `classify`, `attnmatch score` and the service all
        read it.

        Raises:
            ValueError: pairs that are not (str, str) tuples, or a non-finite output or score
                (naming the pair).
        """
        predictions = self.task.decode(self.outputs(pairs))
        self._finite(predictions.scores, "score")
        return predictions

    def score(
        self, pairs: Iterable[tuple[str, str]] | Any, *, columns: dict[str, str] | None = None
    ) -> np.ndarray:
        """One score per (left, right) pair, higher = better match.

        Ranking models: their relevance score. Classification models: log P(last class) (e.g.
        "duplicate", "paraphrase"). Regression models: the predicted similarity, on the
        training data's scale (e.g. 0-5 for STS). `pairs` may be any iterable (a generator,
        as `attnmatch.training.fit` takes); it is read into a list first.

        Args:
            pairs: (left, right) tuples, or a pandas DataFrame or `datasets.Dataset` with
                columns left and right (other columns ignored).
            columns: the table's names for left and right, e.g. {"left": "question"}.

        Returns:
            (N,) float32.
        """
        table = table_columns(pairs, "pairs", required=("left", "right"), columns=columns)
        if table is not None:
            pairs = list(zip(table["left"], table["right"], strict=True))
        elif not isinstance(pairs, Sequence):
            pairs = list(pairs)
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float32)
        return self.predict_pairs(pairs).scores

    def rank(self, query: str, candidates: Sequence[str], top_k: int | None = None) -> list[Ranked]:
        """Candidates sorted by score, best first (ties keep the input order).

        Raises:
            ValueError: the query is empty or not a string, there are no candidates, one is not
                a string, or top_k is not a positive integer.
        """
        check_ranking(query, candidates, top_k)
        if self._embedder() is not None:  # a bi-encoder: the candidate set is encoded once
            outputs = self._finite(self._compared(query, candidates), "output")
            scores = self._finite(self.task.decode(outputs).scores, "score")
        else:
            scores = self.score([(query, c) for c in candidates])
        return ranked(scores, candidates, top_k)

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """The sentence vectors of a bi-encoder (`models.pretrained.BiEncoder.embed`), each
        distinct text encoded once, in batches of similar lengths of at most `batch_size`
        texts and `EMBED_TOKENS` padded tokens (`EMBED_TOKENS_ACCELERATOR` off the CPU):
        (N, E) float32 on the CPU.

        Raises:
            TypeError: the model is not a bi-encoder.
        """
        model = self._embedder()
        if model is None:
            raise TypeError(f"sentence vectors need a bi_encoder model, got {self.model_type}")
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return torch.zeros(0, model.config.encoder.output_dim)
        ids = self._inputs().encode(distinct)
        lengths = np.array([len(x) for x in ids])
        vectors = torch.empty(len(distinct), model.config.encoder.output_dim)
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode(), autocast(self.device, self.precision):
                budget = EMBED_TOKENS if self.device.type == "cpu" else EMBED_TOKENS_ACCELERATOR
                for idx in token_budget_batches(lengths, self.batch_size, budget):
                    tokens, mask = pad_ids([ids[i] for i in idx])  # (b, T)
                    out = model.embed(tokens.to(self.device), mask.to(self.device))  # (b, E)
                    vectors[torch.from_numpy(idx)] = out.float().cpu()
        finally:
            model.train(was_training)
        index = {t: i for i, t in enumerate(distinct)}
        return vectors[[index[t] for t in texts]]  # (N, E)

    def _embedder(self) -> BiEncoder | None:
        return self.model if isinstance(self.model, BiEncoder) else None

    def _embedded_outputs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """A bi-encoder's outputs for pairs: every distinct text of either side encoded once
        (`embed`), then the head (`BiEncoder.compare`) in batches: (N, num_outputs)."""
        model = self._embedder()
        assert model is not None
        vectors = self.embed([text for pair in pairs for text in pair])  # (2N, E)
        u, v = vectors[0::2], vectors[1::2]  # (N, E) each
        was_training = model.training
        model.eval()
        out: list[torch.Tensor] = []
        try:
            with torch.inference_mode():
                for start in range(0, len(pairs), 4096):
                    a = u[start : start + 4096].to(self.device)  # (b, E)
                    b = v[start : start + 4096].to(self.device)  # (b, E)
                    out.append(model.compare(a, b).float().cpu())  # (b, C)
        finally:
            model.train(was_training)
        return torch.cat(out).numpy()

    def _compared(self, query: str, candidates: Sequence[str]) -> np.ndarray:
        """A bi-encoder's outputs for the query against each candidate, the candidates' vectors
        kept from the previous call when the set, the weights and the device are the same."""
        model = self._embedder()
        assert model is not None
        key = (tuple(candidates), _weights_version(model), str(self.device), self.precision)
        cached = self._candidate_vectors
        if cached is None or cached[0] != key:
            cached = self._candidate_vectors = (key, self.embed(candidates))
        v = cached[1]  # (N, E)
        u = self.embed([query]).expand(v.shape[0], -1)  # (N, E)
        was_training = model.training
        model.eval()
        try:
            with torch.inference_mode():
                return model.compare(u.to(self.device), v.to(self.device)).float().cpu().numpy()
        finally:
            model.train(was_training)

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The predicted class name of each pair (classification models only)."""
        return classified(self.task, pairs, self.predict_pairs)

    def explain(self, left: str, right: str) -> dict[str, Any]:
        """The model's attention maps for one pair, with the tokens they refer to.

        Returns:
            {"left_tokens", "right_tokens", and every tensor of the model's `attention(batch)`
            as a numpy array without the batch dimension} (e.g. aMV-LSTM: "left_gate" (L,),
            "interaction" (C, L, R)).

        Raises:
            NotImplementedError: the model does not explain (`explains`).
            ValueError: left or right is not a string.
        """
        for side, text in (("left", left), ("right", right)):
            if not isinstance(text, str):
                raise ValueError(f"{side} must be a string, got {type_of(text)}")
        if not self.explains:
            raise NotImplementedError(
                f"{type(unwrap(self.model)).__name__} exposes no attention maps"
            )
        inputs = self._inputs()
        data = self.encode([Example(left=left, right=right, label=0)])
        device = self.device
        with torch.inference_mode(), autocast(device, self.precision):
            maps = attention_maps(self.model, collate(data, np.array([0])).to(device))
        out: dict[str, Any] = {
            "left_tokens": inputs.tokens(left),
            "right_tokens": inputs.tokens(right),
        }
        out.update({k: v[0].float().cpu().numpy() for k, v in maps.items()})
        return out

    def evaluate(
        self,
        dataset: str,
        *,
        data_dir: str | Path | None = None,
        **options: Any,
    ) -> Report:
        """Evaluates on a dataset split ("wikiqa:test", "pairs:FOLDER:test"; the split defaults
        to test) under its official protocol, read with this model's task: your own pairs are
        read as the model's task, and a classifier on a ranking split whose labels are its
        classes (0/1 relevance) is scored as a classifier (accuracy, F1), not by MAP.

        Raises:
            ValueError: the split has no protocol, or this model's task cannot be evaluated on
                it (e.g. a regression model on a ranking split).
        """
        examples, protocol = evaluation_split(self.task, dataset, data_dir, options)
        return self.evaluate_examples(examples, protocol)

    def evaluate_examples(self, examples: Sequence[Example], protocol: Task) -> Report:
        """The protocol's metrics of this matcher on `examples` (`report_from_outputs`).

        Raises:
            ValueError: no examples, or this model's task cannot be evaluated under `protocol`.
        """
        if not examples:
            raise ValueError(NO_PAIRS)
        self.task.check_evaluable(protocol, f"the {protocol.name} examples")
        data = self.encode(examples)
        if self._text is None:
            outputs = self.predict(data)
        else:
            outputs = self._text.score_texts([(e.left, e.right) for e in examples])
        return report_from_outputs(self._finite(outputs, "output"), data, protocol, task=self.task)

    def _finite(self, values: np.ndarray, what: str) -> np.ndarray:
        """`values` (one row per pair), when every one is finite; else one ValueError naming
        the first pair: NaN or infinity never reaches a score, a rank or a metric."""
        name = str(self.path) if self.path is not None else f"the {self.model_type} model"
        return check_finite(values, what, name)


def _weights_version(model: nn.Module) -> tuple[int, ...]:
    """The in-place version counters of the model's parameters and buffers: they change when
    an optimiser step or a load writes the weights, so vectors computed before are stale."""
    return tuple(p._version for p in model.parameters()) + tuple(
        b._version for b in model.buffers()
    )


def _no_ids(texts: Sequence[str]) -> list[np.ndarray]:
    """No ids for any text (a text model reads the texts themselves)."""
    return [np.zeros(0, dtype=np.int64) for _ in texts]


def _encoded_inference(
    model: nn.Module, device: torch.device, precision: str
) -> Callable[[EncodedPairs, int], torch.Tensor] | None:
    """The whole-input inference path registered for the model's class (`attnmatch.models.fast`),
    `run(data, batch_size) -> (N, num_outputs)`, where it applies: on the CPU, in float32, with
    the model on the CPU."""
    if device.type != "cpu" or module_device(model).type != "cpu" or precision != "fp32":
        return None
    return inference_for(model)


def _zero_shot_task(task: Task | None, calibration: Calibration | None) -> Task:
    task = task or RankingTask()
    if task.similarity_is_output and calibration is not None:
        raise ValueError(
            "calibration fits a classification threshold or a regression line; a ranking "
            "task needs none"
        )
    return task


def _labelled_pairs(
    calibration: Calibration, task: Task
) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(left, right) pairs and their labels from Examples or (left, right, label) tuples; a
    label must be a finite number, a class index of `task` (0 or 1) or a score in its range."""
    pairs: list[tuple[str, str]] = []
    labels: list[float] = []
    for i, item in enumerate(calibration):
        if isinstance(item, Example):
            left, right, label = item.left, item.right, item.label
        elif isinstance(item, tuple | list) and len(item) == 3:
            left, right, label = item
        else:
            raise ValueError(f"calibration pair {i}: expected an Example or (left, right, label)")
        if not (isinstance(left, str) and isinstance(right, str)):
            raise ValueError(f"calibration pair {i}: left and right must be strings")
        if isinstance(label, bool) or not isinstance(label, int | float | np.number):
            raise ValueError(f"calibration pair {i}: the label must be a number, got {label!r}")
        if not math.isfinite(float(label)):
            raise ValueError(f"calibration pair {i}: the label must be finite, got {label!r}")
        try:
            task.check_label(label)
        except ValueError as e:
            raise ValueError(f"calibration pair {i}: {e}") from None
        pairs.append((left, right))
        labels.append(float(label))
    return pairs, np.asarray(labels, dtype=np.float64)


def load_matcher(
    spec: str | Path,
    *,
    device: str | torch.device = "cpu",
    precision: str = "fp32",
    backend: str = "auto",
) -> Matcher:
    """A saved model directory (`Matcher.load`), an exported one, an encoder source to use
    zero-shot (`Matcher.from_encoder`: "minilm-l6" or a Hugging Face model directory), or a
    lexical scorer ("bm25", "overlap", "idf_overlap": `Matcher.from_lexical`), on `device` in
    `precision` (`attnmatch.devices`; a lexical scorer runs on the CPU whatever the device),
    run by `backend` ("auto", "torch" or "onnx": `Matcher.load`).

    Raises:
        ValueError: `device`, `precision` or `backend` is invalid here (checked before
            anything loads), or what `spec` names cannot be loaded.
    """
    torch_device = resolve_device(device)
    check_precision(precision, torch_device)
    check_backend(backend)
    if backend == "onnx":
        check_onnx_device(torch_device, precision)
    if is_exported(spec):
        return Matcher.load(spec, device=torch_device, precision=precision, backend=backend)
    matcher = _load_matcher(spec).to(torch_device, precision=precision)
    return _onnx_copy(matcher) if backend == "onnx" else matcher


def _onnx_copy(matcher: Matcher) -> Matcher:
    """`matcher` exported in float32 and loaded on ONNX Runtime (from a temporary directory:
    the sessions hold the graphs in memory)."""
    if isinstance(matcher.model, TextModel):
        raise ValueError(f"a {matcher.model_type} matcher has no ONNX form: use backend torch")
    with tempfile.TemporaryDirectory() as tmp:
        exported = export_onnx(matcher, Path(tmp) / "onnx")
        copy = Matcher.load(exported, batch_size=matcher.batch_size)
    copy.path = matcher.path
    return copy


def _load_matcher(spec: str | Path) -> Matcher:
    path = Path(spec)
    if (path / "config.json").is_file() and (path / "model.safetensors").is_file():
        try:
            header = model_dir.read_json(path / "config.json")
        except (OSError, ValueError):
            return Matcher.load(path)  # the error that names config.json
        if isinstance(header, dict) and "format" not in header:  # a Hugging Face config
            return Matcher.from_encoder(str(spec))
        return Matcher.load(path)
    # Imported only here: a saved model (the usual spec) needs neither.
    from attnmatch.encoders import ENCODERS
    from attnmatch.lexical import LEXICAL_KINDS

    if str(spec) in ENCODERS:
        return Matcher.from_encoder(str(spec))
    if str(spec) in LEXICAL_KINDS:
        return Matcher.from_lexical(str(spec))
    return Matcher.load(path)  # a clear error naming what is missing
