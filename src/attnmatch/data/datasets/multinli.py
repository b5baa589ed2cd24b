"""MultiNLI 1.0 (Williams, Nangia and Bowman, NAACL 2018): inference across ten genres.

SNLI's annotation scheme applied to premises from ten genres of written and spoken English. We
read the JSON-lines files of the official archive, `multinli_1.0_{train,dev_matched,
dev_mismatched}.jsonl` (same fields as SNLI's plus `genre` and `promptID`), with SNLI's reader
(`snli.read_nli_jsonl`):

    Example(left=sentence1, right=sentence2, label=class index, id="<genre>:<pairID>")

Classes: 0 entailment, 1 neutral, 2 contradiction; pairs with gold_label "-" are dropped. The
genre is kept as the prefix of the id (`genre(example)`). Splits: "train" (392,702 pairs, five
genres), "dev-matched" (9,815 labelled of 10,000, the train genres) and "dev-mismatched"
(9,832 of 10,000, five other genres). The test sets are unlabelled (Kaggle) and not included.
Not available here: the files have no published sha256 and are read unverified.
"""

from __future__ import annotations

from pathlib import Path

from attnmatch.data.datasets._spec import DatasetSpec, FileSpec, file_loader
from attnmatch.data.datasets.snli import CLASS_NAMES, read_nli_jsonl
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask, Task

SPLIT_FILES = {
    "train": "multinli_1.0_train.jsonl",
    "dev-matched": "multinli_1.0_dev_matched.jsonl",
    "dev-mismatched": "multinli_1.0_dev_mismatched.jsonl",
}


def _protocol_for(split: str) -> ClassificationTask:
    return ClassificationTask(
        name=f"multinli-{split}",
        num_classes=3,
        class_names=CLASS_NAMES,
        metrics=("accuracy", "macro_f1"),
        primary="accuracy",
        description=f"MultiNLI 1.0 {split}: 3-way accuracy over the labelled pairs.",
    )


PROTOCOLS = {split: _protocol_for(split) for split in SPLIT_FILES}


def read_multinli_jsonl(path: str | Path) -> list[Example]:
    """Parses a MultiNLI JSON-lines file (or its `.gz`); see `snli.read_nli_jsonl`."""
    return read_nli_jsonl(path, genre=True)


def genre(example: Example) -> str:
    """The MultiNLI genre of an example loaded here (its id is "<genre>:<pairID>")."""
    if example.id is None or ":" not in example.id:
        raise ValueError(f"not a MultiNLI example id: {example.id!r}")
    return example.id.partition(":")[0]


SPEC = DatasetSpec(
    name="multinli",
    title="Multi-Genre Natural Language Inference (MultiNLI 1.0)",
    task=Task.of(PROTOCOLS["train"]),
    splits=tuple(SPLIT_FILES),
    split_files={split: (name,) for split, name in SPLIT_FILES.items()},
    # Not available here; no sha256 of the files themselves is published: "" = unverified.
    files=tuple(FileSpec(name, "") for name in SPLIT_FILES.values()),
    folder="multinli",
    license=(
        "Mostly OANC (free use); fiction under CC BY-SA 3.0 / CC BY 3.0 or public domain (see "
        "the MultiNLI paper and README)"
    ),
    citation=(
        "Adina Williams, Nikita Nangia and Samuel R. Bowman. A Broad-Coverage Challenge Corpus "
        "for Sentence Understanding through Inference. NAACL 2018. "
        "https://aclanthology.org/N18-1101/"
    ),
    url="https://cims.nyu.edu/~sbowman/multinli/multinli_1.0.zip",
    # As recorded by TensorFlow Datasets (tensorflow_datasets/url_checksums/multi_nli.txt).
    archive_sha256="049f507b9e36b1fcb756cfd5aeb3b7a0cfcb84bf023793652987f7e7e0957822",
    protocol_description=(
        "3-way classification (0 entailment, 1 neutral, 2 contradiction) over the pairs with a "
        "gold label: accuracy (primary) and macro F1 on dev-matched (9,815 pairs, the training "
        "genres) and dev-mismatched (9,832, unseen genres), reported separately; the test sets "
        "are scored only on Kaggle."
    ),
    loader=file_loader(SPLIT_FILES, read_multinli_jsonl),
    make_protocol=lambda split, options: PROTOCOLS[split],
    split_sizes={"train": 392_702, "dev-matched": 9_815, "dev-mismatched": 9_832},
    notes=(
        "Pairs with gold_label '-' are dropped (dev-matched 185, dev-mismatched 168; train has "
        "none). Ids are '<genre>:<pairID>' (multinli.genre(example) gives the genre). Results "
        "are usually selected on dev-matched and reported on both dev sets. The .jsonl files "
        "have no published sha256 and are read unverified; the archive's is checked on fetch."
    ),
)

SPECS = (SPEC,)
