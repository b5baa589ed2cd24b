"""WikiQA (Yang, Yih and Meek, EMNLP 2015): answer sentence selection over Wikipedia summaries.

Each row pairs a Bing query with one sentence of the summary of a Wikipedia page it links to,
labelled 1 if the sentence answers the question. We read the official split files
`WikiQA-{train,dev,test}.tsv` (the bundled copy is gzipped, the originals work too):

    Example(left=Question, right=Sentence, label=Label, group=QuestionID, id=SentenceID)

Options:
    train_questions: "positive" (default) keeps only the train questions with at least one
        correct answer (873 questions, 8,672 pairs), as the answer-selection literature does;
        "all" keeps all 2,118. Ignored for dev and test, which always keep every pair.
    filtered: False (default) evaluates with the official protocol, questions with at least one
        correct answer (dev 126, test 243); True also drops questions whose candidates are all
        correct (dev 122, test 237), as the `*-filtered.ref` files do.

The `.ref` files are TREC qrels numbered per split (`load_ref`), not by `QuestionID`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    open_text,
    tsv_rows,
    verified_paths,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask, non_standard

HEADER = tuple("QuestionID Question DocumentID DocumentTitle SentenceID Sentence Label".split())

OFFICIAL = RankingTask(
    name="wikiqa-official",
    require_positive=True,
    require_negative=False,
    description="WikiQA: MAP/MRR over questions with at least one correct answer.",
)
FILTERED = RankingTask(
    name="wikiqa-filtered",
    require_positive=True,
    require_negative=True,
    description="WikiQA filtered: questions with both a correct and an incorrect answer.",
)


def read_wikiqa_tsv(path: str | Path) -> list[Example]:
    """Parses one WikiQA split file (`.tsv` or `.tsv.gz`), every row, in file order.

    Quoting is off: sentences contain `"`. Lines may end in CRLF (the originals) or LF.

    Raises:
        DatasetFormatError: a wrong header, a row without exactly 7 fields, or a label other than
            0/1; the message names the file, the line number and the bad field.
    """
    examples = []
    for lineno, (qid, question, _doc_id, _title, sid, sentence, label) in tsv_rows(
        path, header=HEADER
    ):
        if label not in ("0", "1"):
            raise DatasetFormatError(f"{path}:{lineno}: Label must be 0 or 1, got {label!r}")
        examples.append(Example(question, sentence, int(label), group=qid, id=sid))
    return examples


def questions_with_answers(examples: list[Example]) -> list[Example]:
    """The examples of questions with at least one correct answer, order kept."""
    answered = {ex.group for ex in examples if ex.label > 0}
    return [ex for ex in examples if ex.group in answered]


def load_ref(path: str | Path) -> dict[int, dict[int, int]]:
    """Reads a WikiQA `.ref` file (TREC qrels: `qidx 0 sidx rel` per line).

    Returns:
        `{question index: {sentence index: relevance}}`: questions are numbered from 1 per split
        in order of first appearance in the `.tsv`, sentences from 0 within their question.

    Raises:
        DatasetFormatError: a line is not four integers.
    """
    qrels: dict[int, dict[int, int]] = {}
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if len(fields) != 4 or not all(x.isdigit() for x in fields):
                raise DatasetFormatError(f"{path}:{lineno}: expected 'qidx 0 sidx rel': {line!r}")
            qidx, _, sidx, rel = map(int, fields)
            qrels.setdefault(qidx, {})[sidx] = rel
    return qrels


RESPLIT_SEED = 2019
RANDOM_SPLIT = non_standard(
    OFFICIAL,
    "wikiqa-random-80-10-10",
    "all 3,047 WikiQA questions pooled and split 80/10/10 by question with a fixed seed "
    f"({RESPLIT_SEED}), emulating the aMV-LSTM paper's random split; questions with at least "
    "one correct answer evaluated.",
)


def random_resplit(examples: list[Example], split: str, seed: int = RESPLIT_SEED) -> list[Example]:
    """The `split` part of a seeded 80/10/10 split by question of `examples` (all splits pooled).

    Emulates the aMV-LSTM paper's protocol ("we used 80% for training, 10% for test and 10% for
    validation"); the paper's own partition is unknown, so results are not comparable with it
    question by question, and never with results on the official split.
    """
    questions = list(dict.fromkeys(ex.group for ex in examples))
    order = np.random.default_rng(seed).permutation(len(questions))
    n_train, n_dev = int(0.8 * len(questions)), int(0.1 * len(questions))
    bounds = {
        "train": (0, n_train),
        "dev": (n_train, n_train + n_dev),
        "test": (n_train + n_dev, len(questions)),
    }
    lo, hi = bounds[split]
    chosen = {questions[i] for i in order[lo:hi]}
    return [ex for ex in examples if ex.group in chosen]


def _load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    if options["resplit"] == "random-80-10-10":
        # The resplit pools all three files: verify the other two as well.
        folder = next(iter(paths.values())).parent
        names = tuple(f"WikiQA-{s}.tsv.gz" for s in ("train", "dev", "test"))
        paths = verified_paths(SPEC, folder, names)
        pooled = [
            ex
            for s in ("train", "dev", "test")
            for ex in read_wikiqa_tsv(paths[f"WikiQA-{s}.tsv.gz"])
        ]
        examples = random_resplit(pooled, split)
    else:
        examples = read_wikiqa_tsv(paths[f"WikiQA-{split}.tsv.gz"])
    if split == "train" and options["train_questions"] == "positive":
        examples = questions_with_answers(examples)
    return examples


def _protocol(split: str, options: Mapping[str, Any]) -> RankingTask:
    if options["resplit"] == "random-80-10-10":
        if options["filtered"]:
            raise ValueError("wikiqa: filtered=True applies to the official split only")
        return RANDOM_SPLIT
    return FILTERED if options["filtered"] else OFFICIAL


SPEC = DatasetSpec(
    name="wikiqa",
    title="WikiQA",
    task=RankingTask(),
    splits=("train", "dev", "test"),
    split_files={s: (f"WikiQA-{s}.tsv.gz",) for s in ("train", "dev", "test")},
    files=(
        bundled(
            "WikiQA-train.tsv",
            "bbaecd1659e2060049c7e2029174b7832df8e2700331bb77b7b65c7072743cd6",
            "295757943bc4df27f09763fc73b9f63063b13a577718b17805cbc9bb436f9dbe",
        ),
        bundled(
            "WikiQA-dev.tsv",
            "e1f937d65296b6fbecc17b964905df1e7a54ac7dd9dc62334994a4c933fdf906",
            "023c530e742caca2a760d48bd249e13259248c11f3b880a4c1842aa259a30a54",
        ),
        bundled(
            "WikiQA-test.tsv",
            "3f2a08f2e55f153e5ce9eb3132077eca9145834038ab6c5a13af85c24df576dd",
            "3c3b66966cb183b71abf19510bc2302295c68dd7a25284ec9cf8b63d5b6929e3",
        ),
        bundled(
            "WikiQASent.pos.ans.tsv",
            "2462b8a171fe3df3d3636b2b76d7958a3c067b3d5df17d275faa784ca07a9865",
            "73a2e96b63f171b0ceb3cd3fba5f8fa0101bf9be1bd5dd1b95fd2115571462ac",
        ),
        FileSpec(
            "WikiQA-train.ref", "aed4d2e086c1b8736b30c6914934a81bff997f2259f1c80a70f41d1575ecde7d"
        ),
        FileSpec(
            "WikiQA-dev.ref", "ea76242babd382499c6a1490f2a799c7a7420f6d9828c3b488e19c82db36f01e"
        ),
        FileSpec(
            "WikiQA-test.ref", "a91e7aa065c350d9935a98de880c8a53825747c553a416b28ad3e1ba5a677d42"
        ),
        FileSpec(
            "WikiQA-dev-filtered.ref",
            "f79cb9958ed6ed5fd734d4b8957aa3398c33a4cd204469a25b020f7c72fc36da",
        ),
        FileSpec(
            "WikiQA-test-filtered.ref",
            "b54e30ce1311138309a9417b8ea018b9d26b58404f835d321338182ff0dabbe4",
        ),
        FileSpec("README.txt", "8eaf9607c12263fd393cefb101e434f53436c021812c67a12bcd9fe5100fc23f"),
        FileSpec("LICENSE.pdf", "0a7f8a724eb30c1ff1f322d007693b4a0c79a9025ee525c605dfe88dc44eac89"),
    ),
    folder="wikiqa",
    license="Microsoft Research Data License Agreement for the WikiQA Corpus (LICENSE.pdf)",
    citation=(
        "Yi Yang, Wen-tau Yih and Christopher Meek. WikiQA: A Challenge Dataset for Open-Domain "
        "Question Answering. EMNLP 2015. https://aclanthology.org/D15-1237/"
    ),
    url=(
        "https://download.microsoft.com/download/E/5/F/"
        "E5FCFCEE-7005-4814-853D-DAA7C66507E0/WikiQACorpus.zip"
    ),
    protocol_description=(
        "MAP and MRR over the questions with at least one correct answer (dev 126, test 243); "
        "option filtered=True also drops questions whose candidates are all correct (dev 122, "
        "test 237). Train keeps the 873 questions with a correct answer unless "
        "train_questions='all'. Option resplit='random-80-10-10' (NON-STANDARD) pools all "
        "questions and splits them 80/10/10 with a fixed seed, as the aMV-LSTM paper did."
    ),
    options={
        "train_questions": ("positive", "all"),
        "filtered": (False, True),
        "resplit": ("official", "random-80-10-10"),
    },
    loader=_load,
    make_protocol=_protocol,
    split_sizes={"train": 8_672, "dev": 2_733, "test": 6_165},
    notes=(
        "Train holds 20,360 pairs of 2,118 questions; by default only the 8,672 pairs of the 873 "
        "questions with a correct answer are loaded (train_questions='all' keeps every pair)."
    ),
)

SPECS = (SPEC,)
