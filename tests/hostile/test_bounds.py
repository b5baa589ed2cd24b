"""Hostile inputs, class 6: input size. Every input kind keeps at most `inputs.max_length`
tokens of a text (512 words unless set; a transformer's 256 sub-words) and reads a bounded
number of characters before tokenising, in training, scoring and serving alike: a pair of 1 MB
texts scores in bounded time and memory, exactly as the texts cut to the bound. Plus the
config values that set the bound (c4, c6) and an encoder shorter than its bound (c2).

Each case first checks the ids a model would receive (their length is what costs memory), so
that a lost bound fails on an assertion before it can exhaust the machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnmatch.configs import ConfigError
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import CHARS_PER_TOKEN, DEFAULT_MAX_TOKENS, Tokenizer
from attnmatch.inputs import (
    Inputs,
    TransformerInputs,
    TransformerInputsConfig,
    TrigramInputs,
    TrigramInputsConfig,
    WordVectorInputs,
    WordVectorsConfig,
    build_inputs,
    load_inputs,
    parse_inputs,
    truncation_note,
    unknown_note,
)
from attnmatch.inputs.trigrams import MAX_WORD_LETTERS
from attnmatch.matcher import Matcher
from attnmatch.models import list_models
from attnmatch.tasks import Task
from attnmatch.training import ExperimentConfig
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli
from tests.models.conftest import tiny_model
from tests.tiny_transformer import WORDS, tiny_tokenizer_json, write_tiny_encoder


def case(case_id: str) -> pytest.MarkDecorator:
    """One battery case of a test that has a single input: its id names the class first."""
    return pytest.mark.parametrize("case", [pytest.param(case_id, id=case_id)])


MB = 1 << 20
SECONDS = 10.0  # far above what a bounded pair costs a tiny model (< 1 s), far below unbounded


def _words(vocabulary: list[str], size: int = MB) -> str:
    """A text of about `size` characters cycling through `vocabulary`."""
    n = size // (1 + min(len(w) for w in vocabulary)) + len(vocabulary)
    return " ".join(vocabulary[i % len(vocabulary)] for i in range(n))[:size]


VOCAB_WORDS = [f"w{i}" for i in range(38)]  # the tiny models' vocabulary (`tiny_inputs`)
TRANSFORMER_WORDS = [w for w in WORDS if w.isalpha()]  # one sub-word each


def _word_vector_inputs(max_length: int | None = None) -> WordVectorInputs:
    from attnmatch.data.vocab import Vocab

    config = WordVectorsConfig(vectors="random", dim=8, max_length=max_length)
    return WordVectorInputs(config, Vocab(["<pad>", "<unk>", *VOCAB_WORDS]))


def _transformer_inputs(max_length: int = 32) -> TransformerInputs:
    config = TransformerInputsConfig(source="tiny-bert", max_length=max_length)
    return TransformerInputs(config, SubwordTokenizer(tiny_tokenizer_json(), max_length=max_length))


def _matcher(name: str, inputs: Inputs, **overrides: Any) -> Matcher:
    model = tiny_model(name, **overrides).eval()
    return Matcher(model=model, model_type=name, inputs=inputs, task=Task(kind="ranking"))


def _check_long_pair(matcher: Matcher, text: str, cut: str, bound: int) -> None:
    """`text` on both sides: the ids stay within `bound`, the score comes in bounded time and
    equals the score of `cut` (the text cut to the bound) on both sides."""
    start = time.perf_counter()
    widths = [len(ids) for ids in matcher.inputs.encode([text])]
    assert widths == [bound], widths
    assert matcher.inputs.truncated([text, cut]) == 1
    score = matcher.score([(text, text)])
    assert time.perf_counter() - start < SECONDS
    np.testing.assert_array_equal(score, matcher.score([(cut, cut)]))
    assert np.isfinite(score).all()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        pytest.param("hcrn", "word_vectors", id="c6-1mb-pair-word-vectors-hcrn"),
        pytest.param("mvlstm", "word_vectors", id="c6-1mb-pair-word-vectors-mvlstm"),
        pytest.param("matchpyramid", "trigrams", id="c6-1mb-pair-trigrams-matchpyramid"),
        pytest.param("damm", "transformer", id="c6-1mb-pair-transformer-damm"),
        pytest.param("cross_encoder", "transformer", id="c6-1mb-pair-transformer-cross-encoder"),
    ],
)
def test_a_1mb_pair_scores_as_the_pair_cut_to_the_bound(name: str, kind: str) -> None:
    if kind == "word_vectors":
        text = _words(VOCAB_WORDS)
        matcher = _matcher(name, _word_vector_inputs())
        bound = DEFAULT_MAX_TOKENS
        cut = " ".join(text.split()[:bound])
    elif kind == "trigrams":
        text = _words(VOCAB_WORDS)
        inputs = TrigramInputs(TrigramInputsConfig(buckets=23, dim=8))
        matcher = _matcher(name, inputs, encoder={"kind": "trigrams"})
        bound = DEFAULT_MAX_TOKENS
        cut = " ".join(text.split()[:bound])
    else:
        text = _words(TRANSFORMER_WORDS)
        bound = 32  # the tiny encoder has 64 positions (MiniLM: 256 of its 512)
        over = {"encoder": {"kind": "transformer"}} if name != "cross_encoder" else {}
        matcher = _matcher(name, _transformer_inputs(bound), **over)
        cut = " ".join(text.split()[: bound - 2])  # [CLS] ... [SEP]
    assert len(text) == MB
    _check_long_pair(matcher, text, cut, bound)


@pytest.mark.parametrize(
    "inputs",
    [
        pytest.param(_word_vector_inputs(), id="c6-huge-single-token-word-vectors"),
        pytest.param(
            TrigramInputs(TrigramInputsConfig(buckets=23)), id="c6-huge-single-token-trigrams"
        ),
        pytest.param(_transformer_inputs(), id="c6-huge-single-token-transformer"),
    ],
)
def test_one_huge_token_costs_a_bounded_read(inputs: Inputs) -> None:
    """A 64 MB "word" (no space anywhere): only the first characters are read; it is one
    token, whose ids are bounded too (letter trigrams: `MAX_WORD_LETTERS` per word)."""
    huge = "x" * (64 * MB)
    start = time.perf_counter()
    (ids,) = inputs.encode([huge])
    assert inputs.truncated([huge]) == 1
    assert time.perf_counter() - start < SECONDS
    assert ids.size <= max(MAX_WORD_LETTERS, 3)
    small = "x" * 200
    np.testing.assert_array_equal(ids, inputs.encode([small])[0])  # long words read alike


@case("c6-100mb-text-without-spaces")
def test_a_text_without_spaces_is_cut_by_characters_and_tokens(case: str) -> None:
    """100 MB of punctuation, every character a token: at most the bound is kept, and only
    the first CHARS_PER_TOKEN x bound characters are read."""
    tok = Tokenizer(max_length=100)
    text = "?!" * (50 * MB)
    start = time.perf_counter()
    tokens, cut = tok.tokenize_checked(text)
    assert time.perf_counter() - start < 1.0
    assert cut and tokens == ["?", "!"] * 50
    assert tok.max_chars == 100 * CHARS_PER_TOKEN
    # A text within the bound is not cut, to the token.
    assert tok.tokenize_checked("?!" * 50) == (["?", "!"] * 50, False)


def _every_model(kind_of_text: str, left: str) -> dict[str, np.ndarray]:
    scores = {}
    for name in list_models():
        model = tiny_model(name).eval()
        kind = model.config.encoder.kind
        inputs: Inputs
        if kind == "transformer":
            inputs = _transformer_inputs()
        elif kind == "trigrams":
            inputs = TrigramInputs(TrigramInputsConfig(buckets=23, dim=8))
        else:
            inputs = _word_vector_inputs()
        matcher = Matcher(model=model, model_type=name, inputs=inputs, task=Task(kind="ranking"))
        scores[name] = matcher.score([(left, "w1 w2 how are"), ("w3 caves", left)])
        assert np.isfinite(scores[name]).all(), (kind_of_text, name, scores[name])
    return scores


@case("c6-empty-and-whitespace-only-texts")
def test_a_text_without_tokens_has_a_defined_finite_score(case: str) -> None:
    """An empty text and a text of only whitespace (spaces, tabs, new lines, a no-break
    space) have no token: every model gives them the same finite score."""
    empty = _every_model("empty", "")
    blank = _every_model("whitespace", " \t\n\u00a0\u3000 " * 1000)
    for name, scores in empty.items():
        np.testing.assert_array_equal(blank[name], scores, err_msg=name)


@case("c6-punctuation-only-text")
def test_a_text_of_only_punctuation_has_a_defined_finite_score(case: str) -> None:
    """Only punctuation: its symbols are tokens (unknown ones for most vocabularies); a
    finite score that does not depend on how much of it follows the bound."""
    short = _every_model("punctuation", "?!...,;:" * 64)  # 512 tokens exactly
    long = _every_model("punctuation", "?!...,;:" * 100_000)
    for name, scores in short.items():
        np.testing.assert_array_equal(long[name], scores, err_msg=name)


@pytest.mark.parametrize(
    ("inputs", "value"),
    [
        pytest.param({"max_length": 0}, 0, id="c6-max-length-zero"),
        pytest.param({"max_length": -5}, -5, id="c6-max-length-negative"),
        pytest.param({"max_length": 2_000_000}, "2,000,000", id="c6-max-length-absurd"),
        pytest.param(
            {"kind": "trigrams", "max_length": 10**12},
            "1,000,000,000,000",
            id="c6-max-length-absurd-trigrams",
        ),
        pytest.param(
            {"kind": "transformer", "max_length": 1}, 1, id="c6-max-length-transformer-one"
        ),
    ],
)
def test_a_max_length_out_of_range_is_refused_naming_the_field(
    inputs: dict[str, Any], value: object
) -> None:
    with pytest.raises(ConfigError) as info:
        ExperimentConfig.from_dict({"inputs": inputs})
    assert_clear_exception(info.value, "inputs.max_length", str(value), "1,000,000")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(True, id="c4-max-length-boolean"),
        pytest.param(2.5, id="c4-max-length-fraction"),
        pytest.param("512", id="c4-max-length-string"),
    ],
)
def test_a_max_length_that_is_not_an_integer_is_refused(value: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_inputs({"max_length": value})
    assert_clear_exception(info.value, "inputs.max_length", "integer")
    with pytest.raises(ConfigError) as direct:  # the Python API, without the config reader
        WordVectorsConfig(max_length=value)  # type: ignore[arg-type]
    assert_clear_exception(direct.value, "inputs.max_length")


@case("c6-cli-train-max-length-negative")
def test_the_cli_refuses_a_negative_max_length(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
    outcome = run_cli(
        ["train", "--dataset", "pairs", "--data-dir", fixture, "-o", tmp_path / "run",
         "--set", "inputs.max_length=-5"],
        capsys,
    )  # fmt: skip
    assert_clear_error(outcome, "inputs.max_length", "-5")
    assert not (tmp_path / "run").exists()


def _saved(tmp_path: Path, inputs: Inputs, name: str = "mvlstm", **overrides: Any) -> Path:
    return _matcher(name, inputs, **overrides).save(tmp_path / "model")


def _edit_inputs(model_dir: Path, **values: Any) -> None:
    config = model_dir / "config.json"
    header = json.loads(config.read_text(encoding="utf-8"))
    header["inputs"].update(values)
    config.write_text(json.dumps(header), encoding="utf-8")


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("word_vectors", id="c6-saved-model-without-bound-word-vectors"),
        pytest.param("trigrams", id="c6-saved-model-without-bound-trigrams"),
    ],
)
def test_a_model_saved_without_a_bound_loads_with_the_default(kind: str, tmp_path: Path) -> None:
    """A directory of an earlier version says `max_length: null` (unbounded): it loads with
    the default bound and scores texts within it exactly as before."""
    if kind == "trigrams":
        original = _matcher(
            "mvlstm", TrigramInputs(TrigramInputsConfig(buckets=23, dim=8)), encoder={"kind": kind}
        )
    else:
        original = _matcher("mvlstm", _word_vector_inputs())
    path = original.save(tmp_path / "model")
    assert json.loads((path / "config.json").read_text())["inputs"]["max_length"] == 512
    _edit_inputs(path, max_length=None)
    loaded = Matcher.load(path)
    assert loaded.inputs.max_tokens == DEFAULT_MAX_TOKENS
    pairs = [("w1 w2 w3", "w3 w4 w5 w6"), ("w7 " * 500, "w8 w9 " * 250), ("", "w1")]
    np.testing.assert_array_equal(loaded.score(pairs), original.score(pairs))
    text = _words(VOCAB_WORDS, 64 * 1024)
    assert [len(ids) for ids in loaded.inputs.encode([text])] == [DEFAULT_MAX_TOKENS]


@case("c6-saved-model-bound-applies-after-load")
def test_a_models_own_bound_is_saved_and_applied_when_scoring(case: str, tmp_path: Path) -> None:
    """Training and scoring cut alike: a model fitted with max_length 7 saves 7 and its
    loaded copy reads 7 tokens of a text, as the fitted one did."""
    original = _matcher("mvlstm", _word_vector_inputs(max_length=7))
    path = original.save(tmp_path / "model")
    assert json.loads((path / "config.json").read_text())["inputs"]["max_length"] == 7
    loaded = Matcher.load(path)
    long = " ".join(VOCAB_WORDS)
    cut = " ".join(VOCAB_WORDS[:7])
    assert [len(ids) for ids in loaded.inputs.encode([long])] == [7]
    np.testing.assert_array_equal(loaded.score([(long, long)]), loaded.score([(cut, cut)]))
    np.testing.assert_array_equal(loaded.score([(long, cut)]), original.score([(long, cut)]))


@case("c6-cli-saved-model-absurd-max-length")
def test_a_saved_model_with_an_absurd_bound_is_one_error_naming_file_and_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _saved(tmp_path, _word_vector_inputs())
    _edit_inputs(path, max_length=0)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("w1 w2\tw3\n", encoding="utf-8")
    outcome = run_cli(["score", path, pairs, "--format", "tsv"], capsys)
    assert_clear_error(outcome, "config.json", "inputs.max_length", "got 0")
    assert outcome.stdout == ""


@case("c6-cli-score-1mb-pair")
def test_the_cli_scores_a_1mb_pair_in_bounded_time(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _saved(tmp_path, _word_vector_inputs(), name="hcrn")
    text = _words(VOCAB_WORDS)
    cut = " ".join(text.split()[:DEFAULT_MAX_TOKENS])
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(f"{text}\t{text}\nw1 w2\tw3\n", encoding="utf-8")
    start = time.perf_counter()
    outcome = run_cli(["score", path, pairs, "--format", "tsv"], capsys)
    assert time.perf_counter() - start < SECONDS
    assert outcome.code == 0, outcome.stderr
    scores = [float(line) for line in outcome.stdout.split()]
    expected = Matcher.load(path).score([(cut, cut), ("w1 w2", "w3")])
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


@case("c2-transformer-bound-beyond-encoder-positions")
def test_a_bound_beyond_the_encoders_positions_keeps_what_it_reads(
    case: str, tmp_path: Path
) -> None:
    """max_length 1000 on an encoder of 64 positions: texts are cut to 64 sub-words at fit
    and again after load (no index error inside the transformer), and the note says 64."""
    source = write_tiny_encoder(tmp_path / "encoder")
    inputs = build_inputs(
        parse_inputs({"kind": "transformer", "source": str(source), "max_length": 1000})
    )
    text = _words(TRANSFORMER_WORDS, 64 * 1024)
    inputs.fit([text], ["how are caves"])
    assert inputs.max_tokens == 64 and inputs.stats["truncated_texts"] == 1
    matcher = Matcher.untrained(
        "mvlstm",
        inputs=inputs.config,
        task=Task(kind="ranking"),
        overrides={"hidden_size": 4, "k": 3},
    )
    assert matcher.inputs.max_tokens == 64
    assert [len(ids) for ids in matcher.inputs.encode([text])] == [64]
    scores = matcher.score([(text, text)])
    loaded = Matcher.load(matcher.save(tmp_path / "model"))
    assert loaded.inputs.max_tokens == 64
    np.testing.assert_array_equal(loaded.score([(text, text)]), scores)
    note = truncation_note(loaded.inputs, [text, "how"], "the pairs")
    assert note is not None and "64 tokens" in note


@case("c6-training-batches-within-the-bound")
def test_the_batches_a_trainer_builds_never_exceed_the_bound(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training, selection and test batches are cut alike, and the run records how many
    texts were cut."""
    import attnmatch.data.collate as collate_module
    from attnmatch.training import train

    data = tmp_path / "pairs"
    data.mkdir()
    long = _words(["apple", "engine", "tiger", "bridge", "window"], 20_000)
    for split in ("train", "dev", "test"):
        rows = [f"{split}-q{q}\twhat engine {q}\t{long} {split} {q} {label}\t{label}\n"
                for q in range(3) for label in (0, 1)]  # fmt: skip
        (data / f"{split}.tsv").write_text("group\tleft\tright\tlabel\n" + "".join(rows))
    widths: list[int] = []
    pad_ids = collate_module.pad_ids

    def recording(seqs: Any) -> Any:
        ids, mask = pad_ids(seqs)
        widths.append(int(ids.shape[1]))
        return ids, mask

    monkeypatch.setattr(collate_module, "pad_ids", recording)
    config = ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 4, "k": 3},
            "data": {"dataset": "pairs", "data_dir": str(data)},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 4, "max_length": 16},
            "train": {"epochs": 1, "batch_size": 4, "floors": "none"},
        }
    )
    result = train(config, tmp_path / "run", progress=False)
    assert widths and max(widths) == 16  # the long texts reached the bound, never beyond
    stats = (
        Matcher.load(result.model_dir).metrics.get("inputs")
        or json.loads((tmp_path / "run" / "result.json").read_text())["metrics"]["inputs"]
    )
    assert stats["truncated_texts"] == 18 and stats["max_tokens"] == 16  # 6 per split


