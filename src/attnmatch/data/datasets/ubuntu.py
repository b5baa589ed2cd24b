"""Ubuntu Dialogue Corpus (Lowe et al., SIGDIAL 2015): next-response selection in IRC dialogues.

Given a dialogue context, rank the true next response above 9 responses sampled from other
dialogues. Two releases, two specs, results not comparable between them:

`ubuntu`: the CSVs of the generator at https://github.com/rkadlec/ubuntu-ranking-dataset-creator
(its README calls them "Ubuntu Dialogue Corpus v2.0"; ParlAI distributes a copy), quoted CSV:

    train.csv   Context,Utterance,Label                         1,000,000 rows, Label 1.0 / 0.0
    valid.csv   Context,Ground Truth Utterance,Distractor_0,...,Distractor_8     19,560 rows
    test.csv    (same columns as valid.csv)                                     18,920 rows

Utterances end in `__eou__`, turns in `__eot__`; option `markers` keeps them as tokens (default)
or strips them.

`ubuntu-v1`: the v1 data as Xu et al. (2016) released it (`ubuntu_data.zip`), the split the
HCRN paper (and KEHNN, SMN, ...) report R_n@k on; tab-separated, one candidate a line:

    train.txt   label <TAB> turn 1 <TAB> ... <TAB> turn n <TAB> response    1,000,000 lines
    valid.txt   (same) 10 consecutive lines per context, one of them label 1    500,000 lines
    test.txt    (same)                                                          500,000 lines

Turns are joined with " __eot__ " (option `markers="strip"`: with a space).

Examples (both specs):

    dev/test: Example(context, candidate, 1 for the true response else 0, group="<split>-<n>")
              ground truth first, then the distractors in file order: R_2@1 compares the
              ground truth with the first distractor only, so the order is part of the protocol.
    train:    Example(context, response, label, group="train-<n>"): independent labelled pairs,
              one group per row. In both releases every row samples its own dialogue and
              context, so a context almost never has both a true and a false response: train
              pointwise (cross-entropy on the 0/1 label, as the HCRN paper does), not with a
              pairwise ranking loss.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    open_text,
    tsv_rows,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask

SPLITS = ("train", "dev", "test")
CANDIDATES = 10  # the ground truth and 9 distractors
EOU, EOT = "__eou__", "__eot__"
MARKERS = (EOU, EOT)
# A line of Xu et al.'s files: a label, one field per turn of the context, the response.
XU_FIELDS = ("label", "turn ...", "response")
TRAIN_HEADER = ("Context", "Utterance", "Label")
EVAL_HEADER = (
    "Context",
    "Ground Truth Utterance",
    *(f"Distractor_{i}" for i in range(CANDIDATES - 1)),
)
# "1.0"/"0.0" is what the generator writes (a float label); plain integers are accepted too.
_LABELS = {"1.0": 1, "0.0": 0, "1": 1, "0": 0}
METRICS = ("r2@1", "r10@1", "r10@2", "r10@5", "mrr")

V2_PROTOCOL = RankingTask(
    name="ubuntu-1in10",
    require_positive=True,
    require_negative=False,
    metrics=METRICS,
    primary="r10@1",
    description=(
        "Ubuntu Dialogue Corpus (rkadlec CSVs, 'v2.0'): R_2@1 (ground truth vs the first "
        "distractor), R_10@1/2/5 and MRR over 10 candidates per context."
    ),
)
V1_PROTOCOL = replace(
    V2_PROTOCOL,
    name="ubuntu-v1-xu-1in10",
    description=(
        "Ubuntu Dialogue Corpus v1 (Xu et al. 2016 split): R_2@1 (ground truth vs the first "
        "negative), R_10@1/2/5 and MRR over 10 candidates per context."
    ),
)


def strip_markers(text: str) -> str:
    """`text` without `__eou__` / `__eot__` tokens, whitespace collapsed to single spaces."""
    return " ".join(t for t in text.split() if t not in MARKERS)


@contextmanager
def _large_csv_fields() -> Iterator[None]:
    # The csv module refuses fields over 128 KiB by default; a long pasted log in a context can
    # exceed that. The limit is process-wide, so it is restored afterwards.
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, 1 << 26))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _csv_rows(path: Path, header: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """`(first line number, fields)` of each record after checking the header and field count."""
    with open_text(path) as f, _large_csv_fields():
        reader = csv.reader(f, strict=True)
        start = 1
        try:
            for record_no, row in enumerate(reader):
                if record_no == 0:
                    if tuple(row) != header:
                        raise DatasetFormatError(
                            f"{path}:1: expected the header {','.join(header)!r}, got {row!r}"
                        )
                elif len(row) != len(header):
                    raise DatasetFormatError(
                        f"{path}:{start}: expected {len(header)} comma-separated fields "
                        f"({','.join(header[:3])}...), got {len(row)}"
                    )
                else:
                    yield start, row
                start = reader.line_num + 1
        except csv.Error as e:
            raise DatasetFormatError(f"{path}:{start}: malformed CSV record: {e}") from None
        if start == 1:
            raise DatasetFormatError(
                f"{path}:1: expected the header {','.join(header)!r}, got nothing"
            )


def read_train_csv(path: str | Path, *, markers: str = "keep") -> list[Example]:
    """Parses the generator's `train.csv` (`Context,Utterance,Label`), one example a row.

    Raises:
        DatasetFormatError: a wrong header, a record without 3 fields, malformed quoting, or a
            label other than 1.0/0.0 (or 1/0); the message names the file and the record's line.
    """
    path = Path(path)
    clean = strip_markers if markers == "strip" else None
    examples = []
    for n, (lineno, (context, utterance, label)) in enumerate(
        _csv_rows(path, TRAIN_HEADER), start=1
    ):
        value = _LABELS.get(label)
        if value is None:
            raise DatasetFormatError(f"{path}:{lineno}: Label must be 1.0 or 0.0, got {label!r}")
        if clean is not None:
            context, utterance = clean(context), clean(utterance)
        group = f"train-{n}"
        examples.append(Example(context, utterance, value, group, group))
    return examples


def read_eval_csv(path: str | Path, split: str, *, markers: str = "keep") -> list[Example]:
    """Parses the generator's `valid.csv` / `test.csv`: 10 examples per row, ground truth first.

    Raises:
        DatasetFormatError: a wrong header, a record without 11 fields, or malformed quoting.
    """
    path = Path(path)
    clean = strip_markers if markers == "strip" else None
    examples = []
    for n, (_lineno, (context, *candidates)) in enumerate(_csv_rows(path, EVAL_HEADER), start=1):
        if clean is not None:
            context, candidates = clean(context), [clean(c) for c in candidates]
        group = f"{split}-{n}"
        examples.append(Example(context, candidates[0], 1, group, f"{group}-gt"))
        for i, distractor in enumerate(candidates[1:]):
            examples.append(Example(context, distractor, 0, group, f"{group}-d{i}"))
    return examples


def read_xu_txt(path: str | Path, split: str, *, markers: str = "keep") -> list[Example]:
    """Parses one file of Xu et al.'s v1 release (`label<TAB>turn ...<TAB>response` a line).

    train: one example per line, group `train-<line>`. valid/test: blocks of 10 consecutive
    lines sharing a context, exactly one with label 1; it is put first (the rest keep their
    order), so that R_2@1 compares it with the first negative.

    Raises:
        DatasetFormatError: a line with fewer than 3 fields or a label other than 0/1; for
            valid/test, a block whose lines differ in context, without exactly one positive, or
            a file that ends inside a block.
    """
    path = Path(path)
    separator = " " if markers == "strip" else f" {EOT} "
    examples: list[Example] = []
    block: list[tuple[int, str, str, int]] = []  # (line, context, response, label)

    def flush() -> None:
        first_line = block[0][0]
        if sum(label for *_, label in block) != 1:
            raise DatasetFormatError(
                f"{path}:{first_line}: the {CANDIDATES} candidates of a context must hold "
                f"exactly one label 1, got labels {[label for *_, label in block]}"
            )
        group = f"{split}-{len(examples) // CANDIDATES + 1}"
        ordered = sorted(block, key=lambda b: -b[3])  # stable: the negatives keep their order
        for lineno, context, response, label in ordered:
            examples.append(Example(context, response, label, group, f"{path.name}:{lineno}"))
        block.clear()

    for lineno, (label, *turns, response) in tsv_rows(path, XU_FIELDS, at_least=True):
        if label not in ("0", "1"):
            raise DatasetFormatError(f"{path}:{lineno}: label must be 0 or 1, got {label!r}")
        context = separator.join(turns)
        if markers == "strip":
            context, response = strip_markers(context), strip_markers(response)
        if split == "train":
            group = f"train-{lineno}"
            examples.append(Example(context, response, int(label), group, f"{path.name}:{lineno}"))
            continue
        if block and context != block[0][1]:
            raise DatasetFormatError(
                f"{path}:{lineno}: context differs from the context of line {block[0][0]}, "
                f"but a context has {CANDIDATES} consecutive candidate lines "
                f"(this is candidate {len(block) + 1})"
            )
        block.append((lineno, context, response, int(label)))
        if len(block) == CANDIDATES:
            flush()
    if block:
        raise DatasetFormatError(
            f"{path}:{block[0][0]}: the file ends after {len(block)} of the "
            f"{CANDIDATES} candidates of a context"
        )
    return examples


def check_candidates(examples: Sequence[Example], path: Path, n: int = CANDIDATES) -> None:
    """Raises DatasetFormatError unless every group holds exactly `n` consecutive examples."""
    for start in range(0, len(examples), n):
        groups = {ex.group for ex in examples[start : start + n]}
        if len(groups) != 1 or len(examples[start : start + n]) != n:
            raise DatasetFormatError(
                f"{path}: group {examples[start].group} does not have exactly {n} candidates"
            )


def _load_csv(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    path = paths[_CSV_FILES[split]]
    if split == "train":
        return read_train_csv(path, markers=options["markers"])
    examples = read_eval_csv(path, split, markers=options["markers"])
    check_candidates(examples, path)
    return examples


def _load_xu(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    path = paths[_XU_FILES[split]]
    examples = read_xu_txt(path, split, markers=options["markers"])
    if split != "train":
        check_candidates(examples, path)
    return examples


_CSV_FILES = {"train": "train.csv", "dev": "valid.csv", "test": "test.csv"}
_XU_FILES = {"train": "train.txt", "dev": "valid.txt", "test": "test.txt"}
_CITATION = (
    "Ryan Lowe, Nissan Pow, Iulian Serban and Joelle Pineau. The Ubuntu Dialogue Corpus: A Large "
    "Dataset for Research in Unstructured Multi-Turn Dialogue Systems. SIGDIAL 2015. "
    "https://arxiv.org/abs/1506.08909"
)
_LICENSE = (
    "No license is stated with the release (derived from the public Ubuntu IRC logs); the "
    "generator scripts are Apache-2.0"
)

# No official sha256 of the extracted files is published (ParlAI publishes only its archive's):
# "" means "no published checksum".
SPEC = DatasetSpec(
    name="ubuntu",
    title="Ubuntu Dialogue Corpus (rkadlec generator CSVs, 'v2.0')",
    task=RankingTask(),
    splits=SPLITS,
    split_files={split: (name,) for split, name in _CSV_FILES.items()},
    files=tuple(FileSpec(name, "") for name in _CSV_FILES.values()),
    folder="ubuntu",
    license=_LICENSE,
    citation=_CITATION,
    url="http://parl.ai/downloads/ubuntu/ubuntu.tar.gz",
    # As published in ParlAI's parlai/tasks/ubuntu/build.py.
    archive_sha256="87caf297381287247cbff3aa7cc2f4609f3b12c40e8535688168d7413740e0d0",
    protocol_description=(
        "dev (valid.csv) and test: each context ranks its 10 candidates, ground truth first; "
        "R_2@1 (ground truth vs Distractor_0), R_10@1 (primary), R_10@2, R_10@5 and MRR. "
        "train: 1M independent labelled pairs (half true responses): train pointwise."
    ),
    options={"markers": ("keep", "strip")},
    loader=_load_csv,
    make_protocol=lambda split, options: V2_PROTOCOL,
    split_sizes={"train": 1_000_000, "dev": 19_560 * CANDIDATES, "test": 18_920 * CANDIDATES},
    notes=(
        "These are the 'v2.0' files of the rkadlec generator (time-split, __eou__/__eot__ "
        "markers); results are not comparable with v1 (`ubuntu-v1`), on which the HCRN paper "
        "and its baselines report. Quoted CSV: fields contain commas, quotes and long pastes. "
        "Train labels are written '1.0'/'0.0'. Train rows are independent pairs (each samples "
        "its own dialogue and context): no ranking groups to train on."
    ),
)

SPEC_V1 = DatasetSpec(
    name="ubuntu-v1",
    title="Ubuntu Dialogue Corpus v1 (Xu et al. 2016 split)",
    task=RankingTask(),
    splits=SPLITS,
    split_files={split: (name,) for split, name in _XU_FILES.items()},
    files=tuple(FileSpec(name, "") for name in _XU_FILES.values()),
    folder="ubuntu_v1",
    license=_LICENSE,
    citation=(
        f"{_CITATION}; split: Zhen Xu, Bingquan Liu, Baoxun Wang, Chengjie Sun and Xiaolong "
        "Wang. Incorporating Loose-Structured Knowledge into LSTM with Recall Gate for "
        "Conversation Modeling. 2016. https://arxiv.org/abs/1605.05110"
    ),
    url="https://www.dropbox.com/s/2fdn26rj6h9bpvl/ubuntu_data.zip?dl=1",
    protocol_description=(
        "dev (valid.txt) and test: 50,000 contexts each with 10 candidates (one true); R_2@1 "
        "(the true response vs the first negative), R_10@1 (primary), R_10@2, R_10@5 and MRR, "
        "as reported by Wu et al. 2016 and the HCRN paper. train: 1M independent labelled "
        "pairs (1:1): train pointwise."
    ),
    options={"markers": ("keep", "strip")},
    loader=_load_xu,
    make_protocol=lambda split, options: V1_PROTOCOL,
    split_sizes={"train": 1_000_000, "dev": 500_000, "test": 500_000},
    notes=(
        "Tab-separated, one candidate per line; the context's turns are the fields between the "
        "label and the response, joined here with ' __eot__ '. The true response is moved first "
        "in its block of 10 if it is not already."
    ),
)

SPECS = (SPEC, SPEC_V1)
