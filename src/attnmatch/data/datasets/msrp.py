"""Microsoft Research Paraphrase Corpus (Dolan, Quirk and Brockett, 2004-2005): paraphrase pairs.

5,801 pairs of news sentences, each judged by two annotators (a third resolving disagreements)
as semantically equivalent ("paraphrase", 67%) or not. Microsoft ships two files,
`msr_paraphrase_train.txt` (4,076 pairs) and `msr_paraphrase_test.txt` (1,725). We read the
split of brmson/dataset-sts (`data/para/msr/`), which keeps the official test file and carves a
validation set out of the official train file (its README, `README.brmson.md`: "An extra
validation split is added by moving the last 500 pairs of the training set"):

    train  msr-para-train.tsv  the first 3,576 pairs of msr_paraphrase_train.txt (2,407 positive)
    dev    msr-para-val.tsv    its last 500 pairs (346 positive); together 4,076 / 2,753 as
                               Microsoft's train file
    test   msr-para-test.tsv   msr_paraphrase_test.txt (1,725 pairs, 1,147 positive)

    Example(left=#1 String, right=#2 String, label=Quality, id="#1 ID-#2 ID")

Class 0 is "not_paraphrase", 1 "paraphrase"; F1 is the F1 of the paraphrase class. The files
are tab-separated with the header `Quality #1 ID #2 ID #1 String #2 String` and CRLF line ends;
train and test start with a byte-order mark (the val file, cut from the middle of the train
file, does not). Sentences contain `"`: quoting is off. The bundled copy is gzipped; the
uncompressed files of dataset-sts work too.

Microsoft's README.html says the first 30% of the pairs became "training" and the last 70%
"test"; the files shipped are the other way round (4,076 train, 1,725 test). README.brmson.md's
remark that "the train and test sets are swapped" refers to that wording: every paper uses the
4,076/1,725 split, as we do.
"""

from __future__ import annotations

from pathlib import Path

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    file_loader,
    tsv_rows,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import ClassificationTask, Task

HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")
CLASS_NAMES = ("not_paraphrase", "paraphrase")
SPLIT_FILES = {
    "train": "msr-para-train.tsv.gz",
    "dev": "msr-para-val.tsv.gz",
    "test": "msr-para-test.tsv.gz",
}

OFFICIAL = ClassificationTask(
    name="msrp",
    num_classes=2,
    class_names=CLASS_NAMES,
    metrics=("accuracy", "f1"),
    primary="accuracy",
    description="MSRP: accuracy and F1 of the paraphrase class on the 1,725 test pairs.",
)


def read_msrp_tsv(path: str | Path) -> list[Example]:
    """Parses one MSRP file (`.tsv`, `.tsv.gz` or Microsoft's `.txt`), every row, in file order.

    A leading byte-order mark is dropped; lines may end in CRLF or LF; quoting is off.

    Raises:
        DatasetFormatError: a wrong header, a row without exactly 5 fields, a Quality other
            than 0/1 or a non-numeric ID; the message names the file and the line.
    """
    examples = []
    for lineno, (quality, id1, id2, string1, string2) in tsv_rows(path, header=HEADER):
        if quality not in ("0", "1"):
            raise DatasetFormatError(f"{path}:{lineno}: Quality must be 0 or 1, got {quality!r}")
        if not (id1.isdigit() and id2.isdigit()):
            raise DatasetFormatError(
                f"{path}:{lineno}: #1 ID and #2 ID must be integers, got {id1!r}, {id2!r}"
            )
        examples.append(Example(string1, string2, int(quality), id=f"{id1}-{id2}"))
    return examples


SPEC = DatasetSpec(
    name="msrp",
    title="Microsoft Research Paraphrase Corpus",
    task=Task.of(OFFICIAL),
    splits=("train", "dev", "test"),
    split_files={split: (name,) for split, name in SPLIT_FILES.items()},
    files=(
        bundled(
            "msr-para-train.tsv",
            "7eea1be0f74f8fb6ea22d0c5eacba1c04bd9bbe81f39715cfd86f1bc8c2c41ce",
            "446b9a5fa4e8d526b99f1d635f036f89063749783f5d3464ee8c1879724d406d",
        ),
        bundled(
            "msr-para-val.tsv",
            "e51d5790028950bfd9939a1e775ae655e7a597a2989071b8f0841ccd6c8053d2",
            "7e5d0ee4ec392b062af73c7cffe82f0725e5b08f6bfdf0915f31bbc470b8bacf",
        ),
        bundled(
            "msr-para-test.tsv",
            "20ccc1309163adfd143b66298db672499cee378a5bc87c936608dde5eea41444",
            "51a1f197d8786712d2f0d97700f5be653b7488a96cde00e158159350d23e3d90",
        ),
        FileSpec(
            "LICENCE.html", "dcfa8f5fd4ab9fdf4526f9ce0882327e8ee8d792b39f58783de53255a48d933c"
        ),
        FileSpec("README.html", "61d3c7c52b56c54a4d48a2373016a67763f82ed5cc28772d627d47d46e729df2"),
        # dataset-sts's data/para/msr/README.md, renamed so it does not pass for Microsoft's.
        FileSpec(
            "README.brmson.md", "78a94ea06dbd022a1bf6dfbfecab45db7f0914a1368873ceb45787db7ff2b042"
        ),
    ),
    folder="msrp",
    license="Microsoft Research Shared Source License, non-commercial use (LICENCE.html)",
    citation=(
        "William B. Dolan and Chris Brockett. Automatically Constructing a Corpus of Sentential "
        "Paraphrases. IWP 2005. https://aclanthology.org/I05-5002/"
    ),
    # A Windows installer (extract with `cabextract`); `datasets fetch` cannot unpack it. The
    # train/val/test files declared here are those of github.com/brmson/dataset-sts.
    url=(
        "https://download.microsoft.com/download/D/4/6/"
        "D46FF87A-F6B9-4252-AA8B-3604ED519838/MSRParaphraseCorpus.msi"
    ),
    manual_download=(
        "Microsoft distributes MSRP as an .msi installer: extract msr_paraphrase_train.txt and "
        "msr_paraphrase_test.txt (e.g. with cabextract), or use the train/val/test split bundled "
        "in data/msrp (from brmson/dataset-sts)."
    ),
    protocol_description=(
        "Binary classification over every pair, class 1 = paraphrase: accuracy (primary) and "
        "F1 of the paraphrase class on the 1,725 test pairs. Models are selected on `dev`, the "
        "last 500 pairs of Microsoft's train file (dataset-sts's msr-para-val.tsv)."
    ),
    loader=file_loader(SPLIT_FILES, read_msrp_tsv),
    make_protocol=lambda split, options: OFFICIAL,
    split_sizes={"train": 3_576, "dev": 500, "test": 1_725},
    notes=(
        "train and dev are Microsoft's 4,076-pair train file split 3,576 / 500 (its last 500 "
        "pairs) by brmson/dataset-sts; test is Microsoft's 1,725-pair test file. Tab-separated "
        "with a header, CRLF line ends, a byte-order mark on train and test; sentences contain "
        "'\"' (quoting off). Classes: 0 not_paraphrase, 1 paraphrase (about 67% of pairs). "
        "The official download is an .msi installer that `datasets fetch` cannot unpack: "
        "extract it with cabextract, or take the files from brmson/dataset-sts."
    ),
)

SPECS = (SPEC,)
