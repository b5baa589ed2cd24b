"""InsuranceQA v1 (Feng et al., ASRU 2015): answer selection over insurance questions.

Questions from the Insurance Library website, each with one or more ground-truth answers written
by professionals. The V1 release (https://github.com/shuzi/insuranceQA, folder `V1/`) is in a
token-index form; every text is a space-separated list of `idx_N` tokens:

    vocabulary                               idx_N <TAB> word
    answers.label.token_idx                  answer id <TAB> tokens
    question.train.token_idx.label           tokens <TAB> ground-truth answer ids
    question.{dev,test1,test2}.label.token_idx.pool
                                             ground-truth ids <TAB> tokens <TAB> pool of 500 ids

Texts are the words of the tokens joined by single spaces (the release is already tokenised).

    Example(left=question, right=answer, label=1 if the answer is a ground truth else 0,
            group="<split>-<line>", id="<split>-<line>-<answer id>")

dev, test1, test2: one example per candidate of the question's pool, in the pool's order (the
ground truths are inside the pool, as Feng et al. built it; a ground-truth id that is missing
from a pool is not added: the pool is evaluated as released). train: each question's ground-truth
answers, then `train_negatives` answers sampled uniformly without replacement from the whole
answer set (never a ground truth of the question), with a fixed seed, so every load gives the
same pairs. A trainer then picks its k negatives per step from these (`RankingGroupSampler`).

Options:
    train_negatives: negatives stored per train question (default 50). Ignored for dev/test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    open_text,
    tsv_rows,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask

V1 = "V1"
VOCABULARY = f"{V1}/vocabulary"
ANSWERS = f"{V1}/answers.label.token_idx"
TRAIN = f"{V1}/question.train.token_idx.label"
EVAL_SPLITS = ("dev", "test1", "test2")
SPLITS = ("train", *EVAL_SPLITS)
# The questions of each split, and the pool size of the evaluation splits (Feng et al. 2015).
QUESTIONS = {"train": 12_887, "dev": 1_000, "test1": 1_800, "test2": 1_800}
POOL_SIZE = 500
# The tab-separated fields of the answers, train and pool files.
ANSWER_FIELDS = ("answer id", "tokens")
TRAIN_FIELDS = ("question tokens", "answer ids")
POOL_FIELDS = ("ground-truth ids", "question tokens", "pool ids")
NEGATIVE_SEED = 2015

_TOKEN = re.compile(r"idx_\d+")

OFFICIAL = RankingTask(
    name="insuranceqa-v1-pool500",
    require_positive=True,
    require_negative=False,
    metrics=("p@1", "map", "mrr"),
    primary="p@1",
    description=(
        "InsuranceQA v1: each question ranks its released pool of 500 candidate answers; "
        "P@1 (the 'accuracy' of Feng et al. 2015 and Wang et al. 2016) is primary."
    ),
)


def pool_file(split: str) -> str:
    """The spec file name of an evaluation split's pool file, e.g. `V1/question.dev...pool`."""
    return f"{V1}/question.{split}.label.token_idx.pool"


def read_vocabulary(path: str | Path) -> dict[str, str]:
    """Reads `vocabulary`: `{"idx_N": word}`.

    Raises:
        DatasetFormatError: a line is not `idx_N <TAB> word`, or a token is listed twice.
    """
    path = Path(path)
    vocab: dict[str, str] = {}
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            row = line.rstrip("\r\n")
            token, tab, word = row.partition("\t")
            if not tab or not _TOKEN.fullmatch(token) or not word:
                raise DatasetFormatError(f"{path}:{lineno}: expected 'idx_N<TAB>word', got {row!r}")
            if token in vocab:
                raise DatasetFormatError(f"{path}:{lineno}: token {token} is listed twice")
            vocab[token] = word
    return vocab


def _detokenize(tokens: str, vocab: Mapping[str, str], path: Path, lineno: int) -> str:
    words = []
    for token in tokens.split():
        word = vocab.get(token)
        if word is None:
            raise DatasetFormatError(f"{path}:{lineno}: token {token!r} is not in the vocabulary")
        words.append(word)
    if not words:
        raise DatasetFormatError(f"{path}:{lineno}: empty text")
    return " ".join(words)


def _answer_ids(field: str, answers: Mapping[str, str], path: Path, lineno: int) -> list[str]:
    ids = field.split()
    if not ids:
        raise DatasetFormatError(f"{path}:{lineno}: no answer ids")
    for aid in ids:
        if aid not in answers:
            raise DatasetFormatError(
                f"{path}:{lineno}: answer id {aid!r} is not in answers.label.token_idx"
            )
    return ids


def read_answers(path: str | Path, vocab: Mapping[str, str]) -> dict[str, str]:
    """Reads `answers.label.token_idx`: `{answer id: text}`, ids as written (e.g. "1").

    Raises:
        DatasetFormatError: a line is not `id <TAB> tokens`, an id is not a positive integer or is
            listed twice, or a token is not in the vocabulary.
    """
    path = Path(path)
    answers: dict[str, str] = {}
    for lineno, (aid, tokens) in tsv_rows(path, ANSWER_FIELDS):
        if not aid.isdigit():
            raise DatasetFormatError(f"{path}:{lineno}: answer id must be an integer: {aid!r}")
        if aid in answers:
            raise DatasetFormatError(f"{path}:{lineno}: answer id {aid} is listed twice")
        answers[aid] = _detokenize(tokens, vocab, path, lineno)
    return answers


