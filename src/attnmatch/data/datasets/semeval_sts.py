"""SemEval STS 2012-2016 (English): the original per-year sets, scored by Pearson per set.

Each year's release pairs `STS.input.<set>.txt` (one tab-separated sentence pair per line) with
`STS.gs.<set>.txt` (one gold score 0-5 per line, same order); we keep the originals' layout
`<year>/{train,test}/...` (the bundled inputs are gzipped, the originals work too):

    Example(sentence1, sentence2, label=score, group="<year>/<set>", id="<year>/<part>/<set>:<line>")

e.g. group "2015/images", "2012/surprise.OnWN"; the 2012 train and test sets of one source
share a group ("2012/MSRpar"). Evaluation reports Pearson per group and, as a year's score, the
pair-weighted mean of its sets (`RegressionTask(by_group=True)`).

Format quirks handled here:
- 2015 and 2016 gold files leave the line of an unscored pair EMPTY; those pairs are dropped
  (2015: 5,500 of 8,500 lines; 2016: 7,997 of 9,183), leaving the official 3,000 and 1,186.
- 2016 inputs, `STS2016.input.<set>.txt`, have 4 fields: sentence 1, sentence 2 and the source
  notes of each (attribution, which systems must not use); we read the first two. The release
  also has `.ascii` transliterations of the same inputs (and one extra blank last line); we read
  the UTF-8 `.txt` originals, which differ from them in 61 scored pairs ("résumé" vs "resume",
  curly vs straight quotes, "•" vs "*").
- 2013's SMT set is absent: its gold file is public but its input is distributed by the LDC
  only. The set is skipped, so test-2013 has 1,500 of the published 2,250 pairs.
- `2012/test/STS.gs.ALL.txt` (the five 2012 gold files concatenated) is not read.

Splits: the 2012 train files (`train-2012`), each year's test sets (`test-2012` .. `test-2016`)
and the usual "train on every earlier release" recipes: `train-2012-YYYY` is the 2012 train
files plus every test set of 2012 .. YYYY, so test-YYYY is trained on `train-2012-<YYYY-1>`
(test-2013 on `train-2012-2012`; test-2015 on `train-2012-2014` and test-2016 on
`train-2012-2015`, as He et al. 2016 did).
With option `holdout=True` a fixed, seeded 10% of every training set is held out of the
train-* splits and forms the matching dev-* splits, for model selection (see `holdout_ids`).
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.data.datasets._spec import (
    HOLDOUT_SEED,
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    open_text,
    parse_score,
    tsv_fields,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RegressionTask, Task

MIN_SCORE, MAX_SCORE = 0, 5
HOLDOUT_FRACTION = 0.1


@dataclass(frozen=True)
class StsSet:
    """One evaluation set of one release, e.g. `StsSet(2015, "test", "images")`.

    Args:
        year: 2012 .. 2016.
        part: "train" (2012 only) or "test".
        name: the set name in the file names, e.g. "surprise.OnWN".
    """

    year: int
    part: str
    name: str

    @property
    def group(self) -> str:
        """The evaluation group, "<year>/<set>"."""
        return f"{self.year}/{self.name}"

    @property
    def key(self) -> str:
        """The set's unique name, "<year>/<part>/<set>"; its example ids start with it."""
        return f"{self.year}/{self.part}/{self.name}"

    @property
    def _stem(self) -> str:
        return f"{self.year}/{self.part}/{'STS2016' if self.year == 2016 else 'STS'}"

    @property
    def input_name(self) -> str:
        """The input file as the release names it (the bundled copy adds `.gz`)."""
        return f"{self._stem}.input.{self.name}.txt"

    @property
    def gold_name(self) -> str:
        """The gold score file (bundled unchanged)."""
        return f"{self._stem}.gs.{self.name}.txt"

    @property
    def num_fields(self) -> int:
        """Fields per input line: the pair, plus the two source notes in 2016."""
        return 4 if self.year == 2016 else 2

    @property
    def has_unscored(self) -> bool:
        """Whether the gold file marks unscored pairs with an empty line (2015 and 2016)."""
        return self.year >= 2015


