"""SNLI 1.0 (Bowman, Angeli, Potts and Manning, EMNLP 2015): natural language inference.

Premises are Flickr30k image captions; crowd workers wrote a hypothesis that is definitely true
(entailment), might be true (neutral) or is definitely false (contradiction) given the caption.
We read the JSON-lines files of the official archive, `snli_1.0_{train,dev,test}.jsonl`, one
object per line, using `gold_label`, `sentence1` (premise) and `sentence2` (hypothesis):

    Example(left=sentence1, right=sentence2, label=class index, id=pairID or "<file>:<line>")

Classes: 0 entailment, 1 neutral, 2 contradiction. Pairs whose gold_label is "-" (no majority
among the five annotators) are dropped, as every paper does: train 550,152 -> 549,367, dev
10,000 -> 9,842 (158 dropped), test 10,000 -> 9,824 (176 dropped). One dropped dev row of the
bundled copy has null sentences; dropped rows are not checked further.

Only dev and test are bundled, from a copy that keeps just gold_label, sentence1 and sentence2
of every row, in the original order: its ids are "snli_1.0_dev.jsonl:<line>" where the official
files give pairID. Splits "train-on-dev" and "dev-holdout" are the NON-STANDARD "train on dev,
report test" protocol (`split_dev_for_training`, 90% / 10% of dev by premise).
"""

from __future__ import annotations

from pathlib import Path

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    dev_training_fields,
    open_text,
    with_dev_training,
)
from attnmatch.data.schema import Example
from attnmatch.data.textfile import parse_json_line
from attnmatch.tasks import ClassificationTask, Task, non_standard

CLASS_NAMES = ("entailment", "neutral", "contradiction")
NO_GOLD_LABEL = "-"
SPLIT_FILES = with_dev_training(
    {
        "train": "snli_1.0_train.jsonl",
        "dev": "snli_1.0_dev.jsonl.gz",
        "test": "snli_1.0_test.jsonl.gz",
    }
)

OFFICIAL = ClassificationTask(
    name="snli",
    num_classes=3,
    class_names=CLASS_NAMES,
    metrics=("accuracy", "macro_f1"),
    primary="accuracy",
    description="SNLI 1.0: 3-way accuracy on the 9,824 labelled test pairs.",
)
NON_STANDARD = non_standard(
    OFFICIAL, "snli-train-on-dev", "90% of the SNLI dev pairs for training, 10% for selection."
)


def read_nli_jsonl(path: str | Path, *, genre: bool = False) -> list[Example]:
    """Parses an SNLI or MultiNLI JSON-lines file (or its `.gz`), in file order.

    Rows whose gold_label is "-" are dropped without further checks (one such SNLI dev row has
    null sentences). Other fields (parses, annotator_labels, ...) are ignored.

    Args:
        path: the file.
        genre: MultiNLI: ids are "<genre>:<pairID>" and both fields are required.

    Returns:
        The labelled pairs; ids are the pairID where a row has one, else "<file>:<line>" (the
        file named without `.gz`).

    Raises:
        DatasetFormatError: a line that is not a JSON object, an unknown gold_label, a
            sentence that is not a string, or (genre=True) a missing genre or pairID; the
            message names the file and the line.
    """
    path = Path(path)
    source = path.name.removesuffix(".gz")
    examples = []
    with open_text(path) as f:
        for lineno, line in enumerate(f, start=1):
            obj = parse_json_line(line, f"{path}:{lineno}")
            if not isinstance(obj, dict):
                raise DatasetFormatError(f"{path}:{lineno}: expected a JSON object: {line!r}")
            gold = obj.get("gold_label")
            if gold == NO_GOLD_LABEL:
                continue
            if gold not in CLASS_NAMES:
                raise DatasetFormatError(
                    f"{path}:{lineno}: gold_label must be one of {(*CLASS_NAMES, '-')}, "
                    f"got {gold!r}"
                )
            premise, hypothesis = obj.get("sentence1"), obj.get("sentence2")
            if not (isinstance(premise, str) and isinstance(hypothesis, str)):
                raise DatasetFormatError(
                    f"{path}:{lineno}: sentence1 and sentence2 must be strings, "
                    f"got {premise!r}, {hypothesis!r}"
                )
            pair_id = obj.get("pairID")
            if genre:
                name = obj.get("genre")
                if not (isinstance(name, str) and isinstance(pair_id, str)):
                    raise DatasetFormatError(
                        f"{path}:{lineno}: genre and pairID must be strings, "
                        f"got {name!r}, {pair_id!r}"
                    )
                ex_id = f"{name}:{pair_id}"
            else:
                ex_id = pair_id if isinstance(pair_id, str) else f"{source}:{lineno}"
            examples.append(Example(premise, hypothesis, CLASS_NAMES.index(gold), id=ex_id))
    return examples


SPEC = DatasetSpec(
    name="snli",
    title="Stanford Natural Language Inference (SNLI 1.0)",
    task=Task.of(OFFICIAL),
    files=(
        # Not available here; no sha256 of the file itself is published: "" = unverified.
        FileSpec(SPLIT_FILES["train"], ""),
        # The bundled .gz are reduced copies (gold_label, sentence1, sentence2 only); the
        # official .jsonl has every field, so its digest differs and is not known: unverified.
        bundled(
            "snli_1.0_dev.jsonl",
            "02c9cd49e6d0530c9ea7651053ca03fbeb3e0ee2770f68433d0715e7fe789840",
            "",
        ),
        bundled(
            "snli_1.0_test.jsonl",
            "640fe34fed08b43d120600bb751a06829481643c393e855cd65f3578428e0baa",
            "",
        ),
    ),
    folder="snli",
    license="CC BY-SA 4.0 (stated on nlp.stanford.edu/projects/snli; no license file)",
    citation=(
        "Samuel R. Bowman, Gabor Angeli, Christopher Potts and Christopher D. Manning. A large "
        "annotated corpus for learning natural language inference. EMNLP 2015. "
        "https://aclanthology.org/D15-1075/"
    ),
    url="https://nlp.stanford.edu/projects/snli/snli_1.0.zip",
    # As recorded by TensorFlow Datasets (tensorflow_datasets/url_checksums/snli.txt).
    archive_sha256="afb3d70a5af5d8de0d9d81e2637e0fb8c22d1235c2749d83125ca43dab0dbd3e",
    protocol_description=(
        "3-way classification (0 entailment, 1 neutral, 2 contradiction) over the pairs with a "
        "gold label: accuracy (primary) and macro F1 on the 9,824 test pairs, models selected "
        "on the 9,842 dev pairs. Splits train-on-dev / dev-holdout are NON-STANDARD (train is "
        "not bundled): 90% / 10% of the dev premises with a fixed seed, for training and model "
        "selection; the test set is then evaluated once. Never compare such a number with a "
        "paper's."
    ),
    **dev_training_fields(SPLIT_FILES, read_nli_jsonl, OFFICIAL, NON_STANDARD),
    split_sizes={"train": 549_367, "dev": 9_842, "test": 9_824},
    notes=(
        "Pairs with gold_label '-' are dropped (train 785, dev 158, test 176 of 550,152 / "
        "10,000 / 10,000); one such dev row has null sentences in the bundled copy. The "
        "bundled dev/test keep only gold_label, sentence1 and sentence2 (ids are file:line; "
        "the official files give pairID). The official .jsonl files have no published sha256 "
        "and are read unverified; the archive's sha256 is checked on fetch. train-on-dev / "
        "dev-holdout split dev by premise."
    ),
)

SPECS = (SPEC,)
