"""Distillation: a student (any registered model, on any inputs) learns a teacher's scores.

A teacher is any `Matcher` (a fine-tuned bi- or cross-encoder, a zero-shot encoder) or the
average of several. It scores each training pair once, and pairs the gold set lacks besides:
for ranking, each query against extra candidates of the split's corpus (BM25's best and some at
random, Hofstaetter et al. 2020 distil from such pools); for pairs, pairs formed across groups
(without a gold label). The targets are cached beside the run (`CACHE_FILE`, safetensors, with
the teacher's identity and the data's hash in its metadata): a changed teacher or data is
refused, never silently reused.

The student then trains with the project's loop (`attnmatch.training.loop`) on
`attnmatch.losses.mixed_loss`: (1 - w) x the gold-label loss + w x the task's distillation loss
(`DISTILL_LOSSES`), one run per weight w, the weight chosen on dev.

A ranking teacher's scores are standardised over the pairs it scores (mean 0, standard
deviation 1) before teachers are averaged and before a student learns from them: ranking is
unchanged by it, and it puts every teacher on the scale of the student's gold-label loss (rank
hinge with margin 1), whatever the teacher's own scale (a calibrated cosine spreads its scores
by ~0.2, a bi-encoder fine-tuned with 20 x cosine by ~3.4; on the latter's raw scores an
aMV-LSTM student distilled on WikiQA reached dev MAP .689, as on labels alone). Regression
teachers keep the labels' scale (the student predicts it) and classification teachers give
probabilities.

Deviations: the extra candidates of a ranking query are taken as negatives by the gold-label loss, as the
"random" and "bm25" negatives of `attnmatch.data.sampling` are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from safetensors import safe_open
from safetensors.numpy import save

from attnmatch.atomic import atomic_directory, write_bytes_atomic, write_text_atomic
from attnmatch.data.datasets import Split
from attnmatch.data.schema import Example
from attnmatch.data.tokenize import Tokenizer
from attnmatch.evaluation import report_from_outputs, report_items
from attnmatch.floors import compute_floors
from attnmatch.matcher import Matcher
from attnmatch.metrics import greater_is_better
from attnmatch.models import input_layer
from attnmatch.models.contract import TextModel
from attnmatch.tasks import (
    GROUP_LOSSES,
    ClassificationTask,
    RankingTask,
    RegressionTask,
    Task,
    for_task,
    same_kind,
)
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.experiment import (
    Distillation,
    Experiment,
    experiment_from_splits,
    experiment_task,
)
from attnmatch.training.loop import selection_metric
from attnmatch.training.run_dir import RunDir
from attnmatch.training.trainer import FLOOR_ENCODER_PAIRS
from attnmatch.training.trainer import train as train_run

CACHE_FILE = "teacher_scores.safetensors"
RESULT_FILE = "distill.json"

# ------------------------------ what each task distils: tables keyed by task class (`for_task`)
# The distillation losses each task accepts (`attnmatch.losses.distill_loss`); the first is the
# default ("auto"). Ranking: Margin-MSE over (positive, negative) pairs (Hofstaetter et al.
# 2020) or listwise KL over a group's candidates; regression: squared error to the teacher's
# score; classification: KL to the teacher's class probabilities (Hinton et al. 2015).
DISTILL_LOSSES: dict[type[Task], tuple[str, ...]] = {
    RankingTask: ("margin_mse", "listwise_kl"),
    ClassificationTask: ("soft_kl",),
    RegressionTask: ("score_mse",),
}
# The student `attnmatch distill` trains when none is named: attention MP-CNN learns a
# similarity score where aMV-LSTM (Q) does not (results/distill.md: STS Benchmark, own pairs).
DISTILL_STUDENTS: dict[type[Task], str] = {
    RankingTask: "amvlstm_q",
    ClassificationTask: "amvlstm_q",
    RegressionTask: "mpcnn_attention",
}
# Why, in one line each, as `attnmatch distill` says when it chooses the default student.
DISTILL_STUDENTS_WHY: dict[type[Task], str] = {
    RankingTask: "aMV-LSTM (Q) ranks best of the students measured (results/distill.md: WikiQA "
    ".714 from the fine-tuned teacher, 44x its pairs/s)",
    ClassificationTask: "aMV-LSTM (Q) is the fast classifier student (results/distill.md: own "
    "paraphrase .625-.688, above both lexical floors)",
    RegressionTask: "attention MP-CNN learns a similarity score where aMV-LSTM (Q) does not "
    "(results/distill.md: STS Benchmark .747 against .163)",
}
# Whether a student of a transformer bi-encoder reads the teacher's static vectors by default
# (`default_inputs`): measured better for ranking only (WikiQA .714 against .654 on GloVe; own
# FAQ .586 against .095), worse on the own paraphrase (.463 against .575) and similarity sets
# (.693 against .788; STS Benchmark .784 against .747): docs/training.md.
STATIC_BY_DEFAULT: dict[type[Task], bool] = {
    RankingTask: True,
    ClassificationTask: False,
    RegressionTask: False,
}
# Whether the extra pairs a teacher labels are each query against more candidates of the
# split (ranking), rather than pairs formed across groups.
LABELS_CANDIDATES: dict[type[Task], bool] = {
    RankingTask: True,
    ClassificationTask: False,
    RegressionTask: False,
}


def _scores(task: Task, outputs: np.ndarray) -> np.ndarray:
    """(N, 1) scores: the relevance score (ranking), the predicted similarity (regression)."""
    return task.decode(outputs).scores.astype(np.float32)[:, None]


def _standardised(task: Task, outputs: np.ndarray) -> np.ndarray:
    """The relevance scores standardised over the N pairs (mean 0, std 1; only centred when
    all are equal): ranking is unchanged, and every teacher speaks on the scale of the
    student's gold loss (module docstring)."""
    scores = _scores(task, outputs)  # (N, 1)
    std = float(scores.std())
    centred = scores - scores.mean()
    return (centred / std if std > 0 else centred).astype(np.float32)


