"""Quora Question Pairs (Quora, January 2017): is one question a duplicate of the other?

Two datasets read the corpus:

`quora`: the partition of Wang, Hamza and Florian (BiMPM, IJCAI 2017) that the sentence-matching
literature reports on: `train.tsv` (384,348 pairs), `dev.tsv` and `test.tsv` (10,000 each, 5,000
duplicates and 5,000 not). Lines are `label \\t question1 \\t question2 \\t pair_ID`, no header,
questions tokenised with Stanford CoreNLP (space-separated tokens), label 1 = duplicate:

    Example(left=question1, right=question2, label, id=pair_ID)

Only dev and test are bundled. Splits "train-on-dev" and "dev-holdout" are the NON-STANDARD
"train on dev, report test" protocol (`split_dev_for_training`): 90% / 10% of the dev pairs,
split by pair_ID (the pairs are independent; a question may still occur in pairs on both sides).

`quora-original`: Quora's own release `quora_duplicate_questions.tsv` (404,290 pairs, about 37%
duplicates), tab-separated with the header `id qid1 qid2 question1 question2 is_duplicate`.
Fields that contain tabs, newlines or quotes are quoted (`"`, doubled inside), so it is read with
the csv module. Quora published no split: its only split is "all".

    Example(left=question1, right=question2, label=is_duplicate, id=id)

A few rows have an empty question (three in the copy Kaggle distributed); they are kept unless
the option `drop_empty=True` is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    csv_records,
    dev_training_fields,
    tsv_rows,
    with_dev_training,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask, Task, non_standard

CLASS_NAMES = ("not_duplicate", "duplicate")
BIMPM_FILES = with_dev_training({"train": "train.tsv", "dev": "dev.tsv.gz", "test": "test.tsv.gz"})
BIMPM_FIELDS = ("label", "question1", "question2", "pair_ID")
ORIGINAL_FILE = "quora_duplicate_questions.tsv"
ORIGINAL_HEADER = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")
CITATION = (
    "Zhiguo Wang, Wael Hamza and Radu Florian. Bilateral Multi-Perspective Matching for Natural "
    "Language Sentences. IJCAI 2017. https://arxiv.org/abs/1702.03814"
)
ORIGINAL_CITATION = (
    "Shankar Iyer, Nikhil Dandekar and Kornél Csernai. First Quora Dataset Release: Question "
    "Pairs. Quora, 2017. https://data.quora.com/First-Quora-Dataset-Release-Question-Pairs"
)
LICENSE = "Quora's Terms of Service (non-commercial use); no license file at source"

BIMPM = ClassificationTask(
    name="quora-bimpm",
    num_classes=2,
    class_names=CLASS_NAMES,
    metrics=("accuracy", "f1"),
    primary="accuracy",
    description="Quora, BiMPM partition: accuracy (and F1 of duplicates) on 10,000 test pairs.",
)
BIMPM_NON_STANDARD = non_standard(
    BIMPM,
    "quora-bimpm-train-on-dev",
    "90% of the BiMPM dev pairs for training, the other 10% for selection.",
)
ORIGINAL = replace(
    BIMPM,
    name="quora-original",
    description="Quora release, no official split: accuracy and F1 of duplicates.",
)


def read_bimpm_tsv(path: str | Path) -> list[Example]:
    """Parses one file of the BiMPM partition (`.tsv` or `.tsv.gz`), every row, in file order.

    Raises:
        DatasetFormatError: a row without exactly 4 tab-separated fields, a label other than
            0/1, or a non-numeric pair_ID; the message names the file and the line.
    """
    examples = []
    for lineno, (label, question1, question2, pair_id) in tsv_rows(path, BIMPM_FIELDS):
        if label not in ("0", "1"):
            raise DatasetFormatError(f"{path}:{lineno}: label must be 0 or 1, got {label!r}")
        if not pair_id.isdigit():
            raise DatasetFormatError(
                f"{path}:{lineno}: pair_ID must be an integer, got {pair_id!r}"
            )
        examples.append(Example(question1, question2, int(label), id=pair_id))
    return examples


def read_quora_original_tsv(path: str | Path, *, drop_empty: bool = False) -> list[Example]:
    """Parses Quora's `quora_duplicate_questions.tsv` (or a `.gz` of it), in file order.

    Args:
        path: the file.
        drop_empty: drop the rows whose question1 or question2 is empty (or only spaces).

    Raises:
        DatasetFormatError: a wrong header, broken quoting, a row without exactly 6 fields, a
            non-numeric id or an is_duplicate other than 0/1; the message names the file and
            the line the record starts on.
    """
    examples = []
    for lineno, fields in csv_records(path, ORIGINAL_HEADER, delimiter="\t"):
        pair_id, qid1, qid2, question1, question2, is_duplicate = fields
        if not (pair_id.isdigit() and qid1.isdigit() and qid2.isdigit()):
            raise DatasetFormatError(
                f"{path}:{lineno}: id, qid1 and qid2 must be integers, "
                f"got {pair_id!r}, {qid1!r}, {qid2!r}"
            )
        if is_duplicate not in ("0", "1"):
            raise DatasetFormatError(
                f"{path}:{lineno}: is_duplicate must be 0 or 1, got {is_duplicate!r}"
            )
        if drop_empty and not (question1.strip() and question2.strip()):
            continue
        examples.append(Example(question1, question2, int(is_duplicate), id=pair_id))
    return examples


def _load_original(
    paths: Mapping[str, Path], split: str, options: Mapping[str, Any]
) -> list[Example]:
    return read_quora_original_tsv(paths[ORIGINAL_FILE], drop_empty=options["drop_empty"])


SPEC = DatasetSpec(
    name="quora",
    title="Quora Question Pairs (BiMPM partition)",
    task=Task.of(BIMPM),
    files=(
        # Never available here: no trustworthy sha256 is published ("" = unverified).
        FileSpec(BIMPM_FILES["train"], ""),
        bundled(
            "dev.tsv",
            "702ab745e574a7b6b54e35ee5757cee1d791abf273b639f3124a85e84bdfd79b",
            "2b57102923c55472fbb947353f1b00fae6daf35ca83e98bc9178727075efcdb5",
        ),
        bundled(
            "test.tsv",
            "cf014cdbed9ce28f31bc5a6d6d7323b0ba26277b053467a4bca164a22e841d0c",
            "386d96e2aebfa9d429391ee8be41ff0e4f67d113d824f28ad9cffc93f16e554d",
        ),
        # The partition's readme: format, tokenisation and the request to cite BiMPM.
        FileSpec("readme.txt", "4e4d6f32494dfda88ed06c72e79ce70a5dde734b65c043e332659d955956fcff"),
    ),
    folder="quora_bimpm",
    license=LICENSE,
    citation=CITATION,
    # The Google Drive link of github.com/zhiguowang/BiMPM (README, "Data format"): a page, not
    # the archive itself, so `datasets fetch` cannot download it; fetch it by hand.
    url="https://drive.google.com/file/d/0B0PlTAo--BnaQWlsZl9FZ3l1c28/view?usp=sharing",
    manual_download=(
        "the BiMPM partition is a Google Drive file (Quora_question_pair_partition.zip, "
        "linked from https://github.com/zhiguowang/BiMPM): download it in a browser and put "
        "train.tsv, dev.tsv and test.tsv in ~/.cache/attnmatch/quora_bimpm/."
    ),
    protocol_description=(
        "Binary classification, class 1 = duplicate: accuracy (primary) and F1 of duplicates on "
        "the 10,000 test pairs, models selected on the 10,000 dev pairs (Wang et al. 2017). "
        "Splits train-on-dev / dev-holdout are NON-STANDARD (train is not bundled): 90% / 10% "
        "of the dev pairs by pair_ID with a fixed seed, for training and model selection; the "
        "test set is then evaluated once. Never compare such a number with a paper's."
    ),
    **dev_training_fields(
        BIMPM_FILES, read_bimpm_tsv, BIMPM, BIMPM_NON_STANDARD, key=lambda ex: str(ex.id)
    ),
    split_sizes={"train": 384_348, "dev": 10_000, "test": 10_000},
    notes=(
        "Files: label, question1, question2, pair_ID, tab-separated, no header; questions are "
        "tokenised (CoreNLP). dev and test are balanced (5,000 duplicates each); train is not "
        "bundled and has no published sha256 (read unverified). pair_ID refers to the original "
        "release (values reach 404,335, more than its 404,290 rows: probably line numbers of "
        "the raw file, not its id column). train-on-dev / dev-holdout split dev by pair_ID; "
        "questions recur across pairs: 125 of the 1,000 holdout pairs share a question with "
        "train-on-dev. The download is a "
        "Google Drive page: fetch the archive by hand."
    ),
)

ORIGINAL_SPEC = DatasetSpec(
    name="quora-original",
    title="Quora Question Pairs (original release)",
    task=Task.of(ORIGINAL),
    splits=("all",),
    split_files={"all": (ORIGINAL_FILE,)},
    # Not available here and no trustworthy sha256 is published ("" = unverified).
    files=(FileSpec(ORIGINAL_FILE, ""),),
    folder="quora_original",
    license=LICENSE,
    citation=ORIGINAL_CITATION,
    url="http://qim.fs.quoracdn.net/quora_duplicate_questions.tsv",
    protocol_description=(
        "Quora published no train/dev/test split: the only split is 'all' (404,290 pairs). "
        "Results on a split of your own are not comparable with the literature, which uses the "
        "BiMPM partition (dataset 'quora') or GLUE's QQP."
    ),
    options={"drop_empty": (False, True)},
    loader=_load_original,
    make_protocol=lambda split, options: ORIGINAL,
    split_sizes={"all": 404_290},
    notes=(
        "Tab-separated with a header; fields holding tabs, newlines or quotes are quoted with "
        "'\"' (doubled inside), so records can span lines: read with the csv module, never by "
        "lines (404,290 records, more physical lines). A few rows have an empty question; "
        "drop_empty=True drops them. The URL is a single .tsv, not an archive: "
        "`datasets fetch` cannot unpack it; download it by hand into the folder."
    ),
)

SPECS = (SPEC, ORIGINAL_SPEC)
