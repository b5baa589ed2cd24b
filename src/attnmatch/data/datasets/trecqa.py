"""TrecQA (Wang, Smith and Mitamura, EMNLP-CoNLL 2007; Yao et al., NAACL 2013): answer sentence
selection for TREC QA track questions.

Each pair joins a factoid question (TREC 8-13) with a candidate sentence from the TREC document
collections, labelled 1 if it contains the answer. We read the versions everyone uses: the
manually edited TRAIN/DEV/TEST of Yao et al. (2013) as processed by Castor (`processed/<split>/`:
lower-cased, space-joined tokens, one pair per line across `a.toks`, `b.toks`, `sim.txt` and
`id.txt`) or, with `source="xml"`, rebuilt from the jacana pseudo-XML; both give identical
examples:

    Example(left=question, right=sentence, label=0/1, group=question id, id="<qid>:<k>")

where k numbers a question's candidates from 0 in file order. Splits:
    train (4,718 pairs, 93 questions), raw-dev (1,148; 81), raw-test (1,517; 95),
    clean-dev (1,117; 65), clean-test (1,442; 68): clean = raw without the questions lacking
        a correct or an incorrect candidate (Rao, He and Lin, CIKM 2016).
    train-all-wang2007 (53,426 pairs, 1,229 questions), NON-STANDARD: TRAIN-ALL rebuilt from Wang
        et al.'s original Train1-2393 POSInput files (`rebuild_train_all`); 6,420 positives and
        47,006 negatives against 6,403 / 47,014 in the standard TRAIN-ALL, whose processed
        answers file (`processed/train-all/b.toks`) is missing here.

Options:
    source: "processed" (default) reads `processed/<split>/`; "xml" rebuilds the same examples
        from `jacana_xml/{TRAIN,DEV,TEST}.xml` (`read_jacana_xml`). Ignored for
        train-all-wang2007.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnmatch.data.datasets._spec import (
    DatasetFormatError,
    DatasetSpec,
    FileSpec,
    bundled,
    open_text,
)
from attnmatch.data.schema import Example
from attnmatch.tasks import RankingTask, non_standard

SPLITS = ("train", "raw-dev", "raw-test", "clean-dev", "clean-test", "train-all-wang2007")
TRAIN_ALL = "train-all-wang2007"
CLEAN_SPLITS = ("clean-dev", "clean-test")
XML_OF_SPLIT = {
    "train": "TRAIN",
    "raw-dev": "DEV",
    "raw-test": "TEST",
    "clean-dev": "DEV",
    "clean-test": "TEST",
}
# The four files a processed split is read from, in Example order (question, answer, label, qid);
# boundary.txt and numrels.txt (question offsets, positives per question) are bundled, not read.
PROCESSED_FILES = ("a.toks", "b.toks", "sim.txt", "id.txt")
WANG2007 = "wang2007_train2393_original/Train1-2393"
WANG2007_FILES = (
    f"{WANG2007}.Question.POSInput.gz",
    f"{WANG2007}.Positive-M.POSInput.gz",
    f"{WANG2007}.Negative-M.POSInput.gz",
)
# A sentence line of the POSInput files that starts with this SGML paragraph mark is dropped by
# `rebuild_train_all` (one positive of question 1697, one negative of question 2048).
SGML_PARAGRAPH = "< P >"

RAW = RankingTask(
    name="trecqa-raw",
    require_positive=True,
    require_negative=True,
    description=(
        "TrecQA raw: MAP/MRR over questions with both a correct and an incorrect candidate "
        "(raw-dev 65 of 81, raw-test 68 of 95)."
    ),
)
CLEAN = RankingTask(
    name="trecqa-clean",
    require_positive=True,
    require_negative=True,
    description=(
        "TrecQA clean: MAP/MRR over the clean-dev (65) / clean-test (68) questions, each with "
        "both a correct and an incorrect candidate."
    ),
)
TRAIN_ALL_REBUILT = non_standard(
    RAW,
    "trecqa-train-all-wang2007",
    "TRAIN-ALL rebuilt from Wang et al.'s Train1-2393 files (6,420 positives, 47,006 "
    "negatives; the standard TRAIN-ALL has 6,403 / 47,014).",
)


# --- processed/<split>/{a.toks,b.toks,sim.txt,id.txt} -----------------------------------------


def _read_lines(path: str | Path) -> list[str]:
    with open_text(path) as f:
        return [line.rstrip("\r\n") for line in f]


def read_processed(
    a_toks: str | Path, b_toks: str | Path, sim_txt: str | Path, id_txt: str | Path
) -> list[Example]:
    """Parses one processed split: line i of the four files is one pair, in file order.

    Args:
        a_toks: questions (lower-cased tokens joined by spaces).
        b_toks: candidate sentences (same normalisation).
        sim_txt: labels, 0 or 1.
        id_txt: question ids (e.g. "32.1"); a question's pairs are consecutive.

    Raises:
        DatasetFormatError: files with different line counts (naming the first line the shorter
            file lacks), an empty text, a label other than 0/1, an empty or spaced id, an id
            that reappears after another question, or a question text that changes within one
            id; the message names the file and the line.
    """
    paths = (a_toks, b_toks, sim_txt, id_txt)
    columns = [_read_lines(p) for p in paths]
    counts = [len(c) for c in columns]
    if len(set(counts)) > 1:
        short = min(range(4), key=counts.__getitem__)
        long = max(range(4), key=counts.__getitem__)
        raise DatasetFormatError(
            f"{paths[short]}:{counts[short] + 1}: expected one line per pair like "
            f"{paths[long]} ({counts[long]} lines), but the file ends after {counts[short]} lines"
        )
    examples: list[Example] = []
    seen: set[str] = set()
    qid, start, k = "", 0, 0
    for lineno, (question, answer, label, line_qid) in enumerate(
        zip(*columns, strict=True), start=1
    ):
        for path, text in ((a_toks, question), (b_toks, answer)):
            if not text.strip():
                raise DatasetFormatError(f"{path}:{lineno}: expected tokens, got an empty line")
        if label not in ("0", "1"):
            raise DatasetFormatError(f"{sim_txt}:{lineno}: label must be 0 or 1, got {label!r}")
        if not line_qid or line_qid.split() != [line_qid]:
            raise DatasetFormatError(
                f"{id_txt}:{lineno}: expected a question id without spaces, got {line_qid!r}"
            )
        if line_qid != qid:
            if line_qid in seen:
                raise DatasetFormatError(
                    f"{id_txt}:{lineno}: question id {line_qid!r} reappears after other "
                    "questions; a question's pairs must be consecutive"
                )
            seen.add(line_qid)
            qid, start, k = line_qid, lineno, 0
        elif question != examples[-1].left:
            raise DatasetFormatError(
                f"{a_toks}:{lineno}: question {qid!r} reads {question!r} here but "
                f"{examples[-1].left!r} from line {start}"
            )
        examples.append(Example(question, answer, int(label), group=qid, id=f"{qid}:{k}"))
        k += 1
    return examples


# --- jacana_xml/{TRAIN,DEV,TEST}.xml ----------------------------------------------------------

QAPAIRS_OPEN = re.compile(r"<QApairs id='([^'\s]+)'>")
BLOCK_TAGS = ("question", "positive", "negative")
BLOCK_ROWS = ("tokens", "POS tags", "dependency labels", "head indices", "NER tags")


def _check_block(path: str | Path, tag: str, start: int, end: int, rows: list[str]) -> list[str]:
    """The tokens of one <question>/<positive>/<negative> block, after checking its shape."""
    # Positives carry two more lines in Yao et al.'s version: the answer's tokens and positions.
    allowed = (5, 7) if tag == "positive" else (5,)
    if len(rows) not in allowed:
        expected = " or ".join(map(str, allowed))
        raise DatasetFormatError(
            f"{path}:{end}: the <{tag}> block opened at line {start} has {len(rows)} lines, "
            f"expected {expected} ({', '.join(BLOCK_ROWS)}"
            f"{', then the answer tokens and positions' if tag == 'positive' else ''})"
        )
    tokens = rows[0].split("\t")
    if not rows[0].strip():
        raise DatasetFormatError(f"{path}:{start + 1}: expected tokens, got an empty line")
    for offset, (row, what) in enumerate(zip(rows[1:5], BLOCK_ROWS[1:], strict=True), start=2):
        if (n := len(row.split("\t"))) != len(tokens):
            raise DatasetFormatError(
                f"{path}:{start + offset}: expected {len(tokens)} tab-separated {what} (one per "
                f"token of line {start + 1}), got {n}"
            )
    return tokens


def read_jacana_xml(path: str | Path, *, lowercase: bool = True) -> list[Example]:
    """Parses one jacana pseudo-XML file (`.xml` or `.xml.gz`) line by line, every pair in order.

    The files are not escaped (sentences hold `<`, `&`, quotes), so no XML parser: each tag sits
    alone on its line. A `<QApairs id='...'>` holds one `<question>` then any number of
    `<positive>`/`<negative>` blocks, each of 5 tab-separated lines (tokens, POS tags, dependency
    labels, head indices, NER tags; positives may add the answer's tokens and positions). Only
    the tokens are kept, joined by single spaces and lower-cased (as the processed files are):
    the examples equal `read_processed` on the same split.

    Args:
        path: the file.
        lowercase: lower-case the text (default, as the processed files); False keeps the case.

    Raises:
        DatasetFormatError: a line out of place, a block without 5 (positives: 5 or 7) lines,
            lines with different token counts, a duplicate id or question, or a file ending
            inside a block; the message names the file and the line.
    """
    reader = _JacanaReader(path, lowercase=lowercase)
    lineno = 0
    with open_text(path) as f:
        for lineno, raw in enumerate(f, start=1):
            reader.read(lineno, raw.rstrip("\r\n"))
    return reader.end(lineno + 1)


class _JacanaReader:
    """The state of `read_jacana_xml` between lines: the QApairs and the block it is in."""

    def __init__(self, path: str | Path, *, lowercase: bool) -> None:
        self.path, self.lowercase = path, lowercase
        self.examples: list[Example] = []
        self.seen: set[str] = set()
        self.qid: str | None = None
        self.qid_line = 0
        self.question: str | None = None
        self.block: tuple[str, int, list[str]] | None = None  # (tag, opening line, its lines)
        self.k = 0  # the next candidate's number in its QApairs

    def read(self, lineno: int, line: str) -> None:
        """One line (without its line break)."""
        if self.block is not None:
            self._in_block(lineno, line, *self.block)
        elif self.qid is None:
            self._open_qapairs(lineno, line)
        else:
            self._in_qapairs(lineno, line)

    def end(self, lineno: int) -> list[Example]:
        """The examples, after checking that the file (which ends before `lineno`) closed
        every block and QApairs."""
        path, block, qid = self.path, self.block, self.qid
        if block is not None:
            raise DatasetFormatError(
                f"{path}:{lineno}: the file ends inside the <{block[0]}> block opened at line "
                f"{block[1]}"
            )
        if qid is not None:
            raise DatasetFormatError(
                f"{path}:{lineno}: the file ends inside QApairs {qid!r} opened at line "
                f"{self.qid_line}"
            )
        return self.examples

    def _in_block(self, lineno: int, line: str, tag: str, start: int, rows: list[str]) -> None:
        path = self.path
        if line == f"</{tag}>":
            tokens = _check_block(path, tag, start, lineno, rows)
            text = " ".join(tokens).lower() if self.lowercase else " ".join(tokens)
            if tag == "question":
                self.question = text
            else:
                qid, question, k = self.qid, self.question, self.k
                assert qid is not None and question is not None
                label = int(tag == "positive")
                self.examples.append(Example(question, text, label, group=qid, id=f"{qid}:{k}"))
                self.k += 1
            self.block = None
        elif (
            QAPAIRS_OPEN.fullmatch(line)
            or line == "</QApairs>"
            or any(line in (f"<{t}>", f"</{t}>") for t in BLOCK_TAGS)
        ):
            raise DatasetFormatError(
                f"{path}:{lineno}: expected </{tag}> closing the <{tag}> block opened at "
                f"line {start}, got {line!r}"
            )
        else:
            rows.append(line)

    def _open_qapairs(self, lineno: int, line: str) -> None:
        path = self.path
        match = QAPAIRS_OPEN.fullmatch(line)
        if match is None:
            raise DatasetFormatError(f"{path}:{lineno}: expected <QApairs id='...'>, got {line!r}")
        qid = match.group(1)
        self.qid, self.qid_line, self.question, self.k = qid, lineno, None, 0
        if qid in self.seen:
            raise DatasetFormatError(f"{path}:{lineno}: duplicate QApairs id {qid!r}")
        self.seen.add(qid)

    def _in_qapairs(self, lineno: int, line: str) -> None:
        path, qid, question = self.path, self.qid, self.question
        if line == "<question>":
            if question is not None:
                raise DatasetFormatError(f"{path}:{lineno}: a second <question> in QApairs {qid!r}")
            self.block = ("question", lineno, [])
        elif line in ("<positive>", "<negative>"):
            if question is None:
                raise DatasetFormatError(
                    f"{path}:{lineno}: {line} before the <question> of QApairs {qid!r}"
                )
            self.block = (line[1:-1], lineno, [])
        elif line == "</QApairs>":
            if question is None:
                raise DatasetFormatError(f"{path}:{lineno}: QApairs {qid!r} has no <question>")
            self.qid = None
        else:
            raise DatasetFormatError(
                f"{path}:{lineno}: expected <question>, <positive>, <negative> or "
                f"</QApairs>, got {line!r}"
            )


def questions_with_both(examples: Sequence[Example]) -> list[Example]:
    """The examples of questions with both a correct and an incorrect candidate, order kept.

    This turns raw-dev/raw-test into clean-dev/clean-test (Rao et al.'s `qa_clean.py` rule).
    """
    labels: dict[str | None, set[int | float]] = {}
    for ex in examples:
        labels.setdefault(ex.group, set()).add(ex.label)
    return [ex for ex in examples if labels[ex.group] == {0, 1}]


# --- wang2007_train2393_original/Train1-2393.*.POSInput.gz -----------------------------------


def read_posinput(path: str | Path, tag: str) -> list[tuple[str, int, list[str]]]:
    """Parses one of Wang et al.'s POSInput files: blocks `<{tag} N >` ... `</{tag}>`.

    Args:
        path: the file (`.gz` or plain; the answer files have CRLF line ends).
        tag: "Q" (questions: one line per block) or "A" (sentences: one per line).

    Returns:
        `(block number, line of its header, its lines)` per block, in file order.

    Raises:
        DatasetFormatError: a line outside a block, an unclosed block, or an empty line.
    """
    opening = re.compile(rf"<{tag} (\d+) >")
    closing = f"</{tag}>"
    blocks: list[tuple[str, int, list[str]]] = []
    current: list[str] | None = None
    lineno = 0
    with open_text(path) as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.rstrip("\r\n")
            if current is None:
                match = opening.fullmatch(line)
                if match is None:
                    raise DatasetFormatError(f"{path}:{lineno}: expected <{tag} N >, got {line!r}")
                current = []
                blocks.append((match.group(1), lineno, current))
            elif line == closing:
                current = None
            elif opening.fullmatch(line):
                raise DatasetFormatError(
                    f"{path}:{lineno}: expected {closing} closing block {blocks[-1][0]} "
                    f"(line {blocks[-1][1]}), got {line!r}"
                )
            elif not line.strip():
                raise DatasetFormatError(f"{path}:{lineno}: expected a sentence, got {line!r}")
            else:
                current.append(line)
    if current is not None:
        raise DatasetFormatError(
            f"{path}:{lineno + 1}: the file ends inside block {blocks[-1][0]} opened at line "
            f"{blocks[-1][1]}"
        )
    return blocks


def rebuild_train_all(
    questions: str | Path, positives: str | Path, negatives: str | Path
) -> list[Example]:
    """TRAIN-ALL rebuilt from Wang et al.'s Train1-2393 files (NON-STANDARD).

    Per question in file order: its positive sentences, then its negative ones, lower-cased like
    the processed files, `group` = the question number ("1" .. "2392", 1,229 questions).
    Sentence lines starting with the SGML paragraph mark "< P >" are dropped (one positive, one
    negative), which gives 6,420 positives / 47,006 negatives from `Positive-M.POSInput` (its
    `.cleaned` variant has 6,410 positives). The standard TRAIN-ALL (Yao et al.'s
    train2393.cleanup.xml) has 6,403 / 47,014: close, not identical.

    Raises:
        DatasetFormatError: a question block without exactly one line, or an answer file whose
            blocks do not follow the questions' numbers one for one.
    """
    q_blocks = read_posinput(questions, "Q")
    for number, header, lines in q_blocks:
        if len(lines) != 1:
            raise DatasetFormatError(
                f"{questions}:{header}: question {number} has {len(lines)} lines, expected 1"
            )
    sentences: list[list[list[str]]] = []  # [file][question] -> sentences
    for path in (positives, negatives):
        blocks = read_posinput(path, "A")
        for i, (number, header, _) in enumerate(blocks):
            if i >= len(q_blocks) or number != q_blocks[i][0]:
                expected = q_blocks[i][0] if i < len(q_blocks) else "none (no more questions)"
                raise DatasetFormatError(
                    f"{path}:{header}: expected the block of question {expected} "
                    f"(the order of {questions}), got <A {number} >"
                )
        if len(blocks) < len(q_blocks):
            number, header, _ = q_blocks[len(blocks)]
            raise DatasetFormatError(
                f"{questions}:{header}: question {number} has no block in {path}, which ends "
                f"after {len(blocks)} blocks"
            )
        sentences.append(
            [[s for s in lines if not s.startswith(SGML_PARAGRAPH)] for _, _, lines in blocks]
        )
    examples = []
    for i, (qid, _, (question,)) in enumerate(q_blocks):
        k = 0
        for label, per_question in ((1, sentences[0]), (0, sentences[1])):
            for sentence in per_question[i]:
                examples.append(
                    Example(question.lower(), sentence.lower(), label, group=qid, id=f"{qid}:{k}")
                )
                k += 1
    return examples


# --- the spec ----------------------------------------------------------------------------------


def _processed_name(split: str, file: str) -> str:
    return f"processed/{split}/{file}.gz"


def _xml_name(split: str) -> str:
    return f"jacana_xml/{XML_OF_SPLIT[split]}.xml.gz"


def _load(paths: Mapping[str, Path], split: str, options: Mapping[str, Any]) -> list[Example]:
    if split == TRAIN_ALL:
        return rebuild_train_all(*(paths[name] for name in WANG2007_FILES))
    if options["source"] == "xml":
        examples = read_jacana_xml(paths[_xml_name(split)])
        return questions_with_both(examples) if split in CLEAN_SPLITS else examples
    return read_processed(*(paths[_processed_name(split, f)] for f in PROCESSED_FILES))


def _protocol(split: str, options: Mapping[str, Any]) -> RankingTask:
    if split == TRAIN_ALL:
        return TRAIN_ALL_REBUILT
    return CLEAN if split in CLEAN_SPLITS else RAW


# (bundled .gz sha256, original sha256) of every gzipped file; the originals are the files of
# the Castor processing (processed/) and of Castor's copy of the jacana XML (jacana_xml/).
_SHA256 = {
    "processed/train/a.toks": (
        "781c147ab8b7b40878c1a195d2dbf9946462fe0d0598966b89e0ffe310231b6a",
        "473a349f8d94a141c4a3febe271ffe4f49b16d60c5a9a28b310dfca81390a558",
    ),
    "processed/train/b.toks": (
        "3dbc77620fa2ff810ee72f0f4dff3942a75c4f2da6eb1209e701c9303190d734",
        "0026390857e1bc40a8078c7cdaae6fa862147a0266fc2700d817d8c5c1e6b4a9",
    ),
    "processed/train/sim.txt": (
        "e0eeaaa59e4432712b894dac1075c0ddf0a3f3a6b3b2b8dd1be89ad9948b65d1",
        "5df8d6beabf4e714c90d7171531f08cec0b1171621abb44ab42126d23abcee81",
    ),
    "processed/train/id.txt": (
        "d2094cff3603982ce53bd31ed69a3ac5a284f18387da98eb4caec858be96fc69",
        "9cb88d09bf157e3c246bc0497e914b90da4edbfec5d46585a08bca4dcb1864b8",
    ),
    "processed/train/boundary.txt": (
        "d6de249debd41ab8af29649a5cdba662a256805711041ec21f51bd5330196858",
        "d7de357295ae993b36418d28c474e3f1d4fc299b609a503a0a854edf1dc96fa3",
    ),
    "processed/train/numrels.txt": (
        "387bc57992a1919f04f77962c6c4cd52eb5fca793a3fe2eb945b628779b6606b",
        "59b47f9244772f112708780783b00f4cc2730eab7864267e0c39c8de4bc34e6b",
    ),
    "processed/raw-dev/a.toks": (
        "6eee9acb4d4d8855150c899a4de174a10a1a0aaf51cc98c69584b7db13e840d5",
        "bd78da19d0167bc2cefbe3e5681ee4e25232b4814bd3d27f7e0b242af4232578",
    ),
    "processed/raw-dev/b.toks": (
        "199a5b3e4737eede255c1c72ac2eecfc97badde9a806290684b9ce1672576be4",
        "67a76e619f24bc336a7de0b09676244097757cbffc16b8a0f36ea2b66dae8048",
    ),
    "processed/raw-dev/sim.txt": (
        "a1c155df98f42922e5b3d223fadb3a26b0a35b826fb858644eb123f76930d24f",
        "41a84b41300bacc2014a31a733c76822df302ac5de4a39d5e78d6b5bad267389",
    ),
    "processed/raw-dev/id.txt": (
        "e7766c10db61d144d016a928c0f72547f0a5e3014da80fe97671bd87cd7f0893",
        "b45d9d0e3696e273d0ddf7bcefff79155ef9a18a1b8769f84bf149e32c6b2baf",
    ),
    "processed/raw-dev/boundary.txt": (
        "7653e05b3d37355f949d8882b26f6791c563356cc5eb45b718168b4b29eec05d",
        "b01048e8fda5bf63261015e8def439cfb94aff4fcf5168916fc4cde04eff0c80",
    ),
    "processed/raw-dev/numrels.txt": (
        "4bb6ceafe29eb7c9f0f850a4f387143f9927df95fb993e14c1717cba6fe36159",
        "2126f4577d0781c61bc105b6ba46ea186837ed2892ca9cac62294f4d3b1cc020",
    ),
    "processed/raw-test/a.toks": (
        "791b1a7c7ac9c35e7a571ef4ff7bcb6977ac3a12bc1add0e633c059e354f71d6",
        "b10396667b7a615a0c50ec70ce303922c9b33060e75bc61f54235d85603e339b",
    ),
    "processed/raw-test/b.toks": (
        "47a7e75408f3919eaf444de482c35248eb58f9e4787c7472b8776c22af2df663",
        "b5bf03edd713b81ff79ae2123c111d7c64b41bbf2b40453671cedc807ab81de8",
    ),
    "processed/raw-test/sim.txt": (
        "be42378e800912afa7100ddde5af5ce498a64a97f91ef0fe8eb57043a4191899",
        "53bd32c46e7eb37c53e7b7d507446bc7e9e88c7006c4bba6dd72b6965c4b6c2c",
    ),
    "processed/raw-test/id.txt": (
        "7ac112298482c936ad5b355882c31d046ed6720a35e3aaddf8a3b2d0c34f0eb7",
        "87d04448974762a3c649694b8ebb4327edccfec5f3a7b9f409d37d685e610805",
    ),
    "processed/raw-test/boundary.txt": (
        "1a22d10f34c1ffe2426beba85c8ff97689620a66de3a6a3f4b3e908ab516f635",
        "c019d258a0c75c1ada08af527a1c10544b7a5739ca27f88b370e2752862b85cd",
    ),
    "processed/raw-test/numrels.txt": (
        "300dd78c39ab5912babba8c589948766534394287befdd6ac6aaa817ef61b333",
        "f0b68180f4702557ee13e4aa28431857c1745fbc4e30411f22e6a9c389e1f630",
    ),
    "processed/clean-dev/a.toks": (
        "ed9944b24f6714f2587d5e5e3d0b96fc4320f90d79f4962d20a3780ac11c177a",
        "38b0f41198fbd8e2f7049c765bd6eec80f19f3d89b8328375f9f0f3c285d81e0",
    ),
    "processed/clean-dev/b.toks": (
        "f5444f5bec65083a1d426b9b243d63fb8e9675c24d6cdefe6ec15e6e36820214",
        "293e2da8f19f730bea7220639d81007e770fee86a3c78efd5f8852518332fdde",
    ),
    "processed/clean-dev/sim.txt": (
        "4772235543df4c68f288571599e7075d36ba5f3d307eea7756c88342902bc601",
        "5ffc125c4f2d56a2bce14454778cb62982db1b16dd79ea94fc72ef8a8c80b2a0",
    ),
    "processed/clean-dev/id.txt": (
        "cf8dc239ab52a3c85f637cfeb88d039ab30dc73bcbbd34dfabff875eb68f2687",
        "10407067ab99c0a7cc4f766961cd9a422eef8f8c86e64c16b0f3ed735b7ed89d",
    ),
    "processed/clean-dev/boundary.txt": (
        "9b5612582f83bda797114131bb8f9481caa08e812fedb34f70f962a360f4a6fb",
        "168d1c8ea7e9b8a5bd4f8ac5c7b1f0855e0896ed7464a0484dddce503f882c7b",
    ),
    "processed/clean-dev/numrels.txt": (
        "bbc9326018dec799b5bc2b81968024e2fb968faa50ec2e704063976fcb9195f2",
        "5b22a6af4bda1f6755e19a954e74d2f17918d9b351061d7dc0181903c979b89f",
    ),
    "processed/clean-test/a.toks": (
        "177c16031f76fc28d3fc395afcf32ad76a2e67c45a39b8529847688bb7719b0a",
        "47a55f951e843f4209503c5faf10a2b1007cb3ac2ceb94bc313d44e06964c7ef",
    ),
    "processed/clean-test/b.toks": (
        "91b645401e1956243a2b61ba04cd96a069889ebe1cbc43a957e82dc99a9f9b02",
        "5c3e3aafd58d4673e3d7b8bc1ea64f9aa450deb5d9ed24366a2009ae2501dc81",
    ),
    "processed/clean-test/sim.txt": (
        "85195bfc3b5f65308666ebebb278ef4c7c7cca8c993456dfca76aedb9920bd9d",
        "ad2990c8ea2f52e9ba0b41eda98c843078ba9ba58e184aa6c381a0b223ed1ab1",
    ),
    "processed/clean-test/id.txt": (
        "7d6d887128f49ea22ff8569ccfe325d6402ae6066211f46f40c83bbf234bc421",
        "acf8ad9d77098c09de8bb728c07f258ffa60abc07d509400cc7f18919835ae33",
    ),
    "processed/clean-test/boundary.txt": (
        "27294662a0b1312000543449b973aca866fc279ceab91415a450337b63491474",
        "07768c89b43c6d4c22c66a8aa81889af8e7ba6fdb570f42008c98a3d023dc1bd",
    ),
    "processed/clean-test/numrels.txt": (
        "13f09615c9f85ffa12c799fe48ca6b9f00beaaa6cbb9d617657d073fac0ee50c",
        "bf56ba49b4215c5d9148a21823dee798fc332664e8d6af07214928a8c0d4a5bd",
    ),
    "jacana_xml/TRAIN.xml": (
        "8090d093146efec9dc33f0cffff58f46a309f31d03d04e65b22edef84b44660f",
        "8c36007a23b754807344f08b52bc1baeaa6fa5dc85b8ad49f340cc8acc438b66",
    ),
    "jacana_xml/DEV.xml": (
        "02e5eaa496a171d560e11bd49aec6f7d14066f3f35461befef064ecd47f833cc",
        "87f6ed5818fcb885dc8e8206c83cce658d7187118d1e093d841629a08d9291bc",
    ),
    "jacana_xml/TEST.xml": (
        "828120c58375b3ca1ab1f018f5ac2a5f2376a2a9f047e4b8f7c448037874fe64",
        "fb96ee795015c98299fe78f1e697eb9e74789b1db6b1bbc0203416dedc0c467f",
    ),
}


def _split_files(split: str) -> tuple[str, ...]:
    if split == TRAIN_ALL:
        return WANG2007_FILES
    return (*(_processed_name(split, f) for f in PROCESSED_FILES), _xml_name(split))


SPEC = DatasetSpec(
    name="trecqa",
    title="TrecQA",
    task=RankingTask(),
    splits=SPLITS,
    split_files={split: _split_files(split) for split in SPLITS},
    files=(
        *(bundled(name, *digests) for name, digests in _SHA256.items()),
        FileSpec(
            f"{WANG2007}.Question.POSInput.gz",
            "936ff1200b2744ccad0ba0f933c83e8d7a90cebbe8cffb4ab606863bc7dca731",
        ),
        FileSpec(
            f"{WANG2007}.Positive-M.POSInput.gz",
            "2c37e36162b0c0fdaa699621bfe83d386b206bfd54b3c6c26b8bbd16520a8386",
        ),
        FileSpec(
            f"{WANG2007}.Positive-M.POSInput.cleaned.gz",
            "1cefd5ce75510ef0acff6ddb324709e573f010d8ab6924396025dedc260c72ea",
        ),
        FileSpec(
            f"{WANG2007}.Negative-M.POSInput.gz",
            "f88592c2e3243bfac34ebc962559419e5959da460c78c672fa19783d09c99302",
        ),
        FileSpec(
            "jacana_xml/README.jacana",
            "991316d5893948637ba8a409d9e17e25f7394e33e95a11120454872896f38ed6",
        ),
        FileSpec(
            "README.heilman.txt", "46a82257d9f49b6c7cd8ab8fc9458de23ae415bd3e6eff3d020c4b716c7e59ed"
        ),
    ),
    folder="trecqa",
    license=(
        "No license file at the source; derived from TREC QA track questions and documents "
        "(Wang et al. 2007; Yao et al. 2013)"
    ),
    citation=(
        "Mengqiu Wang, Noah A. Smith and Teruko Mitamura. What is the Jeopardy Model? A "
        "Quasi-Synchronous Grammar for QA. EMNLP-CoNLL 2007. https://aclanthology.org/D07-1003/ ; "
        "Xuchen Yao, Benjamin Van Durme, Chris Callison-Burch and Peter Clark. Answer Extraction "
        "as Sequence Tagging with Tree Edit Distance. NAACL-HLT 2013. "
        "https://aclanthology.org/N13-1106/ ; clean splits: Jinfeng Rao, Hua He and Jimmy Lin. "
        "Noise-Contrastive Estimation for Answer Selection with Deep Neural Networks. CIKM 2016."
    ),
    # Castor's data repository: TrecQA/ holds the jacana XML and the processed splits. Wang et
    # al.'s Train1-2393 files are in https://github.com/xuchen/jacana (tree-edit-data/
    # answerSelectionExperiments/training/1-2393/); no single archive holds every file.
    url="https://github.com/castorini/data/archive/refs/heads/master.zip",
    manual_download=(
        "no single archive holds every file in attnmatch's layout: the processed splits are in "
        "https://github.com/castorini/data (TrecQA/), the jacana XML and the Train1-2393 files "
        "in https://github.com/xuchen/jacana. attnmatch bundles all of them in data/trecqa "
        "(see its BUNDLED.md); use that copy, or arrange the originals in the same layout."
    ),
    protocol_description=(
        "MAP/MRR (as trec_eval) over the questions with both a correct and an incorrect "
        "candidate, as the literature does: raw-dev 65 of its 81 questions, raw-test 68 of 95 "
        "(6 without a correct candidate and 21 with only correct ones dropped), the same "
        "questions and pairs as clean-dev (65) and clean-test (68), which are named "
        "'trecqa-clean'; train keeps 78 of 93. train-all-wang2007 is a NON-STANDARD TRAIN-ALL "
        "rebuilt from Wang et al.'s Train1-2393 files (6,420 positives / 47,006 negatives, "
        "1,161 of 1,229 questions evaluable) against 6,403 / 47,014 in the standard TRAIN-ALL: "
        "label results trained on it as such."
    ),
    options={"source": ("processed", "xml")},
    loader=_load,
    make_protocol=_protocol,
    split_sizes={
        "train": 4_718,
        "raw-dev": 1_148,
        "raw-test": 1_517,
        "clean-dev": 1_117,
        "clean-test": 1_442,
        "train-all-wang2007": 53_426,
    },
    non_standard_splits=(TRAIN_ALL,),
    notes=(
        "Processed text is the jacana tokens lower-cased and joined by spaces (PTB escapes such "
        "as -lrb- and `` kept); source='xml' rebuilds identical examples from the XML, which is "
        "not escaped (read line by line) and whose positive blocks carry two extra lines (answer "
        "tokens and positions). The XML has QApairs without any candidate (TRAIN 1, DEV 1, TEST "
        "5), absent from the processed files: raw-test has 95 question ids, not 100. Clean = "
        "raw without the questions lacking a correct or an incorrect candidate. The processed "
        "train-all is not offered: its answers file b.toks is missing. train-all-wang2007 uses "
        "Train1-2393.Positive-M.POSInput (not the .cleaned file, 6,410 positives) and drops the "
        "two sentence lines that start with the SGML mark '< P >' (keeping them would give "
        "6,421 / 47,007)."
    ),
)

SPECS = (SPEC,)