def _probabilities(task: Task, outputs: np.ndarray) -> np.ndarray:
    """The class probabilities of the logits (N, C), its threshold not applied."""
    return torch.softmax(torch.from_numpy(np.ascontiguousarray(outputs)).float(), -1).numpy()


# What a student learns from a teacher's outputs (N, C).
TEACHER_TARGETS: dict[type[Task], Callable[[Task, np.ndarray], np.ndarray]] = {
    RankingTask: _standardised,
    ClassificationTask: _probabilities,
    RegressionTask: _scores,
}


def resolve_distill_loss(task: Task, loss: str) -> str:
    """The distillation loss `loss` names ("auto": the task's first of `DISTILL_LOSSES`);
    ValueError when it cannot distil `task`."""
    accepted = for_task(DISTILL_LOSSES, task)
    resolved = accepted[0] if loss == "auto" else loss
    if resolved not in accepted:
        raise ValueError(
            f"distillation loss {resolved!r} cannot train a {task.kind} task; use one of "
            f"{', '.join(accepted)}"
        )
    return resolved


def task_targets(task: Task, outputs: np.ndarray) -> np.ndarray:
    """What a student of `task` learns from a teacher's outputs (N, C) (`TEACHER_TARGETS`)."""
    return for_task(TEACHER_TARGETS, task)(task, outputs)


# ------------------------------------------------------------------ end of the task tables


@dataclass(frozen=True, kw_only=True)
class DistillConfig:
    """Args:
    loss: the distillation loss ("auto": the task's first of `DISTILL_LOSSES`).
    weights: the weights of the distillation loss tried, one run each; the best on dev is kept
        (0 is the labels alone, 1 the teacher alone).
    bm25_candidates, random_candidates, teacher_candidates: extra candidates per ranking
        query, from the split's corpus (its distinct right-hand texts), that the teacher
        labels: BM25's best, drawn at random, and the nearest by the teacher's own sentence
        vectors (a bi-encoder teacher; none for others).
    cross_pairs: extra pairs formed across groups (classification, regression), as a share
        of the training pairs; the teacher labels them, they have no gold label.
    augmented: pairs made from the training pairs by masking words and keeping n-grams
        (`augmented_pairs`; classification, regression), as a share of the training pairs;
        labelled by the teacher alone.
    seed: of the extra pairs.
    """

    loss: str = "auto"
    weights: tuple[float, ...] = (0.5, 1.0)
    bm25_candidates: int = 5
    random_candidates: int = 5
    teacher_candidates: int = 0
    cross_pairs: float = 0.5
    augmented: float = 0.0
    seed: int = 1

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError("distillation needs at least one weight")
        for w in self.weights:
            if not 0.0 <= w <= 1.0:
                raise ValueError(f"a distillation weight must lie in [0, 1], got {w}")
        extra = (self.bm25_candidates, self.random_candidates, self.teacher_candidates)
        if min(extra) < 0 or min(self.cross_pairs, self.augmented) < 0:
            raise ValueError("extra candidates and cross pairs cannot be negative")