# The sets of each release, (year, part) -> names, in the order of the task papers.
RELEASES: dict[tuple[int, str], tuple[str, ...]] = {
    (2012, "train"): ("MSRpar", "MSRvid", "SMTeuroparl"),
    (2012, "test"): ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
    # SMT (750 pairs) is missing: its input is distributed by the LDC only.
    (2013, "test"): ("headlines", "OnWN", "FNWN"),
    (2014, "test"): ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
    (2015, "test"): ("answers-forums", "answers-students", "belief", "headlines", "images"),
    (2016, "test"): (
        "answer-answer",
        "headlines",
        "plagiarism",
        "postediting",
        "question-question",
    ),
}
SETS = tuple(StsSet(year, part, name) for (year, part), names in RELEASES.items() for name in names)


# sha256 of every file we know, bundled (.gz) and original names alike.
SHA256 = {
    "2012/test/00-readme.txt": "d47be1641ac98ac312de6f0746b65683df392f70d843eaac9fb10ebd4cb4cb63",
    "2012/test/STS.gs.MSRpar.txt": "5526be59228bc34ccb3cb6f1f56c0d7278d3419b8886713ae016fd92b151f19c",
    "2012/test/STS.gs.MSRvid.txt": "9c6096c6bcfb0144c8bbddb00900ca9198c88498630cd0c8f08d18365f1d7150",
    "2012/test/STS.gs.SMTeuroparl.txt": "708530c4d006d06881f3289fce35d624d7efe562dcf0fe5f8aa0eec3a135f6d4",
    "2012/test/STS.gs.surprise.OnWN.txt": "088d8ca22c0aa406e4a5d2e6e308a4f38b482b8e736c2445a38ffb6e4c4fb4fd",
    "2012/test/STS.gs.surprise.SMTnews.txt": "aa6dfc868db333c43dc59be14d46fa6587c7ebddc0d497e717f647bf35121cf1",
    "2012/test/STS.input.MSRpar.txt.gz": "8f2ed267628d503dc070b8b46ae911cffbec90a0c43c237a43bdd2d6e28be14a",
    "2012/test/STS.input.MSRpar.txt": "76bf7089f9e7c05732163a227b3ce679512554513eb783f2548b07d659bd733d",
    "2012/test/STS.input.MSRvid.txt.gz": "2462f27ca039d745080995d607cd63990de832852fff38a42c4b075eaba20748",
    "2012/test/STS.input.MSRvid.txt": "476d14034a241f71b832e4ae557dd6cdbe265b57c915570a2583f93b4456948d",
    "2012/test/STS.input.SMTeuroparl.txt.gz": "78e940cb9a8610f0bca9944ef6a705bde90d9c1678b6473a53ef138ee31a7922",
    "2012/test/STS.input.SMTeuroparl.txt": "dd31dbb6e7eef8a0d00347fe012f7cf372943167e30f60f6fb3b10219a41941f",
    "2012/test/STS.input.surprise.OnWN.txt.gz": "ab3aa204f64c9d13c929f683729df24dfbf283d690458bbdc27c7d06d59ce0a5",
    "2012/test/STS.input.surprise.OnWN.txt": "07ec7b91348aece0873b41f7fc4e76e9fddf05bdb82c048c98d92f5db0bec07d",
    "2012/test/STS.input.surprise.SMTnews.txt.gz": "1308f148e6af7a22615a1882530b4a757861e7600fac4560c67618967df0f4a6",
    "2012/test/STS.input.surprise.SMTnews.txt": "2788a98ef33c3b7b704ef4891fe863cfcf061338e8aa41cb737d0f137f3ba03c",
    "2012/train/00-readme.txt": "bc0641542694710006cb02f7e5975ada74cfeb83ff9f0f72cb5b1a6aa35fdca6",
    "2012/train/STS.gs.MSRpar.txt": "8c21613b5416fb45f19434028eb35015165357d0d0d8518c755e44af206f6892",
    "2012/train/STS.gs.MSRvid.txt": "00d4118c99db24ec70d84c61aefdd0b7c91a7961ddab0cecdbde3d48d6a750a6",
    "2012/train/STS.gs.SMTeuroparl.txt": "b679e8b839a7d7e13ac36d66b06debd6a3abdc4fb4261db7b0958b758db935e8",
    "2012/train/STS.input.MSRpar.txt.gz": "19040027e56b22b88a3f9cd54ff0aa4da520ce0520f48811582a79b9c8a15885",
    "2012/train/STS.input.MSRpar.txt": "53b13f0ff68162a4f49051835b4e6ef91111f8dd3e8ffcae5eafd8db70384f90",
    "2012/train/STS.input.MSRvid.txt.gz": "f022b587a6d0aceb882be6837bfaca468f0cb6117eb6fa77642eb0aa95403aad",
    "2012/train/STS.input.MSRvid.txt": "06e8689cf0eba38a45475021bd50be3d06c543304533eeac526f9b58ce91fc29",
    "2012/train/STS.input.SMTeuroparl.txt.gz": "b03a364c5e30eae7492d2b5c8905fb8e3ba1b447a99192166d3355394d228f67",
    "2012/train/STS.input.SMTeuroparl.txt": "d4751dc01a1e2f3f2044bc3e84a5f669cf0665411c5966e65f9d8bbd499ad41b",
    "2013/test/00-readme.txt": "531ee28a3787b11dd14dda8d809e724479d87f9705120494aad584c9cb14a6ce",
    "2013/test/STS.gs.FNWN.txt": "8ca95b7228119578e2007839cf7969f22c4f1fd41fd610c4b7f9683072d98066",
    "2013/test/STS.gs.OnWN.txt": "0cd497aaddb00a2fb6db25f77bccfc09e8aa012e11549b81b434bab1a27ad954",
    "2013/test/STS.gs.SMT.txt": "a09775ba2fafc9cbe0a7d0a08f0c729789b0d6c99dc4867a86b45b71a73f004e",
    "2013/test/STS.gs.headlines.txt": "f49f64089011436dd296ef384c07160219406feef7dc4b9fa2af52a519f32bc6",
    "2013/test/STS.input.FNWN.txt.gz": "363f32e4bd2fe0d7a2ed5366a280bf99b624102664bbcab9da2c5ece654ae04d",
    "2013/test/STS.input.FNWN.txt": "b48fc64cd85703ac6431f8ea6722f325fe9620fd4f33b3d5c24dd89c553e74bc",
    "2013/test/STS.input.OnWN.txt.gz": "9dfc39a0bc412f1ab8683d55c32155b0b94703fe79a59f7821ca718b62f5e5c7",
    "2013/test/STS.input.OnWN.txt": "127c66889627f26dc11864dc9be4ba1e4895ed60125985c755429ad588e4b9c8",
    "2013/test/STS.input.headlines.txt.gz": "f2dd4c10eae3ede74e4bbab325eb61b3df3f5e719113a89f02575246045b120a",
    "2013/test/STS.input.headlines.txt": "885e6149fff28a79591ba464c13626d03593b822c88c7c04b6564354d31c7561",
    "2014/test/00-readme.txt": "9fe9d64362ac42ed24010d5b00f227235a660dc2466fba743f31051fd121ef73",
    "2014/test/STS.gs.OnWN.txt": "1c80147df270ea4cfce14a47ed29f8a2f10d5dc016d02836077fd786ff7f535b",
    "2014/test/STS.gs.deft-forum.txt": "ba6dc76696b5c93985590a325b4d142449932cdf0d715b2bab1b1743fe3c488c",
    "2014/test/STS.gs.deft-news.txt": "105c5b333abd50c274efb4dae9e3e0dab36ed63eee780cfb49955b1586bd62f2",
    "2014/test/STS.gs.headlines.txt": "f243c34647255cd0b994565ed4f58dd31506e7d9c9d6250d1a6dd14095625832",
    "2014/test/STS.gs.images.txt": "fc994ebacc7074c332626fa9e29542d7340a48a3cdb999b47cdb59c378523a62",
    "2014/test/STS.gs.tweet-news.txt": "0098c644bfeaa2d511a8297b1940771865900c372c9dd49a62726dc5ec02c9a3",
    "2014/test/STS.input.OnWN.txt.gz": "8b6c28c7d9b962b5b6adb4c43783a01bb04ab1f349defc4fc3a6fc60ab82977f",
    "2014/test/STS.input.OnWN.txt": "a227d5fe1c1f729a52a0b39b5b36d3225e1bca3c278e7ed392cac2ecd3990f1c",
    "2014/test/STS.input.deft-forum.txt.gz": "9c2697bb021ba1cecef2f22bf3f874f75d599fed3351e8d2dd30d413200d8728",
    "2014/test/STS.input.deft-forum.txt": "8b48aa15bb850e2827446f6e98cc3c5123ff283924b4571a409aa2fab73e35c6",
    "2014/test/STS.input.deft-news.txt.gz": "a26ad5772bb72effe39d7d73292ad2ba354accd36a0f26f7a23394585d1f264d",
    "2014/test/STS.input.deft-news.txt": "92df5b8c48873cbfba36b73a77955fb965c9244776df9e9c2c4d2f6155bdeefe",
    "2014/test/STS.input.headlines.txt.gz": "b9696ecb73acf9a6290c5e4c50f740c942384d94703eb838db6352d714f5431c",
    "2014/test/STS.input.headlines.txt": "a19f84294325c62a2a403b59957196fd7737f86654ded0e04e0b54bc4a8bcf9e",
    "2014/test/STS.input.images.txt.gz": "22d080ce835431c4623249fd23caaeafa1c76d3c6bb03bc1326d428d359ad21f",
    "2014/test/STS.input.images.txt": "cec1b3c08b0e4c88aeaf8dca047f5b28f4a8588eeef58475e0f16491d2bb7193",
    "2014/test/STS.input.tweet-news.txt.gz": "cdcf91518947a6a6c7f2d8dfc7ccd2b65ccd186427ee8fd2dcc7042824f4317c",
    "2014/test/STS.input.tweet-news.txt": "250d29ec9394e35443b2a73016ccc55e11b20939a3b8ee3bea9a858ba2f9adc0",
    "2015/test/00-readme.txt": "38fe35ef21a0f224b6cc51e00d138810063521cd90458a7d77e4e0aa3a79542d",
    "2015/test/STS.gs.answers-forums.txt": "1644301a7540e5484da285002e9269062852efb2272be614cad99c9530f6a102",
    "2015/test/STS.gs.answers-students.txt": "028db213140f8c7aef7497c4ae38b6380938f20359852231669c83dce11c3701",
    "2015/test/STS.gs.belief.txt": "5736192faaccbdbecd0ef6b73ec04b24115cd2e48d55dc3b1b170da3d2a81c75",
    "2015/test/STS.gs.headlines.txt": "e8e432f769c8a94ddb62ae3343890ac24a9dd78a116d56c707313bc59413dd56",
    "2015/test/STS.gs.images.txt": "ed8878209098c77ca7f02ac413d3fd698f92ad3425999555e50fda89fc46012a",
    "2015/test/STS.input.answers-forums.LICENSE": "65718ec23624d97933308adc08cb270db798cdd5593d35501be9bfda5ba1a28a",
    "2015/test/STS.input.answers-forums.txt.gz": "3edc1aff987e488b3556903f095c4f44be741067944919c146e52b64471f19d0",
    "2015/test/STS.input.answers-forums.txt": "fe8e460a74e8e38704ac4e6ddcedec89fd6e51cd0467d6f4301b444b259688e1",
    "2015/test/STS.input.answers-students.txt.gz": "de6473f72ea9e06bf0360934c01a24e6e8bb52fc3beccfbce3bfa2c129f30bb5",
    "2015/test/STS.input.answers-students.txt": "16eedf46fb3b29822b275a0ddcff8e873a6eb4bafba244a17c4049ffc318d62a",
    "2015/test/STS.input.belief.txt.gz": "b069f76fd87509d3ec2ec465714d5e1ff29ffe0dbd84b52cc30dd4cce77d0116",
    "2015/test/STS.input.belief.txt": "6e924a19fb1abbce01a8666f07766250b46a96c89272de8e5b01d0905bc61b79",
    "2015/test/STS.input.headlines.txt.gz": "06814698d2552b62f4ccd1441000b8f2cca6cb356e5373fa64c5d06184a94dfe",
    "2015/test/STS.input.headlines.txt": "779c195c54b72282bd3c8ca1dbb09a4155a39b2acd13d5cf819d8555d717cf6a",
    "2015/test/STS.input.images.txt.gz": "8e62c5d140134b8fca9ceada7510ffa255bc6d442cf7c581df1e658a26ce6a34",
    "2015/test/STS.input.images.txt": "6f332542a75bcd18ea1442fc129306f746cd7ade7010ea274e763bfca576cc47",
    "2016/test/LICENSE.txt": "94b7380d16f832ae97bcb48536f22fe9a22e8e20f8cf88a9298f65c556e3a6f2",
    "2016/test/README.txt": "1b74b4c84a59f139153f0348e212bfdb33dffd3b008dfb2c4f7728c4fa27141f",
    "2016/test/STS2016.gs.answer-answer.txt": "332efd741b0cb247d20dd2a6cec854360c921c7e6b395f328f562d8d26057214",
    "2016/test/STS2016.gs.headlines.txt": "01e33a95996201a6e81e3cce9eda0f15048b77613ea64dce2929bb35479f7d85",
    "2016/test/STS2016.gs.plagiarism.txt": "29984944a91aaff484f2b2e5d4d434fc8a6f5ef6f578a880cccd2786f5142fdc",
    "2016/test/STS2016.gs.postediting.txt": "81947ed9dbe7f85b7bd249df68ed5c7b2f16f06390ad568eb5554b1e26bc5577",
    "2016/test/STS2016.gs.question-question.txt": "cf9ebf9d140191f73620cda0560947ad9283c910735d0d541b8a401a5e64afb0",
    "2016/test/STS2016.input.answer-answer.txt.gz": "296ca3664250a79d9584b8db2b690c931441a90313342c1ca2ef2de81fc112fc",
    "2016/test/STS2016.input.answer-answer.txt": "7daf2cd87751a0f8b754fe705bdb280c31591d9febf5b6fce9dcb10d3b8a72a7",
    "2016/test/STS2016.input.headlines.txt.gz": "8b7b6bab16a1d67426ca7fea2d886cd6272ee8de84893db9485ca3b5bef05410",
    "2016/test/STS2016.input.headlines.txt": "ec8ee1124e71f4cc18c861f542fa8f32c86fef0703de31b0f7a02e22e935d992",
    "2016/test/STS2016.input.plagiarism.txt.gz": "9582ef2c8fad158daa731adbb5f24f258483d9d5fd5c8c13077c2ebbd85c5c8c",
    "2016/test/STS2016.input.plagiarism.txt": "6760cb210f4423262fd8962674e6668409690ce888bb1617659c6886cf004019",
    "2016/test/STS2016.input.postediting.txt.gz": "ff9a2b0a97afeb35b222283e5dc9279080971b4156257e57e6ef2acf724d4a83",
    "2016/test/STS2016.input.postediting.txt": "a8a66185877785307803c99a0899d65aefb062c4bf7689560b95d37bb0c05474",
    "2016/test/STS2016.input.question-question.txt.gz": "f96dc8f789d212b6f0229a89056bd1dcbe9e293fb1cd5f49a9f96fec8e06941d",
    "2016/test/STS2016.input.question-question.txt": "b7f95dead3d8c59fbaacbb135643c6ebd322682db6502fdb24d4ce83c9bf016d",
}