def read_train_questions(
    path: str | Path, vocab: Mapping[str, str], answers: Mapping[str, str]
) -> list[tuple[str, list[str]]]:
    """Reads `question.train.token_idx.label`: `(question text, ground-truth answer ids)` a line."""
    path = Path(path)
    questions = []
    for lineno, (tokens, ids) in tsv_rows(path, TRAIN_FIELDS):
        question = _detokenize(tokens, vocab, path, lineno)
        questions.append((question, _answer_ids(ids, answers, path, lineno)))
    return questions


def read_pool_questions(
    path: str | Path, vocab: Mapping[str, str], answers: Mapping[str, str]
) -> list[tuple[str, list[str], list[str]]]:
    """Reads a `question.<split>.label.token_idx.pool` file.

    Returns:
        `(question text, ground-truth ids, pool ids in file order)` per line.
    """
    path = Path(path)
    questions = []
    for lineno, (truth, tokens, pool) in tsv_rows(path, POOL_FIELDS):
        question = _detokenize(tokens, vocab, path, lineno)
        questions.append(
            (
                question,
                _answer_ids(truth, answers, path, lineno),
                _answer_ids(pool, answers, path, lineno),
            )
        )
    return questions


def sample_negatives(
    positives: list[str], answer_ids: list[str], k: int, rng: np.random.Generator
) -> list[str]:
    """`k` distinct answer ids drawn uniformly from `answer_ids`, none of them in `positives`.

    Args:
        positives: the question's ground-truth ids (all in `answer_ids`).
        answer_ids: every answer id, each once.
        k: how many negatives.
        rng: the generator (the loader passes one seeded generator through every question).

    Raises:
        ValueError: fewer than `k` answers are not positives.
    """
    excluded = set(positives)
    # `answer_ids` are distinct and hold every positive, so this many answers are negatives.
    if len(answer_ids) - len(excluded) < k:
        raise ValueError(
            f"cannot sample {k} negatives from {len(answer_ids)} answers "
            f"({len(excluded)} of them positives); lower train_negatives"
        )
    chosen: dict[str, None] = {}
    while len(chosen) < k:
        # Rejection sampling: a few draws per question instead of a permutation of every answer.
        for i in rng.integers(0, len(answer_ids), size=k - len(chosen) + len(excluded) + 4):
            aid = answer_ids[i]
            if aid not in excluded and aid not in chosen:
                chosen[aid] = None
                if len(chosen) == k:
                    break
    return list(chosen)


def _load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    vocab = read_vocabulary(paths[VOCABULARY])
    answers = read_answers(paths[ANSWERS], vocab)
    examples = []
    if split == "train":
        rng = np.random.default_rng(NEGATIVE_SEED)
        answer_ids = list(answers)
        k = options["train_negatives"]
        for lineno, (question, truth) in enumerate(
            read_train_questions(paths[TRAIN], vocab, answers), start=1
        ):
            group = f"train-{lineno}"
            positives = list(dict.fromkeys(truth))
            negatives = sample_negatives(positives, answer_ids, k, rng)
            for aid, label in [(a, 1) for a in positives] + [(a, 0) for a in negatives]:
                examples.append(Example(question, answers[aid], label, group, f"{group}-{aid}"))
        return examples
    for lineno, (question, truth, pool) in enumerate(
        read_pool_questions(paths[pool_file(split)], vocab, answers), start=1
    ):
        group = f"{split}-{lineno}"
        relevant = set(truth)
        for aid in pool:
            label = 1 if aid in relevant else 0
            examples.append(Example(question, answers[aid], label, group, f"{group}-{aid}"))
    return examples


def _protocol(split: str, options: Mapping[str, Any]) -> RankingTask:
    return OFFICIAL


# The sha256 of the official files is published nowhere we could find, and no copy is available
# here: "" means "no published checksum" (the files cannot be verified).
SPEC = DatasetSpec(
    name="insuranceqa",
    title="InsuranceQA v1",
    task=RankingTask(),
    splits=SPLITS,
    split_files={
        "train": (VOCABULARY, ANSWERS, TRAIN),
        **{s: (VOCABULARY, ANSWERS, pool_file(s)) for s in EVAL_SPLITS},
    },
    files=(
        FileSpec(VOCABULARY, ""),
        FileSpec(ANSWERS, ""),
        FileSpec(TRAIN, ""),
        *(FileSpec(pool_file(s), "") for s in EVAL_SPLITS),
    ),
    folder="insuranceqa",
    license="Research purposes only, provided as is (README of github.com/shuzi/insuranceQA)",
    citation=(
        "Minwei Feng, Bing Xiang, Michael R. Glass, Lidan Wang and Bowen Zhou. Applying Deep "
        "Learning to Answer Selection: A Study and An Open Task. ASRU 2015. "
        "https://arxiv.org/abs/1508.01585"
    ),
    url="https://github.com/shuzi/insuranceQA/archive/refs/heads/master.zip",
    protocol_description=(
        "dev, test1 and test2: every question ranks the 500 candidates of its released pool "
        "(ground truths inside); P@1 (accuracy, primary), MAP and MRR over questions with a "
        "ground truth in the pool. train: each question's ground truths plus train_negatives "
        f"(default 50) answers sampled from the whole answer set with a fixed seed "
        f"({NEGATIVE_SEED}); never a ground truth of the question."
    ),
    options={"train_negatives": (50, 5, 10, 20, 100, 200)},
    loader=_load,
    make_protocol=_protocol,
    split_sizes={s: QUESTIONS[s] * POOL_SIZE for s in EVAL_SPLITS},
    notes=(
        "Texts are stored as idx_N tokens mapped through V1/vocabulary and joined by spaces. "
        "The files sit in V1/ of the release (V2/ is a different version with other files). "
        "Train negatives are sampled, not released: train results depend on train_negatives. "
        "Official sha256 digests are not published: the files cannot be verified."
    ),
)

SPECS = (SPEC,)