@dataclass
class DistillResult:
    """What `distill` did: the chosen weight's run and every weight's dev metrics."""

    output_dir: Path
    model_dir: Path
    weight: float
    dev: dict[str, float] | None
    test: dict[str, float] | None
    by_weight: dict[str, dict[str, float] | None] = field(default_factory=dict)
    teacher: str = ""
    train_pairs: int = 0
    teacher_seconds: float = 0.0
    floors: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    floors_left_out: dict[str, str] = field(default_factory=dict)
    teacher_metrics: dict[str, dict[str, float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return data | {"output_dir": str(self.output_dir), "model_dir": str(self.model_dir)}


# ----------------------------------------------------------------- teachers


def teacher_identity(teachers: Sequence[Matcher]) -> str:
    """A digest of the teachers: each one's model type, task and every weight's bytes (a
    text model's `fingerprint`)."""
    digest = hashlib.sha256()
    for teacher in teachers:
        digest.update(teacher.model_type.encode())
        digest.update(json.dumps(teacher.task.to_dict(), sort_keys=True).encode())
        if isinstance(teacher.model, TextModel):  # no weights: its head and corpus
            digest.update(teacher.model.fingerprint().encode())
        for name, tensor in sorted(teacher.model.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def data_hash(examples: Sequence[Example]) -> str:
    """A digest of the pairs a teacher scores: texts, labels and groups, in order."""
    digest = hashlib.sha256()
    for ex in examples:
        digest.update(f"{ex.left}\t{ex.right}\t{ex.label!r}\t{ex.group}\n".encode())
    return digest.hexdigest()


def as_teacher(teacher: Matcher, task: Task, calibration: Sequence[Example]) -> Matcher:
    """`teacher` as a teacher of `task`: a cosine bi-encoder (zero-shot) of another task is
    read through a head calibrated on `calibration` (`Matcher.with_cosine_head`).

    Raises:
        ValueError: a teacher of another task that is no cosine bi-encoder.
    """
    if same_kind(teacher.task, task):
        return teacher
    if teacher.model_type == "bi_encoder" and teacher.task.similarity_is_output:
        return Matcher.with_cosine_head(teacher, task=task, calibration=list(calibration))
    raise ValueError(
        f"the teacher is a {teacher.task.kind} model: it cannot teach a {task.kind} student"
    )


TARGETS_RECIPE = "ranking-standardised"  # in the cache's metadata: how targets were made


def teacher_targets(teachers: Sequence[Matcher], examples: Sequence[Example]) -> np.ndarray:
    """The teachers' mean targets (`task_targets`) for `examples`: (N, K) float32, a ranking
    teacher's scores standardised (module docstring).
    A frozen encoder (zero-shot) encodes each distinct text once (`Inputs.enable_cache`), a
    bi-encoder each distinct text once (`Matcher.outputs`)."""
    total: np.ndarray | None = None
    for teacher in teachers:
        if teacher.inputs is not None:
            teacher.inputs.enable_cache(input_layer(teacher.model))
        outputs = teacher.outputs([(ex.left, ex.right) for ex in examples])  # (N, C)
        targets = task_targets(teacher.task, outputs)  # (N, K), ranking's standardised
        total = targets if total is None else total + targets
    assert total is not None
    return (total / len(teachers)).astype(np.float32)


def _cache_mismatch(meta: dict[str, str], identity: str, digest: str) -> str | None:
    """Why a cache with metadata `meta` does not hold these teachers' targets for this data
    (None: it does)."""
    if meta.get("recipe") != TARGETS_RECIPE:
        return (
            f"teacher scores made another way (by an older attnmatch: "
            f"{meta.get('recipe', 'raw scores')}, now {TARGETS_RECIPE})"
        )
    if meta.get("teacher") != identity:
        return (
            f"teacher scores of another teacher ({meta.get('teacher', '?')[:12]}, "
            f"now {identity[:12]})"
        )
    if meta.get("data") != digest:
        return (
            f"teacher scores of other training data ({meta.get('data', '?')[:12]}, "
            f"now {digest[:12]})"
        )
    return None


def cached_targets(
    path: Path, teachers: Sequence[Matcher], examples: Sequence[Example], *, replace: bool = False
) -> tuple[np.ndarray, float]:
    """The teachers' targets for `examples`, read from `path` when it holds them for the same
    teachers and data, else computed and written there. Returns (targets, seconds spent).
    A cache of another teacher, data or recipe is refused, or with `replace` (`--overwrite`)
    scored again and replaced; a matching cache is always reused.

    Raises:
        ValueError: `path` holds the scores of another teacher or other data (one line).
    """
    identity, digest = teacher_identity(teachers), data_hash(examples)
    if path.exists():
        try:
            cached, why = _read_cached_targets(path, identity, digest, len(examples))
        except ValueError:
            if not replace:
                raise
            cached, why = None, "damaged"
        if cached is not None:
            return cached, 0.0
        if not replace:
            raise ValueError(
                f"{path}: {why}; delete it, pass --overwrite to score again, or choose "
                "another output folder"
            )
    start = time.perf_counter()
    targets = teacher_targets(teachers, examples)
    seconds = time.perf_counter() - start
    meta = {"teacher": identity, "data": digest, "rows": str(len(examples))}
    meta["recipe"] = TARGETS_RECIPE
    meta["targets_sha256"] = hashlib.sha256(targets.tobytes()).hexdigest()
    # atomic, and with the umask's mode (safetensors' own writer makes 0600 files)
    write_bytes_atomic(path, save({"targets": targets}, metadata=meta))
    return targets, seconds


def _read_cached_targets(
    path: Path, identity: str, digest: str, rows: int
) -> tuple[np.ndarray | None, str | None]:
    """(the targets, None) when the cache `path` holds these teachers' targets of these
    `rows` examples; (None, why not) when it holds another teacher's or data's.

    Raises:
        ValueError: the file is damaged or differs from its own record (rows, sha256 of the
            targets, a finite float32 (rows, K) table): one line naming it.
    """
    from safetensors import SafetensorError

    again = "delete it or pass --overwrite to score the teachers again"
    try:
        with safe_open(str(path), framework="numpy") as cached:
            meta = cached.metadata() or {}
            why = _cache_mismatch(meta, identity, digest)
            if why is not None:
                return None, why
            if "targets" not in cached.keys():  # noqa: SIM118
                raise ValueError(f"{path}: no 'targets' table: not a teacher-score cache; {again}")
            targets = cached.get_tensor("targets")
    except (SafetensorError, OSError) as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ValueError(f"{path}: damaged teacher-score cache ({reason}); {again}") from e
    shape = "x".join(map(str, targets.shape))
    fits = targets.ndim == 2 and targets.shape[0] == rows and meta.get("rows") == str(rows)
    if targets.dtype != np.float32 or not fits:
        raise ValueError(
            f"{path}: a {targets.dtype} table of shape {shape}, its record says "
            f"{meta.get('rows')} rows of float32 targets ({rows} examples now); {again}"
        )
    recorded = meta.get("targets_sha256")  # caches written before it was recorded lack it
    if recorded is not None and hashlib.sha256(targets.tobytes()).hexdigest() != recorded:
        raise ValueError(
            f"{path}: the targets' sha256 differs from the one recorded when it was written "
            f"(changed since); {again}"
        )
    if not np.isfinite(targets).all():
        raise ValueError(f"{path}: holds targets that are not finite numbers; {again}")
    return targets, None


# ----------------------------------------------------------------- extra pairs


def extra_candidates(
    examples: Sequence[Example], *, bm25: int, random: int, seed: int
) -> list[Example]:
    """For each query with a positive, `bm25` candidates of the split's corpus (its distinct
    right-hand texts) BM25 ranks best and `random` drawn at random, none of them among the
    query's own candidates; labelled 0 (what the gold loss reads; the teacher scores them)."""
    import bm25s  # only here: its import takes a while

    corpus = list(dict.fromkeys(ex.right for ex in examples))
    own: dict[str, set[str]] = {}
    query: dict[str, str] = {}
    for ex in examples:
        if ex.group is None:
            raise ValueError("extra candidates need ranking groups (a query id per pair)")
        own.setdefault(ex.group, set()).add(ex.right)
        query.setdefault(ex.group, ex.left)
    groups = sorted({ex.group for ex in examples if ex.label > 0 and ex.group is not None})
    if not groups or (bm25 == 0 and random == 0):
        return []
    tokenizer = Tokenizer(lowercase=True)
    found: Any = np.zeros((len(groups), 0), dtype=np.int64)
    if bm25:
        index = bm25s.BM25()
        index.index([tokenizer.tokenize(t) or ["<empty>"] for t in corpus], show_progress=False)
        k = min(len(corpus), bm25 + max(len(own[g]) for g in groups))
        tokens = [tokenizer.tokenize(query[g]) or ["<empty>"] for g in groups]
        found, _ = index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    rng = np.random.default_rng(seed)
    extra: list[Example] = []
    for g, row in zip(groups, found, strict=True):
        taken = [corpus[int(i)] for i in row if corpus[int(i)] not in own[g]][:bm25]
        seen = own[g] | set(taken)
        draws = [corpus[int(i)] for i in rng.permutation(len(corpus))[: 4 * random + len(seen)]]
        taken += [t for t in dict.fromkeys(draws) if t not in seen][:random]
        extra += [Example(left=query[g], right=t, label=0, group=g) for t in taken]
    return extra


def nearest_candidates(
    examples: Sequence[Example], teachers: Sequence[Matcher], top: int
) -> list[Example]:
    """For each query with a positive, the `top` candidates of the split's corpus nearest to it
    by the first bi-encoder teacher's sentence vectors (each text encoded once, then one matrix
    product), none among the query's own candidates; labelled 0, as `extra_candidates`."""
    teacher = next((t for t in teachers if t.model_type == "bi_encoder"), None)
    if teacher is None or top == 0:
        return []
    corpus = list(dict.fromkeys(ex.right for ex in examples))
    own: dict[str, set[str]] = {}
    query: dict[str, str] = {}
    for ex in examples:
        own.setdefault(str(ex.group), set()).add(ex.right)
        query.setdefault(str(ex.group), ex.left)
    groups = sorted({str(ex.group) for ex in examples if ex.label > 0})
    vectors = teacher.embed(corpus + [query[g] for g in groups])  # (C + Q, E)
    vectors = torch.nn.functional.normalize(vectors, dim=-1)
    nearest = torch.topk(  # (Q, k)
        vectors[len(corpus) :] @ vectors[: len(corpus)].T,  # (Q, C)
        k=min(len(corpus), top + max(len(own[g]) for g in groups)),
    ).indices
    extra: list[Example] = []
    for g, row in zip(groups, nearest.tolist(), strict=True):
        taken = [corpus[i] for i in row if corpus[i] not in own[g]][:top]
        extra += [Example(left=query[g], right=t, label=0, group=g) for t in taken]
    return extra


def cross_pairs(examples: Sequence[Example], share: float, seed: int) -> list[Example]:
    """`share` x len(examples) pairs of one pair's left text and another group's right text,
    without a gold label (NaN); pairs without a group are their own group."""
    n = int(round(share * len(examples)))
    if n == 0 or len(examples) < 2:
        return []
    rng = np.random.default_rng(seed)
    extra = []
    lefts, rights = rng.integers(0, len(examples), n), rng.integers(0, len(examples), n)
    for i, j in zip(lefts, rights, strict=True):
        a, b = examples[int(i)], examples[int(j)]
        if i == j or (a.group is not None and a.group == b.group):
            continue
        extra.append(Example(left=a.left, right=b.right, label=math.nan))
    return extra


def augmented_pairs(examples: Sequence[Example], share: float, seed: int) -> list[Example]:
    """`share` x len(examples) new pairs, each from a training pair whose texts are altered as
    Tang et al. (2019, arXiv:1903.12136) augment a transfer set: each word masked
    (`[MASK]`) with probability 0.1, then with probability 0.25 only a random n-gram of the text
    kept (n from 1 to 5); without a gold label (NaN), the teacher labels them."""
    n = int(round(share * len(examples)))
    if n == 0 or not examples:
        return []
    rng = np.random.default_rng(seed)

    def alter(text: str) -> str:
        words = [w if rng.random() >= 0.1 else "[MASK]" for w in text.split()]
        if len(words) > 1 and rng.random() < 0.25:
            size = int(rng.integers(1, min(5, len(words)) + 1))
            start = int(rng.integers(0, len(words) - size + 1))
            words = words[start : start + size]
        return " ".join(words)

    chosen = rng.integers(0, len(examples), n)
    return [
        Example(left=alter(examples[i].left), right=alter(examples[i].right), label=math.nan)
        for i in chosen.tolist()
    ]


def training_pairs(
    examples: Sequence[Example],
    task: Task,
    group_loss: bool,
    config: DistillConfig,
    teachers: Sequence[Matcher] = (),
) -> list[Example]:
    """The pairs the teacher labels: the training split (for a group loss, the queries with a
    positive, the only ones it trains on) and the extra pairs (module docstring)."""
    if for_task(LABELS_CANDIDATES, task):
        kept = list(examples)
        if group_loss:
            with_positive = {ex.group for ex in examples if ex.label > 0}
            kept = [ex for ex in examples if ex.group in with_positive]
        kept += nearest_candidates(kept, teachers, config.teacher_candidates)
        extra = extra_candidates(
            kept, bm25=config.bm25_candidates, random=config.random_candidates, seed=config.seed
        )
        return kept + extra
    crossed = cross_pairs(examples, config.cross_pairs, config.seed)
    return [*examples, *crossed, *augmented_pairs(examples, config.augmented, config.seed)]


# ----------------------------------------------------------------- the runs


def distilled_experiment(
    exp: Experiment, pairs: Sequence[Example], targets: np.ndarray, distillation: Distillation
) -> Experiment:
    """`exp` training on `pairs` (the training split and its extra pairs) with the teacher's
    `targets` (N, K) beside their gold labels."""
    encoded = exp.matcher.encode(pairs)
    if len(encoded) != targets.shape[0]:
        raise ValueError(f"{targets.shape[0]} teacher targets for {len(encoded)} training pairs")
    return dataclasses.replace(
        exp, train=dataclasses.replace(encoded, teacher=targets), distill=distillation
    )


def distill_splits(
    config: ExperimentConfig,
    teachers: Sequence[Matcher],
    splits: tuple[Split, Split | None, Split | None],
    output_dir: str | Path,
    options: DistillConfig | None = None,
    *,
    console: Console | None = None,
    progress: bool = False,
    overwrite: bool = False,
    resume: bool = False,
    cache: Path | None = None,
    evaluate_teacher: bool = False,
) -> DistillResult:
    """Distils `teachers` into the student `config` describes on (train, dev, test) `splits`:
    one run per weight under output_dir/weight-<w>/, the best on dev copied to
    output_dir/model and evaluated once on test (output_dir/distill.json, test_items.json).
    The teacher's targets are cached in `cache` (default output_dir/teacher_scores.safetensors;
    runs of several seeds share one). With `resume`, a weight's run that finished is reused
    and one that was interrupted continues from its last checkpoint.

    Raises:
        ValueError: a teacher of another task, or a cache of another teacher or data.
    """
    options = options or DistillConfig()
    console = console or Console(stderr=True)
    out = Path(output_dir)
    cache = cache or out / CACHE_FILE
    train_split, dev, test = splits
    task = experiment_task(train_split, dev)
    teachers = [as_teacher(t, task, train_split.examples) for t in teachers]
    loss = resolve_distill_loss(task, options.loss)
    exp = experiment_from_splits(config, train_split, dev, None)
    pairs = training_pairs(train_split.examples, task, exp.loss in GROUP_LOSSES, options, teachers)
    console.print(
        f"teacher: scoring {len(pairs)} training pairs ({len(pairs) - len(train_split.examples)}"
        f" extra) once, cached in {cache}",
        highlight=False,
        markup=False,
    )
    targets, seconds = cached_targets(cache, teachers, pairs, replace=overwrite)
    _say_labelling(console, len(pairs), seconds)
    runs: dict[float, Any] = {}
    run_config = config
    for i, weight in enumerate(options.weights):
        if i:  # a fresh student; the floors are said once
            run_config = config.with_overrides({"train": {"floors": "none"}})
            exp = experiment_from_splits(run_config, train_split, dev, None)
        console.rule(f"distillation weight {weight:g} ({loss})")
        student = distilled_experiment(exp, pairs, targets, Distillation(loss, weight))
        runs[weight] = _train_student(
            student, out / f"weight-{weight:g}", console, progress, overwrite, resume
        )
    weight = _best_weight(runs, exp)
    chosen = runs[weight]
    model_dir = out / "model"
    with atomic_directory(model_dir) as tmp:
        shutil.copytree(chosen.model_dir, tmp, dirs_exist_ok=True)
    result = DistillResult(
        output_dir=out,
        model_dir=model_dir,
        weight=weight,
        dev=chosen.dev,
        test=_test_once(model_dir, test, out, config) if test is not None else None,
        by_weight={f"{w:g}": r.dev for w, r in runs.items()},
        teacher=teacher_identity(teachers)[:12],
        train_pairs=len(pairs),
        teacher_seconds=round(seconds, 2),
        floors={"dev": (runs[options.weights[0]].floors or {}).get("dev", {})},
    )
    if test is not None:
        result.floors["test"] = _floors(
            test, train_split, exp, config, skipped=result.floors_left_out
        )
    _say_floors(console, result, exp)
    if evaluate_teacher:
        result.teacher_metrics = _teacher_metrics(teachers, dev, test)
    write_text_atomic(out / RESULT_FILE, json.dumps(result.to_dict(), indent=2) + "\n")
    return result


def _train_student(
    student: Experiment,
    path: Path,
    console: Console,
    progress: bool,
    overwrite: bool,
    resume: bool,
) -> Any:
    """Trains one weight's student into `path`; with `resume`, the run that finished there is
    reused (the same experiment: `RunDir.finished`) and an interrupted one continues."""
    if resume and (done := RunDir(path).finished(student.config)) is not None:
        console.print(f"{path}: finished earlier, reusing its result", markup=False)
        return done
    return train_run(
        student.config,
        path,
        experiment=student,
        overwrite=overwrite,
        resume=resume,
        progress=progress,
        console=console,
    )


def _say_labelling(console: Console, pairs: int, seconds: float) -> None:
    """The teacher's labelling cost, in one line (nothing to pay when its cache answered)."""
    if seconds > 0:
        line = f"teacher: labelled {pairs:,} pairs in {seconds:,.1f} s ({pairs / seconds:,.0f} pairs/s)"
    else:
        line = "teacher: the labels were read from its cache (no teacher pass)"
    console.print(line, highlight=False, markup=False)


def _say_floors(console: Console, result: DistillResult, exp: Experiment) -> None:
    """The students under a floor on dev (`under_floors`) and the floors left out."""
    lines = under_floors(result, selection_metric(exp)) if exp.dev is not None else []
    lines += [f"floor left out (test): {f}: {why}" for f, why in result.floors_left_out.items()]
    for line in lines:
        console.print(line, highlight=False, markup=False)


def under_floors(result: DistillResult, metric: str) -> list[str]:
    """A warning line for every weight's student under a floor on dev by `metric` (the kept
    one and the others alike: a floor that beats a student is worth keeping instead)."""
    sign = 1.0 if greater_is_better(metric) else -1.0
    lines = []
    floors = result.floors.get("dev", {})
    for weight, dev in result.by_weight.items():
        if not dev or metric not in dev:
            continue
        beaten = [
            f"{name} {m[metric]:.3f}"
            for name, m in floors.items()
            if metric in m and name != "random" and sign * (m[metric] - dev[metric]) > 0
        ]
        if beaten:
            kept = " (kept)" if f"{result.weight:g}" == weight else ""
            lines.append(
                f"warning: the weight-{weight} student{kept} is under floors on dev "
                f"({metric} {dev[metric]:.3f} against {', '.join(beaten)})"
            )
    return lines


def _floors(
    split: Split,
    train_split: Split,
    exp: Experiment,
    config: ExperimentConfig,
    *,
    skipped: dict[str, str] | None = None,
) -> dict[str, dict[str, float]]:
    """The no-training floors of `split` (`attnmatch.floors`), as train.floors asks; those
    left out go to `skipped` with the reason."""
    kind = config.train.floors
    if kind == "none" or split.protocol is None:
        if skipped is not None and split.protocol is not None:
            skipped["all"] = 'train.floors = "none"'
        return {}
    if kind == "lexical" and skipped is not None:
        skipped["minilm-l6 zero-shot"] = 'train.floors = "lexical"'
    return compute_floors(
        split.examples,
        split.protocol,
        fit_examples=train_split.examples,
        task=exp.matcher.task,
        encoders=("minilm-l6",) if kind == "all" else (),
        max_encoder_pairs=FLOOR_ENCODER_PAIRS,
        skipped=skipped,
    )


def _teacher_metrics(
    teachers: Sequence[Matcher], dev: Split | None, test: Split | None
) -> dict[str, dict[str, float]]:
    """The (first) teacher's dev and test metrics, under the splits' protocols."""
    found = {}
    for name, split in (("dev", dev), ("test", test)):
        if split is not None and split.protocol is not None:
            found[name] = teachers[0].evaluate_examples(split.examples, split.protocol).metrics
    return found


def _best_weight(runs: dict[float, Any], exp: Experiment) -> float:
    """The weight whose run is best on dev (the first weight without a dev split)."""
    if exp.dev is None:
        return next(iter(runs))
    metric = selection_metric(exp)
    sign = 1.0 if greater_is_better(metric) else -1.0
    return max(runs, key=lambda w: sign * runs[w].dev[metric])


def _test_once(
    model_dir: Path, test: Split, out: Path, config: ExperimentConfig
) -> dict[str, float]:
    """The chosen student's test metrics, with its per-item results in out/test_items.json
    (paired tests, `attnmatch.research.claims`)."""
    if test.protocol is None:
        raise ValueError(f"{test.dataset}:{test.split} has no evaluation protocol")
    student = Matcher.load(model_dir, batch_size=config.train.eval_batch_size)
    data = student.encode(test.examples)
    with torch.inference_mode():
        outputs = student.predict(data)
    report = report_from_outputs(outputs, data, test.protocol, task=student.task)
    items = report_items(outputs, data, test.protocol, task=student.task)
    write_text_atomic(out / "test_items.json", json.dumps(items) + "\n")
    return report.metrics


def default_student(splits: tuple[Split, Split | None, Split | None]) -> str:
    """The student preset for the task of (train, dev, test) `splits` when none is named
    (`DISTILL_STUDENTS`)."""
    train_split, dev, _ = splits
    return for_task(DISTILL_STUDENTS, experiment_task(train_split, dev))


def default_student_why(splits: tuple[Split, Split | None, Split | None]) -> str:
    """Why the task's default student is (`DISTILL_STUDENTS_WHY`), in one line."""
    train_split, dev, _ = splits
    return for_task(DISTILL_STUDENTS_WHY, experiment_task(train_split, dev))


def default_inputs(teacher: Matcher, source: str, task: Task) -> str | None:
    """The student's inputs when none are named: the teacher's own token vectors distilled by
    model2vec (`static:SOURCE`, `attnmatch.inputs.static`) when the task reads them by default
    (`STATIC_BY_DEFAULT`), the teacher is a transformer bi-encoder and model2vec is installed;
    None (the student's own inputs) otherwise."""
    import importlib.util

    if not for_task(STATIC_BY_DEFAULT, task):
        return None
    if teacher.model_type != "bi_encoder" or teacher.backend != "torch":
        return None
    if importlib.util.find_spec("model2vec") is None:
        return None
    return f"static:{source}"