def read_sts_set(input_path: str | Path, gold_path: str | Path, sts_set: StsSet) -> list[Example]:
    """Parses one set: its input and gold files, line by line in parallel.

    Quoting is off (sentences contain `"`); sentences are kept as they are, surrounding spaces
    included. Pairs whose gold line is empty are unscored and dropped (2015 and 2016 only).

    Args:
        input_path: `STS.input.<set>.txt` (or `.txt.gz`).
        gold_path: `STS.gs.<set>.txt`.
        sts_set: which set this is: fixes the field count, whether empty gold lines are
            allowed, and the examples' group and ids.

    Returns:
        The scored pairs, file order kept; ids "<year>/<part>/<set>:<line>" (1-based line of
        both files).

    Raises:
        DatasetFormatError: the two files differ in line count, an input line has the wrong
            number of fields or an empty sentence, or a gold line is not a number in 0-5 (or
            is empty before 2015); the message names the file and the line.
    """
    with open_text(input_path) as f:
        inputs = f.readlines()
    with open_text(gold_path) as f:
        golds = f.readlines()
    if len(golds) != len(inputs):
        lineno = min(len(golds), len(inputs)) + 1
        raise DatasetFormatError(
            f"{gold_path}:{lineno}: expected one gold line per pair: {len(golds)} gold lines "
            f"for the {len(inputs)} pairs of {input_path}"
        )
    examples = []
    for lineno, (line, gold) in enumerate(zip(inputs, golds, strict=True), start=1):
        fields = tsv_fields(line, sts_set.num_fields, path=input_path, lineno=lineno)
        sentence1, sentence2 = fields[:2]
        if not sentence1.strip() or not sentence2.strip():
            row = "\t".join(fields)
            raise DatasetFormatError(f"{input_path}:{lineno}: empty sentence: {row!r}")
        text = gold.strip()
        if not text and sts_set.has_unscored:
            continue
        score = parse_score(text, MIN_SCORE, MAX_SCORE)
        if score is None:
            empty = " (an empty line marks an unscored pair only in 2015 and 2016)"
            raise DatasetFormatError(
                f"{gold_path}:{lineno}: expected a score in {MIN_SCORE}-{MAX_SCORE}, "
                f"got {text!r}{'' if text else empty}"
            )
        examples.append(
            Example(
                sentence1,
                sentence2,
                score,
                group=sts_set.group,
                id=f"{sts_set.key}:{lineno}",
            )
        )
    return examples


