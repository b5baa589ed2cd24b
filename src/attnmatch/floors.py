"""Floors: what a split scores with no training, printed beside a model's result.

- "random": ranking: the mean over 20 seeded random orderings of each query's candidates;
  classification: always the majority class of the fitting pairs; regression: always their
  mean score (Pearson and Spearman are 0 for a constant, MSE is real).
- "overlap", "bm25": lexical scorers (`attnmatch.lexical`).
- "<encoder> zero-shot" (e.g. "minilm-l6 zero-shot"): the cosine of a pretrained encoder's
  mean-pooled sentence vectors (`Matcher.from_encoder`), when the encoder is installed and the
  split has at most `max_encoder_pairs` pairs; each distinct text is embedded once.

A similarity ranks as it is; for classification (2 classes) and regression it is calibrated on
the fitting pairs (a training split, never the evaluated one) exactly as a zero-shot Matcher is
(`attnmatch.zero_shot`: a threshold maximising the protocol's primary metric, or a
least-squares line). A floor that cannot be computed is left out: classification of more than
2 classes by a similarity, classification or BM25 regression without fitting pairs.

Every value comes from `report_from_outputs` under the split's protocol, the path a model's
dev/test metrics take, so the two compare directly.

Example:
    >>> floors = compute_floors(test.examples, test.protocol, fit_examples=train.examples)  # doctest: +SKIP
    >>> print("\\n".join(format_floors(floors, test.protocol.primary)))                   # doctest: +SKIP
    floors (test map): random .095  overlap .412  bm25 .455  minilm-l6 zero-shot .833
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch.nn.functional as F

from attnmatch.data.encoding import EncodedPairs, encode_examples
from attnmatch.data.schema import Example
from attnmatch.evaluation import report_from_outputs
from attnmatch.lexical import LexicalScorer
from attnmatch.matcher import Matcher
from attnmatch.tasks import (
    ClassificationTask,
    RankingTask,
    RegressionTask,
    Task,
    for_task,
    same_kind,
)
from attnmatch.zero_shot import THRESHOLD_METRICS

RANDOM_SEEDS = 20
FLOOR_LEXICAL = ("overlap", "bm25")


def _random_orderings(task: Task, n: int, fit_labels: np.ndarray) -> list[np.ndarray]:
    return [np.random.default_rng(seed).random((n, 1)) for seed in range(RANDOM_SEEDS)]


def _majority_class(task: Any, n: int, fit_labels: np.ndarray) -> list[np.ndarray]:
    if len(fit_labels) == 0:
        return []
    counts = Counter(int(label) for label in fit_labels)
    majority = max(sorted(counts), key=counts.__getitem__)  # ties: the lowest class
    outputs = np.zeros((n, len(task.class_names)), dtype=np.float32)  # (n, C)
    outputs[:, majority] = 1.0
    return [outputs]


def _mean_score(task: Task, n: int, fit_labels: np.ndarray) -> list[np.ndarray]:
    if len(fit_labels) == 0:
        return []
    return [np.full((n, 1), np.mean(fit_labels), dtype=np.float32)]  # (n, 1)


# Keyed by task class (`attnmatch.tasks.for_task`): the "random" floor's outputs on n pairs
# (module docstring; none where it needs fitting pairs and there are none), and whether a
# similarity can be read as the task's output, given labelled fitting pairs or not and the
# similarity's range (None: none).
_RANDOM_OUTPUTS: dict[type[Task], Callable[[Any, int, np.ndarray], list[np.ndarray]]] = {
    RankingTask: _random_orderings,
    ClassificationTask: _majority_class,
    RegressionTask: _mean_score,
}
_READS_SIMILARITY: dict[type[Task], Callable[[Any, bool, object], bool]] = {
    RankingTask: lambda task, fitted, similarity_range: True,
    ClassificationTask: lambda task, fitted, similarity_range: fitted and task.num_classes == 2,
    RegressionTask: lambda task, fitted, similarity_range: fitted or similarity_range is not None,
}


def compute_floors(
    eval_examples: Sequence[Example],
    protocol: Task,
    *,
    fit_examples: Sequence[Example] = (),
    task: Task | None = None,
    lexical: Sequence[str] = FLOOR_LEXICAL,
    encoders: Sequence[str] = ("minilm-l6",),
    max_encoder_pairs: int = 20000,
    max_fit_pairs: int = 5000,
    seed: int = 0,
    skipped: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """The no-training floors of a split (module docstring), by name, in the order random,
    lexical, encoders.

    Args:
        eval_examples: the evaluated split's pairs.
        protocol: its protocol (metrics, kept groups, classes or score range).
        fit_examples: labelled pairs that calibrate the floors (e.g. the training split); a
            seeded sample of `max_fit_pairs` of them is used (a threshold or a line is two
            numbers at most).
        task: the task the floors' heads serve (e.g. the model's, for its class names or
            score range); one of another kind than the protocol's is replaced by
            `Task.of(protocol)`.
        lexical: lexical scorers to run ("overlap", "bm25", "idf_overlap").
        encoders: encoder sources to run zero-shot; one that is not installed is skipped.
        max_encoder_pairs: skip the encoders on larger splits (CPU time).
        seed: the sample of fitting pairs.
        skipped: filled with {floor name: why it was left out}.

    Returns:
        {floor name: the metrics a model's report on this split has}.

    Raises:
        ValueError: no eval examples.
    """
    if not eval_examples:
        raise ValueError("no pairs to compute floors on")
    if task is None or not same_kind(task, protocol):
        task = Task.of(protocol)
    data = encode_examples(eval_examples, _no_ids)
    fit = _sample(fit_examples, max_fit_pairs, seed)
    floors: dict[str, dict[str, float]] = {}
    left_out = skipped if skipped is not None else {}
    fit_labels = np.asarray([float(e.label) for e in fit])
    random_floor = _random_floor(data, protocol, task, fit_labels)
    if random_floor is not None:
        floors["random"] = random_floor
    eval_pairs = [(e.left, e.right) for e in eval_examples]
    fit_pairs = [(e.left, e.right) for e in fit]
    calibrated = bool(fit) and not task.similarity_is_output  # a head fitted on fit's pairs
    for kind in lexical:
        scorer = LexicalScorer(kind)
        if not for_task(_READS_SIMILARITY, task)(task, bool(fit), scorer.similarity_range):
            left_out[kind] = _unreadable(task, bool(fit))
            continue
        if not task.similarity_is_output:
            scorer.fit(right for _, right in fit_pairs)  # one collection for fit and eval
        similarities = scorer.score(eval_pairs)
        fit_similarities = scorer.score(fit_pairs) if calibrated else None
        floors[kind] = _report(
            similarities,
            fit_similarities,
            fit_labels,
            scorer.similarity_range,
            data,
            protocol,
            task,
        )
    encoder_args = (eval_pairs, fit_pairs, fit_labels, data, protocol, task)
    floors |= _encoder_floors(encoders, *encoder_args, max_encoder_pairs, left_out)
    return floors


def _encoder_floors(
    encoders: Sequence[str],
    eval_pairs: list[tuple[str, str]],
    fit_pairs: list[tuple[str, str]],
    fit_labels: np.ndarray,
    data: EncodedPairs,
    protocol: Task,
    task: Task,
    max_encoder_pairs: int,
    left_out: dict[str, str],
) -> dict[str, dict[str, float]]:
    """The "<encoder> zero-shot" floors of `compute_floors`; each left out is said in
    `left_out` with why."""
    floors: dict[str, dict[str, float]] = {}
    fit = bool(fit_pairs)
    calibrated = fit and not task.similarity_is_output
    for source in encoders:
        if len(eval_pairs) > max_encoder_pairs:
            left_out[f"{source} zero-shot"] = (
                f"the split has {len(eval_pairs)} pairs, more than the {max_encoder_pairs} "
                "the encoder floor is computed on (CPU time)"
            )
            continue
        if not for_task(_READS_SIMILARITY, task)(task, fit, (-1, 1)):
            left_out[f"{source} zero-shot"] = _unreadable(task, fit)
            continue
        try:
            matcher = Matcher.from_encoder(source)
        except (FileNotFoundError, ImportError) as e:
            left_out[f"{source} zero-shot"] = f"the encoder is not installed ({e})"
            continue
        similarities = encoder_cosines(matcher, eval_pairs)
        fit_similarities = encoder_cosines(matcher, fit_pairs) if calibrated else None
        floors[f"{source} zero-shot"] = _report(
            similarities, fit_similarities, fit_labels, (-1.0, 1.0), data, protocol, task
        )
    return floors


def _unreadable(task: Task, fitted: bool) -> str:
    """Why a similarity cannot be read as `task`'s output (module docstring)."""
    needs = "2 classes at most" if fitted else "labelled training pairs to calibrate on"
    return f"a similarity read as a {task.kind} output needs {needs}"


def floor_matcher(
    name: str, task: Task, fit_examples: Sequence[Example], *, metric: str = "accuracy"
) -> Matcher:
    """The floor `name` of `compute_floors` as a Matcher, calibrated as the floor was (on
    a seeded sample of `fit_examples`): "<encoder> zero-shot" (a model directory can be
    saved) or a lexical kind (nothing to save).

    Raises:
        ValueError: "random", or a name that is not a floor.
    """
    fit = _sample(fit_examples, 5000, 0) if not task.similarity_is_output else []
    metric = metric if metric in THRESHOLD_METRICS else "accuracy"
    if name.endswith(" zero-shot"):
        source = name.removesuffix(" zero-shot")
        return Matcher.from_encoder(source, task=task, calibration=fit or None, metric=metric)
    if name in ("overlap", "bm25", "idf_overlap"):
        return Matcher.from_lexical(name, task=task, calibration=fit or None, metric=metric)
    raise ValueError(f"{name!r} is not a floor a model can be kept from")


def format_floors(
    floors: dict[str, dict[str, float]], primary: str, *, where: str = "test"
) -> list[str]:
    """Lines to print under a result, e.g. "floors (test map): random .095  bm25 .455"; no
    lines when there are no floors or none reports `primary`."""
    values = [f"{name} {_number(m[primary])}" for name, m in floors.items() if primary in m]
    return [f"floors ({where} {primary}): " + "  ".join(values)] if values else []


def encoder_cosines(matcher: Matcher, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """The cosine of each pair's mean-pooled sentence vectors under a zero-shot bi-encoder
    matcher (`Matcher.from_encoder()`), embedding each distinct text once: (N,) float32.

    Raises:
        TypeError: the matcher's model is not a bi-encoder.
    """
    if not pairs:
        return np.zeros(0, dtype=np.float32)
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    vectors = matcher.embed(texts)  # (T, E)
    index = {t: i for i, t in enumerate(texts)}
    u = vectors[[index[a] for a, _ in pairs]]  # (N, E)
    v = vectors[[index[b] for _, b in pairs]]  # (N, E)
    return F.cosine_similarity(u, v, dim=-1, eps=1e-8).numpy()


def _no_ids(texts: list[str]) -> list[np.ndarray]:
    """Floors read texts, not ids: the encoding only keeps labels and groups."""
    return [np.zeros(0, dtype=np.int64) for _ in texts]


def _sample(examples: Sequence[Example], limit: int, seed: int) -> list[Example]:
    if len(examples) <= limit:
        return list(examples)
    keep = np.sort(np.random.default_rng(seed).choice(len(examples), limit, replace=False))
    return [examples[i] for i in keep]


def _report(
    similarities: np.ndarray,
    fit_similarities: np.ndarray | None,
    fit_labels: np.ndarray,
    similarity_range: tuple[float, float] | None,
    data: EncodedPairs,
    protocol: Task,
    task: Task,
) -> dict[str, float]:
    """The protocol's metrics of `similarities` read through the task's zero-shot head,
    calibrated on the fitting pairs' similarities (None: uncalibrated)."""
    head = task.zero_shot_head(
        fit_similarities,
        None if fit_similarities is None else fit_labels,
        metric=protocol.primary if protocol.primary in THRESHOLD_METRICS else "accuracy",
        similarity_range=similarity_range,
    )
    return report_from_outputs(head.outputs(similarities), data, protocol, task=task).metrics


def _random_floor(
    data: EncodedPairs, protocol: Task, task: Task, fit_labels: np.ndarray
) -> dict[str, float] | None:
    """The "random" floor (`_RANDOM_OUTPUTS`): its runs' metrics averaged; None when it
    needs fitting pairs and there are none."""
    runs = [
        report_from_outputs(outputs, data, protocol, task=task).metrics
        for outputs in for_task(_RANDOM_OUTPUTS, task)(task, len(data), fit_labels)
    ]
    if not runs:
        return None
    return {key: _mean([run[key] for run in runs]) for key in runs[0]}


def _mean(values: list[float]) -> float:
    """The mean; a value equal in every run keeps its type (num_queries stays an int)."""
    return values[0] if len(set(values)) == 1 else float(np.mean(values))


def _number(value: float) -> str:
    """.095, -.012, 1.234: three decimals, no leading zero."""
    text = f"{value:.3f}"
    return text.replace("0.", ".", 1) if text.lstrip("-").startswith("0.") else text
