"""STS Benchmark (Cer et al., SemEval 2017): English sentence pairs from the STS tasks 2012-2017.

8,628 pairs in three genres (news, captions, forums) with a similarity score 0-5 (the mean of
crowd judgements), split by the organisers into train 5,749 / dev 1,500 / test 1,379. We read
`sts-{train,dev,test}.csv` (the bundled copy is gzipped, the originals work too):

    Example(left=sentence1, right=sentence2, label=score, id="genre/file/year/sid")

The files are tab-separated despite the `.csv` name, with no header and no quoting (sentences
contain `"`). Each row has 7 fields, `genre file year sid score sentence1 sentence2` (the
readme lists six and omits `sid`, the pair's number in its source file); 503 rows add two
source-attribution fields (Europe Media Monitor for 2016 headlines, Stack Exchange author
links for answer-answer), which we read past.
"""

from __future__ import annotations

from pathlib import Path

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
from attnmatch.tasks import RegressionTask, Task

FIELDS = ("genre", "file", "year", "sid", "score", "sentence1", "sentence2")
# The source attribution of each sentence, which some rows add (9 fields instead of 7).
SOURCE_FIELDS = ("source1", "source2")
MIN_SCORE, MAX_SCORE = 0, 5
SPLIT_FILES = {s: f"sts-{s}.csv.gz" for s in ("train", "dev", "test")}

OFFICIAL = RegressionTask(
    name="sts-benchmark",
    min_score=MIN_SCORE,
    max_score=MAX_SCORE,
    metrics=("pearson", "spearman", "mse"),
    description="STS Benchmark: Pearson r (and Spearman) over all pairs, scores 0-5.",
)


def read_sts_benchmark_csv(path: str | Path) -> list[Example]:
    """Parses one STS Benchmark file (`.csv` or `.csv.gz`), every row, in file order.

    Raises:
        DatasetFormatError: a row with other than 7 or 9 tab-separated fields, an empty
            sentence, or a score that is not a number in 0-5; the message names the file and
            the line.
    """
    examples = []
    for lineno, fields in tsv_rows(path, FIELDS, optional=SOURCE_FIELDS):
        genre, file, year, sid, score, sentence1, sentence2, *_sources = fields
        value = parse_score(score, MIN_SCORE, MAX_SCORE)
        if value is None:
            raise DatasetFormatError(
                f"{path}:{lineno}: score must be a number in {MIN_SCORE}-{MAX_SCORE}, got {score!r}"
            )
        if not sentence1 or not sentence2:
            row = "\t".join(fields)
            raise DatasetFormatError(f"{path}:{lineno}: empty sentence: {row!r}")
        pair_id = f"{genre}/{file}/{year}/{sid}"
        examples.append(Example(sentence1, sentence2, value, id=pair_id))
    return examples


SPEC = DatasetSpec(
    name="sts-benchmark",
    title="STS Benchmark",
    task=Task.of(OFFICIAL),
    splits=("train", "dev", "test"),
    split_files={split: (name,) for split, name in SPLIT_FILES.items()},
    files=(
        bundled(
            "sts-train.csv",
            "814385c6954f03ad052d402efc9253ebed01849c23e35de7619c922cb6fa8628",
            "0f71910b59aa1ad973c5897f0791f3b0965a92b8f82b1a95f3eea9f4162fda82",
        ),
        bundled(
            "sts-dev.csv",
            "abf194bec5bfca9ddefaa10a5f911a0f3d82b2c9ec5d12d1daedec5fd48a9339",
            "5d7e944d8b02734b07bfdb5df67db3420c64bed153fcaa1ba47ad03480cf4234",
        ),
        bundled(
            "sts-test.csv",
            "bb4bc5b979fbd0e9b6d4c06a9452610ad2d754635ecddd8f663cd78fb4868946",
            "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a",
        ),
        FileSpec("readme.txt", "e9488363d211c32ca5e912954f16eb9233cfed1b5b4b0475d0d812d35d7c8ef1"),
        FileSpec("LICENSE.txt", "3dfc3217395f8c5dd05c5f8995f25fe2f8fd258e6dd770b3de480749caee8c70"),
    ),
    folder="sts_benchmark",
    license="scores CC BY-SA 4.0; each source's text under its own terms (LICENSE.txt)",
    citation=(
        "Daniel Cer, Mona Diab, Eneko Agirre, Inigo Lopez-Gazpio and Lucia Specia. "
        "SemEval-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused "
        "Evaluation. SemEval 2017. https://aclanthology.org/S17-2001/"
    ),
    url="http://ixa2.si.ehu.es/stswiki/images/4/48/Stsbenchmark.tar.gz",
    protocol_description=(
        "Similarity regression on 0-5 over every pair: Pearson r (primary, the official "
        "measure), Spearman rho and MSE on the 1,379 test pairs; models are selected on dev "
        "(1,500), and the test set is meant to be used once."
    ),
    loader=file_loader(SPLIT_FILES, read_sts_benchmark_csv),
    make_protocol=lambda split, options: OFFICIAL,
    split_sizes={"train": 5_749, "dev": 1_500, "test": 1_379},
    notes=(
        "Tab-separated despite `.csv`, no header, quoting off (sentences contain '\"'). Fields: "
        "genre, file, year, sid, score, sentence1, sentence2 (the readme omits sid); 503 rows "
        "(train 197, dev 22, test 284) carry two extra source-attribution fields, ignored. "
        "The forum genre is spelt `main-forum` in train and `main-forums` in dev and test. "
        "Example ids are `genre/file/year/sid`, unique over the three files."
    ),
)

SPECS = (SPEC,)