def holdout_ids(sts_set: StsSet, ids: Sequence[str]) -> frozenset[str]:
    """The ids of `sts_set` held out for model selection when `holdout=True`.

    A seeded permutation per set (seed: `HOLDOUT_SEED` and a CRC-32 of `sts_set.key`) picks
    round(10%) of its scored pairs. The choice depends only on the set, so every split that
    contains a set holds out the same pairs of it, and the held-out slice of
    `train-2012-2014` is that of `train-2012-2013` plus 10% of each 2014 set.

    Args:
        sts_set: the set.
        ids: the ids of all its scored pairs, in file order.
    """
    rng = np.random.default_rng([HOLDOUT_SEED, zlib.crc32(sts_set.key.encode())])
    order = rng.permutation(len(ids))
    return frozenset(ids[i] for i in order[: round(HOLDOUT_FRACTION * len(ids))])


# Training recipes "2012" (the 2012 train files) and "2012-YYYY" (plus every test set of
# 2012 .. YYYY): each gives a train-* split and, with holdout=True, a dev-* split.
RECIPES: dict[str, tuple[tuple[int, str], ...]] = {
    "2012": ((2012, "train"),),
    **{
        f"2012-{last}": ((2012, "train"), *((year, "test") for year in range(2012, last + 1)))
        for last in range(2012, 2016)
    },
}
TEST_YEARS = tuple(range(2012, 2017))
SPLIT_RELEASES: dict[str, tuple[tuple[int, str], ...]] = {
    **{f"train-{recipe}": releases for recipe, releases in RECIPES.items()},
    **{f"dev-{recipe}": releases for recipe, releases in RECIPES.items()},
    **{f"test-{year}": ((year, "test"),) for year in TEST_YEARS},
}
SPLIT_SETS: dict[str, tuple[StsSet, ...]] = {
    split: tuple(s for s in SETS if (s.year, s.part) in releases)
    for split, releases in SPLIT_RELEASES.items()
}
DEV_SPLITS = tuple(split for split in SPLIT_RELEASES if split.startswith("dev-"))

