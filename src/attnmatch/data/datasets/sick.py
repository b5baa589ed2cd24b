"""SICK (Marelli et al., LREC 2014; SemEval-2014 Task 1): relatedness and entailment of pairs.

10,000 English sentence pairs built from Flickr8K and SemEval-2012 MSR-Video captions, each
annotated with a relatedness score (1-5, the mean of 10 judgements) and an entailment label. We
read the SemEval-2014 Task 1 files `SICK_{train,trial,test_annotated}.txt` (the bundled copy is
gzipped, the originals work too). Two datasets share them:

    sick:             Example(sentence_A, sentence_B, label=relatedness_score, id=pair_ID)
    sick-entailment:  Example(sentence_A, sentence_B, label=class index, id=pair_ID)

with class indices 0 NEUTRAL, 1 ENTAILMENT, 2 CONTRADICTION. Splits: `train` (4,500),
`dev` (= SICK_trial, the 500 trial pairs the task released for development) and `test` (4,927;
its file has CRLF line ends, the others LF).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    file_loader,
    parse_score,
    tsv_rows,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask, RegressionTask, Task

HEADER = ("pair_ID", "sentence_A", "sentence_B", "relatedness_score", "entailment_judgment")
CLASS_NAMES = ("NEUTRAL", "ENTAILMENT", "CONTRADICTION")
MIN_SCORE, MAX_SCORE = 1, 5
SPLIT_FILES = {
    "train": "SICK_train.txt.gz",
    "dev": "SICK_trial.txt.gz",
    "test": "SICK_test_annotated.txt.gz",
}

RELATEDNESS = RegressionTask(
    name="sick-relatedness",
    min_score=MIN_SCORE,
    max_score=MAX_SCORE,
    metrics=("pearson", "spearman", "mse"),
    description="SICK relatedness (SemEval-2014 Task 1): Pearson, Spearman and MSE on 1-5.",
)
ENTAILMENT = ClassificationTask(
    name="sick-entailment",
    num_classes=len(CLASS_NAMES),
    class_names=CLASS_NAMES,
    metrics=("accuracy", "macro_f1"),
    primary="accuracy",
    description="SICK entailment (SemEval-2014 Task 1): 3-way accuracy and macro F1.",
)


def read_sick_txt(
    path: str | Path, target: Literal["relatedness", "entailment"] = "relatedness"
) -> list[Example]:
    """Parses one SICK file (`.txt` or `.txt.gz`), every row, in file order.

    Quoting is off. Lines may end in CRLF (the test file) or LF.

    Args:
        path: the file.
        target: "relatedness" (label = the score as a float) or "entailment" (label = the index
            of the judgment in `CLASS_NAMES`).

    Raises:
        DatasetFormatError: a wrong header, a row without exactly 5 fields, a non-integer
            pair_ID, a score outside 1-5 or an unknown judgment; the message names the file
            and the line.
    """
    if target not in ("relatedness", "entailment"):
        raise ValueError(f"target must be 'relatedness' or 'entailment', got {target!r}")
    examples = []
    for lineno, fields in tsv_rows(path, header=HEADER):
        pair_id, sentence_a, sentence_b, score, judgment = fields
        if not pair_id.isdigit():
            row = "\t".join(fields)
            raise DatasetFormatError(f"{path}:{lineno}: pair_ID must be an integer: {row!r}")
        value = parse_score(score, MIN_SCORE, MAX_SCORE)
        if value is None:
            raise DatasetFormatError(
                f"{path}:{lineno}: relatedness_score must be a number in "
                f"{MIN_SCORE}-{MAX_SCORE}, got {score!r}"
            )
        if judgment not in CLASS_NAMES:
            raise DatasetFormatError(
                f"{path}:{lineno}: entailment_judgment must be one of {CLASS_NAMES}, "
                f"got {judgment!r}"
            )
        label: float | int = value if target == "relatedness" else CLASS_NAMES.index(judgment)
        examples.append(Example(sentence_a, sentence_b, label, id=pair_id))
    return examples


FILES = (
    bundled(
        "SICK_train.txt",
        "c998377ca2a2783cdc54ff4413ac88b54f80069edac52430f8cd1307e38bd7d1",
        "266cf8047149bd1d68138dd30439f3122bff30069740ac6705bb6197d9f1b48e",
    ),
    bundled(
        "SICK_trial.txt",
        "ce8d65b86b2f48c2161c93ec93ecdffd91a9171d7c83973ccd1c9e24bdc4954a",
        "5a88cfb62f8c6bd2a3cce0f2421ba2cb8c2be5ab4a800f6f01e2c64aafb7db56",
    ),
    bundled(
        "SICK_test_annotated.txt",
        "a43dd0ccf87aad4f0e591cd42e6428ed34a2e3880da5948607d2dfa2fba6f4ee",
        "2b8aa806658d6fc23c6824c83776c2d4fee7556000817b5ec0f982861413b7d0",
    ),
    # The readme of the train archive: fields and the CC BY-NC-SA 3.0 license statement.
    FileSpec("readme.txt", "4ff14a2b07603f2214c2803a6e012048c795be5ba4e5d1d33b87d7210f633bf7"),
)
URL_BASE = "http://alt.qcri.org/semeval2014/task1/data/uploads/"
URLS = tuple(f"{URL_BASE}{a}.zip" for a in ("sick_train", "sick_trial", "sick_test_annotated"))
MANUAL = (
    "SICK is released as three archives (" + ", ".join(URLS) + "); download and unzip them "
    "into one folder, or use the bundled copy in data/sick."
)
CITATION = (
    "Marco Marelli, Stefano Menini, Marco Baroni, Luisa Bentivogli, Raffaella Bernardi and "
    "Roberto Zamparelli. A SICK cure for the evaluation of compositional distributional semantic "
    "models. LREC 2014. http://www.lrec-conf.org/proceedings/lrec2014/pdf/363_Paper.pdf; and "
    "Marelli et al. SemEval-2014 Task 1. SemEval 2014. https://aclanthology.org/S14-2001/"
)
LICENSE = "CC BY-NC-SA 3.0 (stated in readme.txt)"
SPLIT_SIZES = {"train": 4_500, "dev": 500, "test": 4_927}
NOTES = (
    "`dev` is SICK_trial.txt, the 500 trial pairs of SemEval-2014 Task 1 (there is no other "
    "dev set). SICK_test_annotated.txt has CRLF line ends, train and trial LF; the readme has a "
    "byte-order mark. pair_IDs are unique across the three files (1-10000, with gaps: 9,927 "
    "pairs). The official data comes as three archives: " + ", ".join(URLS) + "."
)

SPEC = DatasetSpec(
    name="sick",
    title="SICK relatedness (SemEval-2014 Task 1)",
    task=Task.of(RELATEDNESS),
    splits=("train", "dev", "test"),
    split_files={split: (name,) for split, name in SPLIT_FILES.items()},
    files=FILES,
    folder="sick",
    license=LICENSE,
    citation=CITATION,
    url=URLS[0],
    protocol_description=(
        "Relatedness score regression on 1-5 over every pair: Pearson r (primary), Spearman "
        "rho and MSE on the 4,927 test pairs. Models are selected on `dev` (SICK_trial, 500 "
        "pairs)."
    ),
    loader=file_loader(SPLIT_FILES, lambda path: read_sick_txt(path, "relatedness")),
    make_protocol=lambda split, options: RELATEDNESS,
    split_sizes=SPLIT_SIZES,
    notes=NOTES,
    manual_download=MANUAL,
)

# The same files, read for the entailment judgment instead of the score.
ENTAILMENT_SPEC = replace(
    SPEC,
    name="sick-entailment",
    title="SICK entailment (SemEval-2014 Task 1)",
    task=Task.of(ENTAILMENT),
    protocol_description=(
        "3-way entailment classification over every pair, classes 0 NEUTRAL, 1 ENTAILMENT, "
        "2 CONTRADICTION: accuracy (primary) and macro F1 on the 4,927 test pairs. Models are "
        "selected on `dev` (SICK_trial, 500 pairs)."
    ),
    loader=file_loader(SPLIT_FILES, lambda path: read_sick_txt(path, "entailment")),
    make_protocol=lambda split, options: ENTAILMENT,
)

SPECS = (SPEC, ENTAILMENT_SPEC)
