"""Lexical scorers (BM25, word overlap, IDF-weighted overlap) and the lexical Matcher."""

from __future__ import annotations

import json
import math
from pathlib import Path

import bm25s
import numpy as np
import pytest
from typer.testing import CliRunner

from attnmatch.cli import app
from attnmatch.data.schema import Example
from attnmatch.lexical import LEXICAL_KINDS, LexicalScorer
from attnmatch.matcher import Matcher, load_matcher
from attnmatch.tasks import RankingTask

GLACIER = "how are glacier caves formed ?"
DOCS = [
    "The Alps are a mountain range in Europe.",
    "A glacier cave is a cave formed within the ice of a glacier.",
    "Many caves lie under mountains.",
    "Paris is the capital of France.",
]


@pytest.mark.parametrize("kind", LEXICAL_KINDS)
def test_every_kind_ranks_the_obviously_relevant_document_first(kind: str) -> None:
    scores = LexicalScorer(kind).score([(GLACIER, d) for d in DOCS])
    assert scores.shape == (4,) and scores.dtype == np.float32
    assert int(np.argmax(scores)) == 1
    assert scores[3] == 0.0  # no shared word


def test_overlap_is_the_fraction_of_distinct_left_words_in_the_right_text() -> None:
    pairs = [
        ("the cat sat", "the cat ran"),  # the, cat of {the, cat, sat}
        ("cat cat dog", "a cat"),  # distinct words: cat of {cat, dog}
        ("Cat ?", "the CAT."),  # lower-cased, punctuation is no word
        ("?!", "anything"),  # a left text without words
        ("don't stop", "do not stop"),  # the tokenizer's "do", "n't": 2 of 3
    ]
    scores = LexicalScorer("overlap").score(pairs)
    np.testing.assert_allclose(scores, [2 / 3, 1 / 2, 1.0, 0.0, 2 / 3], rtol=1e-6)


def _idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_idf_overlap_weights_words_by_their_collection_idf() -> None:
    """The collection is the distinct right texts, plus the background given to `fit`."""
    pairs = [("a b", "a c"), ("a b", "c d"), ("b", "c d")]
    # Right texts {"a c", "c d"}: N = 2, df(a) = 1, df(b) = 0.
    idf_a, idf_b = _idf(1, 2), _idf(0, 2)
    expected = [idf_a / (idf_a + idf_b), 0.0, 0.0]
    np.testing.assert_allclose(LexicalScorer("idf_overlap").score(pairs), expected, rtol=1e-6)
    # A background of two more texts holding "b": N = 4, df(a) = 1, df(b) = 2.
    scorer = LexicalScorer("idf_overlap").fit(["b x", "b y", "a c"])  # "a c" is counted once
    idf_a, idf_b = _idf(1, 4), _idf(2, 4)
    np.testing.assert_allclose(scorer.score(pairs)[0], idf_a / (idf_a + idf_b), rtol=1e-6)


def test_bm25_is_bm25s_over_the_distinct_right_texts_and_the_background() -> None:
    """Each pair gets bm25s' own score of its right text in the collection: repeated and
    shuffled pairs, several queries, a background corpus."""
    background = ["glacier ice melts in summer", "water flows under the glacier"]
    scorer = LexicalScorer("bm25").fit(background)
    queries = [GLACIER, "what is the capital of france ?"]
    pairs = [(q, d) for d in DOCS for q in queries] + [(queries[0], DOCS[1])]
    got = scorer.score(pairs)
    docs = list(dict.fromkeys(DOCS + background))
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index([scorer.words(d) for d in docs], show_progress=False)
    for (query, doc), value in zip(pairs, got, strict=True):
        expected = retriever.get_scores(scorer.words(query))[docs.index(doc)]
        assert value == pytest.approx(expected, rel=1e-6)
    assert not np.allclose(got, LexicalScorer("bm25").score(pairs))  # the background counts


def test_scores_of_no_pairs_and_an_unknown_kind() -> None:
    assert LexicalScorer("bm25").score([]).shape == (0,)
    with pytest.raises(ValueError, match="unknown lexical scorer 'tfidf'; choose one of bm25"):
        LexicalScorer("tfidf")


def test_lexical_matcher_ranks_scores_and_evaluates() -> None:
    matcher = Matcher.from_lexical("bm25")
    ranked = matcher.rank(GLACIER, DOCS, top_k=2)
    assert [r.index for r in ranked] == [1, 2]
    assert ranked[0].text == DOCS[1] and ranked[0].score > ranked[1].score > 0
    scores = matcher.score([(GLACIER, d) for d in DOCS])
    np.testing.assert_array_equal(scores, LexicalScorer("bm25").score([(GLACIER, d) for d in DOCS]))
    assert matcher.outputs([(GLACIER, DOCS[0])]).shape == (1, 1)
    examples = [Example(GLACIER, d, int(i == 1), group="q") for i, d in enumerate(DOCS)]
    examples += [
        Example("capital of france", d, int(i == 3), group="p") for i, d in enumerate(DOCS)
    ]
    report = matcher.evaluate_examples(examples, RankingTask(name="toy"))
    assert report.metrics["map"] == 1.0 and report.metrics["num_queries"] == 2


def test_load_matcher_gives_the_lexical_matchers() -> None:
    for kind in LEXICAL_KINDS:
        matcher = load_matcher(kind)
        assert matcher.model_type == kind and matcher.task.kind == "ranking"
        assert matcher.rank(GLACIER, DOCS)[0].index == 1


def test_a_lexical_matcher_saves_its_folder_and_refuses_to_read_ids(tmp_path: Path) -> None:
    matcher = Matcher.from_lexical("bm25", corpus=DOCS)
    loaded = Matcher.load(matcher.save(tmp_path / "m"))
    assert loaded.model_type == "bm25" and loaded.path == tmp_path / "m"
    pairs = [(GLACIER, doc) for doc in DOCS]
    np.testing.assert_array_equal(loaded.score(pairs), matcher.score(pairs))
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "README.md",
        "config.json",
        "corpus.jsonl",
        "model.safetensors",
    ]
    data = matcher.encode([Example("a", "b", 0)])
    with pytest.raises(TypeError, match="scores texts, not ids"):
        matcher.predict(data)


def test_cli_ranks_and_evaluates_with_bm25(tmp_path: Path) -> None:
    file = tmp_path / "docs.txt"
    file.write_text("\n".join(DOCS) + "\n")
    runner = CliRunner()
    result = runner.invoke(app, ["rank", "bm25", "-q", GLACIER, "-c", str(file), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert rows[0]["index"] == 1 and len(rows) == 4
    fixture = Path(__file__).parent / "fixtures" / "pairs_tiny"
    args = ["evaluate", "overlap", "--dataset", "pairs:test", "--data-dir", str(fixture)]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.output)["metrics"]
    assert metrics["num_queries"] == 8 and 0.0 < metrics["map"] <= 1.0


def test_the_model_types_a_lexical_folder_names_are_the_lexical_kinds() -> None:
    from attnmatch.lexical_dir import MODEL_TYPES

    assert MODEL_TYPES == LEXICAL_KINDS