OFFICIAL = RegressionTask(
    name="semeval-sts",
    min_score=MIN_SCORE,
    max_score=MAX_SCORE,
    metrics=("pearson", "spearman", "mse"),
    by_group=True,
    description=(
        "SemEval STS: Pearson r per set; a year's score is the pair-weighted mean over its sets."
    ),
)
HOLDOUT = replace(
    OFFICIAL,
    name="semeval-sts-holdout",
    description=(
        "Model selection only: a seeded 10% of each training set, held out from training; "
        "pair-weighted mean of per-set Pearson r."
    ),
)


def _load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    holdout = options["holdout"]
    if split in DEV_SPLITS and not holdout:
        raise ValueError(
            f"semeval-sts: split {split!r} exists only with holdout=True (it is the 10% held "
            f"out of train-{split.removeprefix('dev-')}); load it with holdout=True"
        )
    examples = []
    for sts_set in SPLIT_SETS[split]:
        pairs = read_sts_set(paths[f"{sts_set.input_name}.gz"], paths[sts_set.gold_name], sts_set)
        if holdout and not split.startswith("test-"):
            held = holdout_ids(sts_set, [ex.id for ex in pairs if ex.id is not None])
            want_held = split in DEV_SPLITS
            pairs = [ex for ex in pairs if (ex.id in held) == want_held]
        examples.extend(pairs)
    return examples


