"""SciTail (Khot, Sabharwal and Clark, AAAI 2018): entailment from science questions.

Hypotheses are science exam questions with their correct answer turned into a statement;
premises are web sentences retrieved for them, annotated as supporting the hypothesis
("entails") or not ("neutral"). Class 0 is "neutral", 1 "entails", so F1 is the F1 of
entailment. Two datasets:

`scitail`: the original strings, from the official release SciTailV1.1.zip (train 23,596 /
dev 1,304 / test 2,126 pairs; 8,602 / 657 / 842 entail). Option `format` picks its files:
    "snli" (default)  snli_format/scitail_1.0_{split}.txt: JSON lines with gold_label
                      ("entailment" / "neutral"), sentence1 (premise), sentence2 (hypothesis)
    "tsv"             tsv_format/scitail_1.0_{split}.tsv: premise \\t hypothesis \\t label
                      ("entails" / "neutral"), no header. Its train file has 23,097 rows, 499
                      fewer than snli_format's (the release does not say why); dev and test
                      have the same pairs in both formats.

    Example(left=premise, right=hypothesis, label, id="<file>:<line>")

Only the test split is bundled, as a third-party copy: `scitail_1.0_test.csv` (CSV, header
`premise,hypothesis,label`, labels recoded as "entailment" / "not_entailment", rows in the
release's order). It is declared as an accepted alternative of the snli_format test file, so
with format "snli" the test split reads whichever of the two is present (the official file
first). 15 of its premises contain HTML entities (10 `&quot;`, 3 `&amp;`, 1 `&gt;`, 1 `&deg;`).
We keep them: they most likely come from the release's web sentences rather than from the
CSV's maker, who left a bare `&` in other rows (an escaping converter would not) and never
escaped `'`; RE2's copy lacks them only because NLTK's TweetTokenizer, which RE2 tokenises
with, decodes entities. Unescaping would then make these premises differ from the official ones.

`scitail-re2`: dev and test as prepared by RE2 (Yang et al. 2019, `data/prepare_scitail.py`:
TweetTokenizer tokens, `- . # " /` removed), `re2_{dev,test}.txt`: `s1 \\t s2 \\t label` with
0 = entails and 1 = neutral in the file, read as the same class indices as `scitail` (entails
= 1). Splits "train-on-dev" and "dev-holdout" are the NON-STANDARD "train on dev, report test"
protocol (`split_dev_for_training`, 90% / 10% of dev by HYPOTHESIS: SciTail's 1,304 dev pairs
hold only 121 hypotheses, each with ~11 retrieved premises, so a split by premise would put the
same hypothesis on both sides and make the holdout far easier than test).
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
    open_text,
    tsv_rows,
    verified_paths,
    with_dev_training,
)
from attnmatch.data.schema import Example
from attnmatch.data.textfile import parse_json_line
from attnmatch.tasks import ClassificationTask, Task, non_standard

CLASS_NAMES = ("neutral", "entails")
NEUTRAL, ENTAILS = 0, 1
SPLITS = ("train", "dev", "test")
TSV_FIELDS = ("premise", "hypothesis", "label")
TSV_LABELS = {"neutral": NEUTRAL, "entails": ENTAILS}
SNLI_LABELS = {"neutral": NEUTRAL, "entailment": ENTAILS}
CSV_LABELS = {"not_entailment": NEUTRAL, "entailment": ENTAILS}
RE2_FIELDS = ("s1", "s2", "label")
RE2_LABELS = {"1": NEUTRAL, "0": ENTAILS}
CSV_HEADER = ("premise", "hypothesis", "label")
CSV_FILE = "scitail_1.0_test.csv.gz"
SOURCE_LICENSE = "LICENSE.source-repo"
CITATION = (
    "Tushar Khot, Ashish Sabharwal and Peter Clark. SciTail: A Textual Entailment Dataset from "
    "Science Question Answering. AAAI 2018. "
    "https://ojs.aaai.org/index.php/AAAI/article/view/12022"
)
RE2_CITATION = (
    f"{CITATION}; RE2 preprocessing: Runqi Yang, Jianhai Zhang, Xing Gao, Feng Ji and Haiqing "
    "Chen. Simple and Effective Text Matching with Richer Alignment Features. ACL 2019. "
    "https://aclanthology.org/P19-1465/"
)
COPY_LICENSE = (
    "Apache-2.0 (SciTail, AI2); copied from a repository under the MIT license "
    "(LICENSE.source-repo)"
)

OFFICIAL = ClassificationTask(
    name="scitail",
    num_classes=2,
    class_names=CLASS_NAMES,
    metrics=("accuracy", "f1"),
    primary="accuracy",
    description="SciTail: accuracy (and F1 of entails) on the 2,126 test pairs.",
)
RE2 = replace(
    OFFICIAL,
    name="scitail-re2",
    description="SciTail, RE2-tokenised text: accuracy (and F1 of entails) on 2,126 test pairs.",
)
RE2_NON_STANDARD = non_standard(
    RE2,
    "scitail-re2-train-on-dev",
    "90% of the SciTail dev pairs (RE2 text) for training, 10% for selection.",
)


def _source_name(path: Path) -> str:
    # Ids name the original file, so that the bundled .gz and the original give the same ids.
    return path.name.removesuffix(".gz")


def _label(labels: Mapping[str, int], value: object, path: Path, lineno: int, what: str) -> int:
    if not isinstance(value, str) or value not in labels:
        raise DatasetFormatError(
            f"{path}:{lineno}: {what} must be one of {tuple(labels)}, got {value!r}"
        )
    return labels[value]


def _read_pairs_tsv(
    path: Path, fields: tuple[str, ...], labels: Mapping[str, int], what: str
) -> list[Example]:
    # Rows `premise <TAB> hypothesis <TAB> label`, ids "<file>:<line>".
    examples = []
    for lineno, (premise, hypothesis, label) in tsv_rows(path, fields):
        cls = _label(labels, label, path, lineno, what)
        examples.append(Example(premise, hypothesis, cls, id=f"{_source_name(path)}:{lineno}"))
    return examples


def read_scitail_tsv(path: str | Path) -> list[Example]:
    """Parses a `tsv_format/scitail_1.0_*.tsv` file (or its `.gz`), every row, in file order.

    Raises:
        DatasetFormatError: a row without exactly 3 tab-separated fields or a label other than
            entails/neutral; the message names the file and the line.
    """
    return _read_pairs_tsv(Path(path), TSV_FIELDS, TSV_LABELS, "label")


def read_scitail_jsonl(path: str | Path) -> list[Example]:
    """Parses a `snli_format/scitail_1.0_*.txt` file (JSON lines, or its `.gz`), in file order.

    Only `gold_label`, `sentence1` (premise) and `sentence2` (hypothesis) are read; the parses
    and `annotator_labels` are ignored.

    Raises:
        DatasetFormatError: a line that is not a JSON object, a missing or non-string sentence,
            or a gold_label other than entailment/neutral; the message names the file and line.
    """
    path = Path(path)
    examples = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            obj = parse_json_line(line, f"{path}:{lineno}")
            if not isinstance(obj, dict):
                raise DatasetFormatError(f"{path}:{lineno}: expected a JSON object: {line!r}")
            cls = _label(SNLI_LABELS, obj.get("gold_label"), path, lineno, "gold_label")
            premise, hypothesis = obj.get("sentence1"), obj.get("sentence2")
            if not (isinstance(premise, str) and isinstance(hypothesis, str)):
                raise DatasetFormatError(
                    f"{path}:{lineno}: sentence1 and sentence2 must be strings, "
                    f"got {premise!r}, {hypothesis!r}"
                )
            examples.append(Example(premise, hypothesis, cls, id=f"{_source_name(path)}:{lineno}"))
    return examples


def read_scitail_csv(path: str | Path) -> list[Example]:
    """Parses `scitail_1.0_test.csv` (or its `.gz`): quoted CSV, header `premise,hypothesis,label`.

    Texts are returned as stored, HTML entities included (see the module docstring). Ids are
    `scitail_1.0_test.csv:<line of the record>`.

    Raises:
        DatasetFormatError: a wrong header, broken quoting, a record without exactly 3 fields or
            a label other than entailment/not_entailment; the message names the file and line.
    """
    path = Path(path)
    examples = []
    for lineno, (premise, hypothesis, label) in csv_records(path, CSV_HEADER):
        cls = _label(CSV_LABELS, label, path, lineno, "label")
        examples.append(Example(premise, hypothesis, cls, id=f"{_source_name(path)}:{lineno}"))
    return examples


def read_re2_txt(path: str | Path) -> list[Example]:
    """Parses an RE2-prepared SciTail file `re2_{dev,test}.txt` (or its `.gz`), in file order.

    The file's labels (0 = entails, 1 = neutral) are mapped to this module's classes
    (entails = 1, neutral = 0).

    Raises:
        DatasetFormatError: a row without exactly 3 tab-separated fields or a label other than
            0/1; the message names the file and the line.
    """
    return _read_pairs_tsv(Path(path), RE2_FIELDS, RE2_LABELS, "label (0 entails, 1 neutral)")


# --- scitail: the official release, and the bundled copy of its test split ------------------


def snli_format_file(split: str) -> str:
    """The spec file name of a split in snli_format, e.g. `snli_format/scitail_1.0_dev.txt`."""
    return f"snli_format/scitail_1.0_{split}.txt"


def tsv_format_file(split: str) -> str:
    """The spec file name of a split in tsv_format, e.g. `tsv_format/scitail_1.0_dev.tsv`."""
    return f"tsv_format/scitail_1.0_{split}.tsv"


def _read_any(path: Path) -> list[Example]:
    # The snli_format test file may be found as its accepted alternative, the CSV copy.
    if path.name.removesuffix(".gz").endswith(".csv"):
        return read_scitail_csv(path)
    return read_scitail_jsonl(path)


def _load_official(
    paths: Mapping[str, Path], split: str, options: Mapping[str, Any]
) -> list[Example]:
    path = paths[snli_format_file(split)]
    if options["format"] == "tsv":
        # The tsv files are not in split_files (those name one file per split): find and check
        # the split's tsv file in the dataset folder that holds the snli_format one.
        folder = path.parent.parent if path.parent.name == "snli_format" else path.parent
        tsv = tsv_format_file(split)
        return read_scitail_tsv(verified_paths(SPEC, folder, (tsv,))[tsv])
    return _read_any(path)


def _snli_file(split: str) -> FileSpec:
    # Not available here, and no sha256 is published for them: "" = read unverified.
    if split != "test":
        return FileSpec(snli_format_file(split), "")
    return FileSpec(
        snli_format_file(split),
        "",
        alternatives=(
            (CSV_FILE, "85bcd6121468802bb181324723d30b3cafc3d242a13fb44dd091073511a4169c"),
            (
                CSV_FILE.removesuffix(".gz"),
                "de874f9ea4c4fb6118c0f8f10bc0978c8fb881404ce8fb248aefa1da99f0811d",
            ),
        ),
    )


SPEC = DatasetSpec(
    name="scitail",
    title="SciTail v1.1",
    task=Task.of(OFFICIAL),
    splits=SPLITS,
    split_files={s: (snli_format_file(s),) for s in SPLITS},
    files=(
        *(_snli_file(s) for s in SPLITS),
        *(FileSpec(tsv_format_file(s), "") for s in SPLITS),
    ),
    folder="scitail",
    license=(
        "Apache-2.0 (AI2; allenai.org/data/scitail); the bundled test copy comes from a "
        "repository under MIT (LICENSE.source-repo)"
    ),
    citation=CITATION,
    url="https://ai2-public-datasets.s3.amazonaws.com/scitail/SciTailV1.1.zip",
    protocol_description=(
        "Binary classification, class 1 = entails: accuracy (primary) and F1 of entails on the "
        "2,126 test pairs, models selected on the 1,304 dev pairs (Khot et al. 2018)."
    ),
    options={"format": ("snli", "tsv")},
    loader=_load_official,
    make_protocol=lambda split, options: OFFICIAL,
    split_sizes={"train": 23_596, "dev": 1_304, "test": 2_126},
    notes=(
        "Classes: 0 neutral, 1 entails. format='snli' (default) reads snli_format/*.txt "
        "(JSON lines, gold_label entailment/neutral); format='tsv' reads tsv_format/*.tsv "
        "(entails/neutral, no header), whose train file has 23,097 pairs instead of 23,596. "
        "Only the test split is bundled, as a third-party CSV copy (original strings, official "
        "order, labels entailment/not_entailment) accepted in place of "
        "snli_format/scitail_1.0_test.txt. 15 of its premises keep HTML entities (10 &quot;, "
        "3 &amp;, 1 &gt;, 1 &deg;), most likely as in the release: they are not unescaped."
    ),
)


# --- scitail-re2: RE2's tokenised dev and test -------------------------------------------------

RE2_FILES = with_dev_training({"dev": "re2_dev.txt.gz", "test": "re2_test.txt.gz"})


RE2_SPEC = DatasetSpec(
    name="scitail-re2",
    title="SciTail v1.1 dev/test, RE2-tokenised",
    task=Task.of(RE2),
    files=(
        bundled(
            "re2_dev.txt",
            "4bfefab0b8d462147049dbfab53bc35641094480b5d6bc412651ff27177da499",
            "ad2f794fa600b519d94cb85ae6b418f8e45739ccc374af825027eef98b985a51",
        ),
        bundled(
            "re2_test.txt",
            "0729f7ad94b61502bba5b75927f903c4120906aa89bdb7a453b3037c2a1b40ca",
            "548a0363930bf2348312febf72fe901340d2258e75f65d4800eeeddc49380bf4",
        ),
        FileSpec(
            SOURCE_LICENSE, "6b07b35a328999dfa338671f6e64d9f0e14bb8807865921bfc0795a8c573ffc2"
        ),
    ),
    folder="scitail",
    license=COPY_LICENSE,
    citation=RE2_CITATION,
    # The files are made by RE2's data/prepare_scitail.py from the official zip; there is no
    # download of its output, so `datasets fetch` cannot get them: the URL is RE2's repository.
    url="https://github.com/alibaba-edu/simple-effective-text-matching",
    manual_download=(
        "RE2's tokenised SciTail is produced by the data preparation of "
        "https://github.com/alibaba-edu/simple-effective-text-matching; run it and put "
        "re2_dev.txt and re2_test.txt in ~/.cache/attnmatch/scitail/, or use data/scitail."
    ),
    protocol_description=(
        "Binary classification on RE2-tokenised text, class 1 = entails (the files' label 0): "
        "accuracy (primary) and F1 of entails on the 2,126 test pairs. Splits train-on-dev / "
        "dev-holdout are NON-STANDARD (train is not bundled): 90% / 10% of the 1,304 dev pairs "
        "by hypothesis with a fixed seed, for training and model selection; the test set is then "
        "evaluated once. Never compare such a number with a paper's."
    ),
    **dev_training_fields(
        RE2_FILES,
        read_re2_txt,
        RE2,
        RE2_NON_STANDARD,
        key=lambda ex: ex.right,  # by hypothesis
    ),
    split_sizes={"dev": 1_304, "test": 2_126},
    notes=(
        "Text tokenised by RE2 (NLTK TweetTokenizer, which also decodes HTML entities; "
        "'- . # \" /' removed), not the original strings. File labels 0 = entails, "
        "1 = neutral, read as classes 1 entails / 0 neutral like `scitail`. Rows are in the "
        "official order. train-on-dev / dev-holdout split dev by hypothesis (121 in dev)."
    ),
)

SPECS = (SPEC, RE2_SPEC)