@case("c6-truncation-note-counts-cut-texts")
def test_truncation_note_counts_the_distinct_cut_texts(case: str) -> None:
    inputs = _word_vector_inputs(max_length=4)
    long = "w1 w2 w3 w4 w5"
    assert truncation_note(inputs, ["w1 w2", "w1 w2 w3 w4"], "the candidates") is None
    note = truncation_note(inputs, [long, long, "w1", long + " w6"], "the candidates")
    assert note is not None and "\n" not in note
    assert note.startswith("2 of the 3 distinct texts of the candidates")
    assert "4 tokens" in note and "inputs.max_length" in note


@case("c6-unknown-note-shortens-a-huge-token")
def test_the_unknown_note_shows_a_bounded_part_of_a_huge_token(case: str) -> None:
    """A text of one 30,000-letter unknown "word": the warning stays one short line."""
    inputs = _word_vector_inputs()
    note = unknown_note(inputs, ["q" * MB], "the pairs")
    assert note is not None and "\n" not in note and len(note) < 300
    assert "qqq..." in note


@case("c7-saved-inputs-error-names-config-json")
def test_load_inputs_names_config_json_for_a_bad_bound(case: str, tmp_path: Path) -> None:
    entry = TrigramInputs(TrigramInputsConfig(buckets=23)).save(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_inputs(tmp_path, entry | {"max_length": -1})
    assert_clear_exception(info.value, str(tmp_path / "config.json"), "inputs.max_length", "-1")