def _protocol(split: str, options: Mapping[str, Any]) -> RegressionTask:
    return HOLDOUT if split in DEV_SPLITS else OFFICIAL


def _file(name: str) -> FileSpec:
    if name.endswith(".txt") and ".input." in name:  # inputs are bundled gzipped
        return bundled(name, SHA256[f"{name}.gz"], SHA256[name])
    return FileSpec(name, SHA256[name])


DOC_FILES = (
    "2012/train/00-readme.txt",
    "2012/test/00-readme.txt",
    "2013/test/00-readme.txt",
    # The gold scores of the 2013 SMT set, whose input is not public: kept, never read.
    "2013/test/STS.gs.SMT.txt",
    "2014/test/00-readme.txt",
    "2015/test/00-readme.txt",
    "2015/test/STS.input.answers-forums.LICENSE",
    "2016/test/README.txt",
    "2016/test/LICENSE.txt",
)
# The official archives, per release: (URL, its top folder). `url` can name only one.
ARCHIVES = {
    (2012, "train"): ("http://ixa2.si.ehu.es/stswiki/images/e/e4/STS2012-en-train.zip", "train"),
    (2012, "test"): ("http://ixa2.si.ehu.es/stswiki/images/4/40/STS2012-en-test.zip", "test-gold"),
    (2013, "test"): ("http://ixa2.si.ehu.es/stswiki/images/2/2f/STS2013-en-test.zip", "test-gs"),
    (2014, "test"): (
        "http://ixa2.si.ehu.es/stswiki/images/8/8c/STS2014-en-test.zip",
        "sts-en-test-gs-2014",
    ),
    (2015, "test"): (
        "http://ixa2.si.ehu.es/stswiki/images/d/da/STS2015-en-test.zip",
        "test_evaluation_task2a",
    ),
    (2016, "test"): (
        "http://ixa2.si.ehu.es/stswiki/images/9/98/STS2016-en-test.zip",
        "sts2016-english-with-gs-v1.0",
    ),
}

