"""`Matcher`: the one object users load, fit, save, score, rank, classify and explain with.

A Matcher is a model with everything needed to feed it text (its inputs: tokenizer, vocabulary
or sub-word encoder) and to read its outputs (its task). In the spirit of sentence-transformers'
`CrossEncoder`.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from attnmatch import model_dir
from attnmatch.data.collate import bucketed_batches, collate
from attnmatch.data.encoding import EncodedPairs, encode_examples
from attnmatch.data.schema import Example
from attnmatch.inputs import Inputs, check_accepts, load_inputs, parse_inputs
from attnmatch.models import (
    build_model,
    get_model_entry,
    input_layer,
    model_config_from_dict,
    resolve_model_config,
)
from attnmatch.tasks import Task
from attnmatch.zero_shot import fit_head

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.data.protocol import Protocol
    from attnmatch.evaluation import Report

# Labelled pairs that calibrate a zero-shot matcher: Examples or (left, right, label) tuples.
Calibration = Sequence[Example] | Sequence[tuple[str, str, int | float]]


@dataclass(frozen=True)
class Ranked:
    """One ranked candidate: its position in the input, its text and its score."""

    index: int
    text: str
    score: float


@dataclass
class Matcher:
    """A text-pair model with its inputs and task.

    Build one with `Matcher.load(path)`, `Matcher.fit(...)`, `Matcher.from_encoder(source)` or
    `Matcher.from_lexical(kind)`.

    Args:
        model: a registered model (`attnmatch.models`).
        model_type: its registered name.
        inputs: how texts become its ids (`attnmatch.inputs`).
        task: what its outputs mean (`attnmatch.tasks.Task`).
        metrics: how it was trained and evaluated (metrics.json).
        path: the directory it was loaded from, if any.
        batch_size: pairs per inference batch.
    """

    model: nn.Module
    model_type: str
    inputs: Inputs
    task: Task
    metrics: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    batch_size: int = 512

    # ----------------------------------------------------------------- construction

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu", batch_size: int = 512) -> Matcher:
        """Loads a model directory strictly: every key known, every weight present and shaped.

        Raises:
            FileNotFoundError: the directory or one of its files is missing (named).
            ValueError: config.json is malformed or of an unknown format (named).
        """
        files = model_dir.read(path)
        header = files.header
        model_type = header["model_type"]
        model = build_model(model_type, model_config_from_dict(model_type, header["config"]))
        if "features" in header:  # exact-match features added to the model's outputs
            from attnmatch.nn.overlap import WithOverlapFeatures

            size = int(header["features"]["overlap"])
            inner_config: Any = model.config
            model = WithOverlapFeatures(model, inner_config.num_outputs, torch.zeros(size))
        model_dir.load_weights(model, files)
        model.to(device).eval()
        return cls(
            model=model,
            model_type=model_type,
            inputs=load_inputs(files.path, header["inputs"]),
            task=Task.from_dict(header["task"]),
            metrics=files.metrics,
            path=files.path,
            batch_size=batch_size,
        )

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
        cosine = cls.untrained("bi_encoder", inputs=config, task=Task(kind="ranking"))
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
        if task.kind == "ranking":
            return cosine
        pairs, labels = _labelled_pairs(calibration or ())
        head = fit_head(
            cosine.score(pairs) if pairs else None,
            labels,
            task,
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
        weights, nothing to save.

        Args:
            task, calibration, metric: as `from_encoder` (a regression without calibration maps
                the overlaps' [0, 1] onto the score range; BM25 has no fixed range and needs
                calibration).
            corpus: background texts that join every scored collection for BM25 and IDF
                statistics; the calibration pairs' right texts are added to it.
        """
        from attnmatch.lexical import LexicalModel, LexicalScorer, TextInputs

        task = _zero_shot_task(task, calibration)
        pairs, labels = _labelled_pairs(calibration or ())
        scorer = LexicalScorer(kind).fit([*corpus, *(right for _, right in pairs)])
        similarities = scorer.score(pairs) if pairs and task.kind != "ranking" else None
        head = fit_head(
            similarities, labels, task, metric=metric, similarity_range=scorer.similarity_range
        )
        return cls(
            model=LexicalModel(scorer, head), model_type=kind, inputs=TextInputs(scorer), task=task
        )

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

    @classmethod
    def fit(
        cls,
        train: Any,
        dev: Any = None,
        *,
        model: str | None = None,
        inputs: str | dict[str, Any] | None = None,
        task: str | None = None,
        epochs: int | None = None,
        seed: int = 1,
        output_dir: str | Path | None = None,
        progress: bool = False,
        **train_options: Any,
    ) -> Matcher:
        """Trains a model and returns it as a Matcher (see `attnmatch.training.fit_matcher`).

        Args:
            train, dev: lists of (left, right, label) tuples, pandas DataFrames with columns
                left, right, label (and optionally group), or a dataset name ("wikiqa"). With
                no dev split nothing is selected: the last epoch is kept.
            model: a preset or model type; default: for your own pairs the fine-tuned MiniLM
                bi-encoder ("minilm_bi_encoder") when the minilm extra is installed, else
                and for a dataset name "amvlstm_q".
            inputs: the model's own by default (GloVe 6B 50d word vectors for most models,
                trigrams for DSSM and CDSSM, MiniLM for the MiniLM presets); or
                "glove-6b-50d", "random" (trained word vectors), "trigrams", "minilm-l6", a
                vectors file or encoder directory, or an `[inputs]` dict (a dict without
                "kind" changes the model's own inputs).
            train, dev, task: with a dataset name as `train`, its dev split and task are
                used; `dev` and `task` are then errors.
            task: "ranking", "classification" or "regression"; inferred when omitted (pairs
                grouped by query with 0/1 labels rank; other integer labels classify; real
                labels regress).
            epochs, seed, **train_options: `[train]` settings (lr, batch_size, loss, ...).
            output_dir: the run folder (a temporary one by default).
        """
        from attnmatch.training.api import fit_matcher

        return fit_matcher(
            train,
            dev,
            model=model,
            inputs=inputs,
            task=task,
            epochs=epochs,
            seed=seed,
            output_dir=output_dir,
            progress=progress,
            train_options=train_options,
        )

    def save(self, path: str | Path, *, metrics: dict[str, Any] | None = None) -> Path:
        """Writes the model directory (atomically) and returns its path.

        Raises:
            ValueError: a lexical matcher (it has no weights; build it again instead).
        """
        if _text_scorer(self.model) is not None:
            self.inputs.save(Path(path))  # raises the one-line reason
        header: dict[str, Any] = {
            "model_type": self.model_type,
            "config": model_dir.config_dict(self.model),
            "task": self.task.to_dict(),
        }
        idf_size = getattr(self.model, "idf_size", None)
        if idf_size is not None:
            header["features"] = {"overlap": idf_size}
        return model_dir.write(
            Path(path),
            header=header,
            model=self.model,
            save_inputs=self.inputs.save,
            metrics=self.metrics if metrics is None else metrics,
        )

    # ----------------------------------------------------------------- inference

    def encode(self, examples: Sequence[Example]) -> EncodedPairs:
        """Examples as id arrays for this model (each distinct text encoded once)."""
        return encode_examples(examples, self.inputs.encode)

    def predict(self, data: EncodedPairs, *, device: str | None = None) -> np.ndarray:
        """Raw outputs for every pair of `data`, in order: (N, num_outputs) float32.

        Batches are length-bucketed and run under `torch.inference_mode`. With no pairs no
        forward pass runs: (0, num_outputs).
        """
        model = self.model
        if _text_scorer(model) is not None:
            raise TypeError(
                f"a {self.model_type} matcher scores texts, not ids: use outputs, score, rank, "
                "evaluate or evaluate_examples"
            )
        if len(data) == 0:
            return np.zeros((0, int(getattr(model.config, "num_outputs", 1))), dtype=np.float32)
        device = device or str(next(model.parameters()).device)
        was_training = model.training
        model.eval()
        outputs: np.ndarray | None = None
        try:
            with torch.inference_mode():
                for idx in bucketed_batches(data, self.batch_size):
                    out = model(collate(data, idx).to(device)).float().cpu().numpy()  # (b, C)
                    if outputs is None:
                        outputs = np.empty((len(data), out.shape[1]), dtype=np.float32)
                    outputs[idx] = out
        finally:
            model.train(was_training)
        assert outputs is not None  # len(data) > 0: at least one batch ran
        return outputs

    def outputs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's raw outputs (scores or logits) for (left, right) pairs: (N, num_outputs)."""
        for i, pair in enumerate(pairs):
            if len(pair) != 2 or not all(isinstance(t, str) for t in pair):
                raise ValueError(f"pair {i} is not a (str, str) tuple: {pair!r}")
        if len(pairs) == 0:
            return np.zeros((0, 1), dtype=np.float32)
        score_texts = _text_scorer(self.model)
        if score_texts is not None:
            return score_texts(pairs)
        return self.predict(self.encode([Example(left=a, right=b, label=0) for a, b in pairs]))

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One score per (left, right) pair, higher = better match.

        Ranking models: their relevance score. Classification models: log P(last class) (e.g.
        "duplicate", "paraphrase"). Regression models: the predicted similarity, on the
        training data's scale (e.g. 0-5 for STS).

        Returns:
            (N,) float32.
        """
        if len(pairs) == 0:
            return np.zeros(0, dtype=np.float32)
        return self.task.scores(torch.from_numpy(self.outputs(pairs))).numpy()

    def rank(self, query: str, candidates: Sequence[str], top_k: int | None = None) -> list[Ranked]:
        """Candidates sorted by score, best first (ties keep the input order).

        Raises:
            ValueError: the query is empty or there are no candidates.
        """
        if not query.strip():
            raise ValueError("the query is empty")
        if not candidates:
            raise ValueError("no candidates to rank")
        scores = self.score([(query, c) for c in candidates])
        order = np.argsort(-scores, kind="stable")
        if top_k is not None:
            order = order[:top_k]
        return [Ranked(int(i), candidates[i], float(scores[i])) for i in order]

    def classify(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The predicted class name of each pair (classification models only)."""
        if self.task.kind != "classification":
            raise ValueError(f"classify needs a classification model; this one is {self.task.kind}")
        if len(pairs) == 0:
            return []
        return self.task.labels(torch.from_numpy(self.outputs(pairs)))

    def explain(self, left: str, right: str) -> dict[str, Any]:
        """The model's attention maps for one pair, with the tokens they refer to.

        Returns:
            {"left_tokens", "right_tokens", and every tensor of the model's `attention(batch)`
            as a numpy array without the batch dimension} (e.g. aMV-LSTM: "left_gate" (L,),
            "interaction" (C, L, R)).

        Raises:
            NotImplementedError: the model has no `attention` method.
        """
        attention = getattr(self.model, "attention", None)
        if attention is None:
            raise NotImplementedError(f"{type(self.model).__name__} exposes no attention maps")
        data = self.encode([Example(left=left, right=right, label=0)])
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            maps = attention(collate(data, np.array([0])).to(device))
        out: dict[str, Any] = {
            "left_tokens": self.inputs.tokens(left),
            "right_tokens": self.inputs.tokens(right),
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
        from attnmatch.data.datasets import load_split, resolve_dataset_ref

        name, split_name, folder = resolve_dataset_ref(dataset, default_split="test")
        if name == "pairs" and "task" not in options:
            options = {**options, "task": self.task.kind}
        split = load_split(name, split_name, data_dir=folder or data_dir, **options)
        if split.protocol is None:
            raise ValueError(f"{name}:{split_name} has no evaluation protocol")
        where = f"{name}:{split_name}"
        protocol: Protocol = split.protocol
        if self.task.kind == "classification" and split.task == "ranking":
            protocol = self._as_classification(split.examples, protocol, where)
        self.task.check_evaluable(protocol.task, where, protocol)
        return self.evaluate_examples(split.examples, protocol)

    def _as_classification(
        self, examples: Sequence[Example], protocol: Protocol, where: str
    ) -> Protocol:
        """A ranking split's relevance labels read as this classifier's classes."""
        from attnmatch.data.protocol import ClassificationProtocol

        n = len(self.task.class_names)
        labels = {float(e.label) for e in examples}
        if not labels <= {float(i) for i in range(n)}:
            raise ValueError(
                f"a classification model of {n} classes cannot be evaluated on {where}: its "
                f"labels {sorted(labels)[:5]} are not class indices 0..{n - 1}; rank with a "
                "ranking model, or evaluate on a classification split"
            )
        metrics = ("accuracy", "f1", "macro_f1") if n == 2 else ("accuracy", "macro_f1")
        return ClassificationProtocol(
            name=f"{protocol.name} read as classification",
            num_classes=n,
            class_names=self.task.class_names,
            metrics=metrics,
            primary=metrics[1],
            description=f"{where}'s relevance labels scored as classes of this classifier",
        )

    def evaluate_examples(self, examples: Sequence[Example], protocol: Protocol) -> Report:
        """The protocol's metrics of this matcher on `examples` (`report_from_outputs`).

        Raises:
            ValueError: no examples, or this model's task cannot be evaluated under `protocol`.
        """
        from attnmatch.evaluation import NO_PAIRS, report_from_outputs

        if not examples:
            raise ValueError(NO_PAIRS)
        self.task.check_evaluable(protocol.task, f"the {protocol.name} examples", protocol)
        data = self.encode(examples)
        score_texts = _text_scorer(self.model)
        if score_texts is None:
            outputs = self.predict(data)
        else:
            outputs = score_texts([(e.left, e.right) for e in examples])
        return report_from_outputs(outputs, data, protocol, task=self.task)


def _text_scorer(model: nn.Module) -> Callable[[Sequence[tuple[str, str]]], np.ndarray] | None:
    """The model's `score_texts(pairs) -> (N, num_outputs)` when it reads texts, not ids (a
    lexical model)."""
    score_texts = getattr(model, "score_texts", None)
    return score_texts if callable(score_texts) else None


def _zero_shot_task(task: Task | None, calibration: Calibration | None) -> Task:
    task = task or Task(kind="ranking")
    if task.kind == "ranking" and calibration is not None:
        raise ValueError(
            "calibration fits a classification threshold or a regression line; a ranking "
            "task needs none"
        )
    return task


def _labelled_pairs(calibration: Calibration) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(left, right) pairs and their labels from Examples or (left, right, label) tuples."""
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
        pairs.append((left, right))
        labels.append(float(label))
    return pairs, np.asarray(labels, dtype=np.float64)


def load_matcher(spec: str | Path) -> Matcher:
    """A saved model directory (`Matcher.load`), an encoder source to use zero-shot
    (`Matcher.from_encoder`: "minilm-l6" or a Hugging Face model directory), or a lexical
    scorer ("bm25", "overlap", "idf_overlap": `Matcher.from_lexical`)."""
    from attnmatch.encoders import ENCODERS
    from attnmatch.lexical import LEXICAL_KINDS

    path = Path(spec)
    if (path / "config.json").is_file() and (path / "model.safetensors").is_file():
        if model_dir.is_model_dir(path):
            return Matcher.load(path)
        return Matcher.from_encoder(str(spec))
    if str(spec) in ENCODERS:
        return Matcher.from_encoder(str(spec))
    if str(spec) in LEXICAL_KINDS:
        return Matcher.from_lexical(str(spec))
    return Matcher.load(path)  # a clear error naming what is missing