SPEC = DatasetSpec(
    name="semeval-sts",
    title="SemEval STS 2012-2016 (English)",
    task=Task.of(OFFICIAL),
    splits=tuple(SPLIT_RELEASES),
    split_files={
        split: tuple(name for s in sets for name in (f"{s.input_name}.gz", s.gold_name))
        for split, sets in SPLIT_SETS.items()
    },
    files=(
        *(_file(name) for s in SETS for name in (s.input_name, s.gold_name)),
        *(_file(name) for name in DOC_FILES),
    ),
    folder="semeval_sts",
    license="per year and source (each year's readme and LICENSE files)",
    citation=(
        "Eneko Agirre et al. SemEval-2012 Task 6 (S12-1051); *SEM 2013 shared task (S13-1004); "
        "SemEval-2014 Task 10 (S14-2010); SemEval-2015 Task 2 (S15-2045); SemEval-2016 Task 1 "
        "(S16-1081): Semantic Textual Similarity. https://aclanthology.org/"
    ),
    url=ARCHIVES[(2012, "train")][0],
    protocol_description=(
        "Pearson r per set (group '<year>/<set>'); a year's score is the mean of its sets' "
        "Pearson weighted by their pair counts (test-2015: 5 sets, 3,000 pairs; test-2016: 5 "
        "sets, 1,186). Unscored pairs (empty gold lines, 2015-2016) are dropped. Train on every "
        "earlier release: test-YYYY on train-2012-<YYYY-1> (the 2012 train files plus the test "
        "sets of 2012 .. YYYY-1), test-2012 on train-2012. Option holdout=True (for model "
        "selection, since the official data has no dev sets): every train-* split drops a fixed 10% of each of its sets "
        f"(seeded permutation per set, seed {HOLDOUT_SEED}), which form the matching dev-* "
        "split; a pair is held out in every split that contains it. The test sets are never "
        "used for selection. 2013 SMT is missing (LDC), so test-2013 and every recipe from "
        "train-2012-2013 on lack its 750 pairs."
    ),
    options={"holdout": (False, True)},
    loader=_load,
    make_protocol=_protocol,
    split_sizes={
        "train-2012": 2_234,
        "train-2012-2012": 5_342,
        "train-2012-2013": 6_842,
        "train-2012-2014": 10_592,
        "train-2012-2015": 13_592,
        "test-2012": 3_108,
        "test-2013": 1_500,
        "test-2014": 3_750,
        "test-2015": 3_000,
        "test-2016": 1_186,
    },
    manual_download=(
        "the five releases are separate archives (listed in the notes) whose folders and file "
        "names overlap; download them by hand into <folder>/<year>/{train,test}/ as the bundled "
        "copy in data/semeval_sts is laid out, or use that copy."
    ),
    notes=(
        "Unscored pairs (empty gold lines) dropped: 2015 answers-forums 1,625 of 2,000, "
        "answers-students 750 of 1,500, belief 1,625 of 2,000, headlines 750 of 1,500, images "
        "750 of 1,500; 2016 answer-answer 1,318 of 1,572, headlines 1,249 of 1,498, plagiarism "
        "1,041 of 1,271, postediting 3,043 of 3,287, question-question 1,346 of 1,555. "
        "2013 SMT skipped (input LDC-only; its gold file is kept): test-2013 has 1,500 of the "
        "published 2,250 pairs, and train-2012-2015 13,592 of the 14,342 He et al. (2016) list. "
        "2016 inputs have 4 fields (sentence 1, sentence 2, source notes 1, 2); we read the "
        "UTF-8 .txt files, not the .ascii transliterations (61 scored pairs differ). "
        "The 2012 train readme describes an id column that the files do not have (2 fields). "
        "Sentences are kept verbatim: some have surrounding spaces (all 300 of 2014 deft-news). "
        "265 pair texts occur more than once (e.g. 2013 and 2014 OnWN share 68); the holdout "
        "is by pair, so 50 of the 1,360 dev-2012-2015 pairs have a twin text in "
        "train-2012-2015. Official archives, one per release: "
        + ", ".join(url for url, _ in ARCHIVES.values())
        + ". `url` names the first, so `attnmatch datasets fetch` cannot get this dataset yet: "
        "download the archives by hand into <year>/{train,test}/."
    ),
)

SPECS = (SPEC,)
