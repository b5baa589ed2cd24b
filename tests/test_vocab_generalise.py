"""Word vectors keep working on words their training texts never held: the vocabulary keeps the
pretrained file's most frequent words (`pretrained_vocab`), their rows stay pretrained even when
the table is fine-tuned, and every input kind reports its unknown tokens (`unknown_tokens`,
`unknown_rate`, `unknown_note`, `stats["eval_unknown_rate"]`)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnmatch.configs import ConfigError
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import UNK_ID, Vocab
from attnmatch.embeddings import (
    WordVectors,
    build_embedding_matrix,
    frequent_words,
)
from attnmatch.inputs import (
    TokenEncoderConfig,
    TransformerInputs,
    TrigramInputs,
    TrigramInputsConfig,
    WordVectorInputs,
    WordVectorsConfig,
    build_token_encoder,
    inputs_config_from_dict,
    load_inputs,
    parse_inputs,
    unknown_note,
)
from attnmatch.inputs.layers import WordVectorEncoder
from attnmatch.matcher import Matcher
from attnmatch.tasks import Task
from tests.models.conftest import TINY
from tests.tiny_transformer import write_tiny_encoder

# A GloVe text file lists words by descending frequency. "The" (cased) and "u.s." (two tokens
# for the tokenizer) can never be produced by a lower-casing tokenizer.
VECTORS = """the 1 0 0
python 0 3 4
glacier 3 0 4
The 1 1 0
password 0 0 2
u.s. 2 0 0
app 2 2 1
caves 1 2 2
"""
TRAIN = ["Glacier caves", "the caves"]
EVAL = ["the app", "python password"]


@pytest.fixture
def vectors_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "vectors.txt"
    path.write_text(VECTORS, encoding="utf-8")
    return path


def _fit(
    path: Path, texts: list[str] = TRAIN, eval_texts: tuple[str, ...] = (), **kw
) -> WordVectorInputs:
    inputs = WordVectorInputs(WordVectorsConfig(vectors=str(path), **kw))
    inputs.fit(texts, eval_texts, seed=0)
    return inputs


def load_word_vectors_from_text(text: str) -> WordVectors:
    lines = [line.split() for line in text.splitlines()]
    matrix = np.asarray([[float(x) for x in line[1:]] for line in lines], dtype=np.float32)
    return WordVectors(words=[line[0] for line in lines], matrix=matrix, source="<text>")


def _unit(*v: float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


# --- the vocabulary ---------------------------------------------------------------------------


def test_extend_in_the_given_order_keeps_the_ids() -> None:
    vocab = Vocab.build([["b", "a", "b"]])
    assert vocab.extend(["z", "c", "a", "z"]).tokens == ["<pad>", "<unk>", "b", "a", "c", "z"]
    kept = vocab.extend(["z", "c", "a", "z"], sort=False)
    assert kept.tokens == ["<pad>", "<unk>", "b", "a", "z", "c"]
    assert [kept.id(t) for t in vocab.tokens] == list(range(len(vocab)))


def test_the_most_frequent_pretrained_words_join_the_vocabulary(vectors_file: Path) -> None:
    inputs = _fit(vectors_file, vocab_from_eval_splits=False, pretrained_vocab=7)
    assert inputs.vocab is not None and inputs.matrix is not None
    # The training words, then the first 7 rows' words the tokenizer gives as one token ("The"
    # and "u.s." it cannot; "the" and "glacier" are in already), in file order; "caves" is
    # the 8th row and in already.
    assert inputs.vocab.tokens == [
        "<pad>",
        "<unk>",
        "caves",
        "glacier",
        "the",
        "python",
        "password",
        "app",
    ]
    assert inputs.pretrained_rows == 3 and inputs.stats["pretrained_words"] == 3
    np.testing.assert_allclose(inputs.matrix[5], _unit(0, 3, 4))  # python: its vector
    np.testing.assert_allclose(inputs.matrix[6], _unit(0, 0, 1))
    np.testing.assert_allclose(inputs.matrix[7], _unit(2, 2, 1))
    # Encoded and looked up by a model's token encoder: the pretrained vector, not <unk>.
    ids = inputs.encode(["Python app zebra"])[0]
    assert ids.tolist() == [5, 7, UNK_ID]
    config = TokenEncoderConfig(**inputs.encoder_config())
    assert config.pretrained_rows == 3 and config.vocab_size == 8
    encoder = build_token_encoder(config)
    inputs.init_encoder(encoder)
    out = encoder(torch.as_tensor(ids)[None], torch.ones(1, 3, dtype=torch.bool))[0]  # (3, E)
    torch.testing.assert_close(out[0], torch.as_tensor(_unit(0, 3, 4)))
    torch.testing.assert_close(out[1], torch.as_tensor(_unit(2, 2, 1)))


def test_the_extended_matrix_is_the_alignment_of_the_extended_vocabulary(
    vectors_file: Path,
) -> None:
    """The added rows hold what aligning the whole vocabulary gives them, and the fitted words'
    rows (their random OOV draws included) are unchanged, with or without normalisation."""
    for normalize in (True, False):
        inputs = _fit(vectors_file, ["glacier zebra", "caves"], normalize=normalize)
        assert inputs.vocab is not None and inputs.matrix is not None
        assert inputs.vocab.tokens[2:5] == ["caves", "glacier", "zebra"]  # zebra: OOV, random
        assert inputs.pretrained_rows == 4  # the, python, password, app
        matrix, _ = build_embedding_matrix(
            str(vectors_file), inputs.vocab, normalize=normalize, use_cache=False
        )
        np.testing.assert_array_equal(inputs.matrix, matrix)


def test_frequent_words_in_file_order() -> None:
    vectors = load_word_vectors_from_text(VECTORS)
    words, rows = frequent_words(vectors, 6, skip={"glacier"}, accept=str.islower, normalize=False)
    assert words == ["the", "python", "password", "u.s."]
    np.testing.assert_array_equal(rows[1], [0, 3, 4])
    assert frequent_words(vectors, None)[0] == vectors.words
    assert frequent_words(vectors, 0)[1].shape == (0, 3)
    with pytest.raises(ValueError, match="limit must be >= 0"):
        frequent_words(vectors, -1)


def test_pretrained_vocab_0_restores_the_fitted_vocabulary(vectors_file: Path) -> None:
    """Without `pretrained_vocab`: the training words plus the eval words with a vector, and
    the matrix aligned to them, as before the option; with it, those keep their ids and rows."""
    inputs = _fit(vectors_file, eval_texts=("the app",), pretrained_vocab=0)
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for t in TRAIN).extend(["app"])
    assert inputs.vocab == vocab and inputs.pretrained_rows == 0
    matrix, _ = build_embedding_matrix(str(vectors_file), vocab, use_cache=False)
    assert inputs.matrix is not None
    np.testing.assert_array_equal(inputs.matrix, matrix)
    assert "pretrained_words" not in inputs.stats
    assert inputs.encoder_config()["pretrained_rows"] == 0
    extended = _fit(vectors_file, eval_texts=("the app",))  # the default bound
    assert extended.vocab is not None and extended.matrix is not None
    assert extended.vocab.tokens == [*vocab.tokens, "python", "password"]
    np.testing.assert_array_equal(extended.matrix[: len(vocab)], matrix)
    assert {k: v for k, v in extended.stats.items() if k != "pretrained_words"} == inputs.stats


def test_random_vectors_have_no_pretrained_words(vectors_file: Path) -> None:
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", pretrained_vocab="all"))
    inputs.fit(TRAIN)
    assert inputs.vocab == Vocab.build(Tokenizer().tokenize(t) for t in TRAIN)
    assert inputs.pretrained_rows == 0


def test_pretrained_vocab_option() -> None:
    assert WordVectorsConfig().pretrained_vocab == 100_000
    assert inputs_config_from_dict({"pretrained_vocab": "all"}).pretrained_limit is None  # type: ignore[union-attr]
    assert inputs_config_from_dict({"pretrained_vocab": 0}).pretrained_limit == 0  # type: ignore[union-attr]
    with pytest.raises(
        ConfigError, match=r'inputs: pretrained_vocab must be >= 0 or "all", got -1'
    ):
        inputs_config_from_dict({"pretrained_vocab": -1})
    with pytest.raises(ConfigError, match="inputs.pretrained_vocab"):
        inputs_config_from_dict({"pretrained_vocab": "most"})
    with pytest.raises(ConfigError, match="inputs.pretrained_vocab"):
        inputs_config_from_dict({"pretrained_vocab": True})


# --- the token encoder ------------------------------------------------------------------------


def _encoder(trainable: bool = True, pretrained_rows: int = 3) -> WordVectorEncoder:
    torch.manual_seed(0)
    config = TokenEncoderConfig(
        vocab_size=7, embedding_dim=4, trainable=trainable, pretrained_rows=pretrained_rows
    )
    encoder = build_token_encoder(config)
    assert isinstance(encoder, WordVectorEncoder)
    return encoder


def test_pretrained_rows_are_looked_up_and_never_trained() -> None:
    encoder = _encoder()
    matrix = torch.arange(28, dtype=torch.float32).reshape(7, 4)
    encoder.load_pretrained(matrix)
    assert [n for n, _ in encoder.named_parameters()] == ["embedding.weight"]
    assert tuple(encoder.embedding.weight.shape) == (4, 4) and encoder.pretrained is not None
    ids = torch.tensor([[2, 5, 3, 6, 0], [4, 1, 0, 0, 0]])  # rows 4..6 are pretrained
    mask = ids != 0
    out = encoder(ids, mask)  # (B, L, E)
    torch.testing.assert_close(out, F.embedding(ids, matrix) * mask.unsqueeze(-1))
    # One Adam step, with weight decay: the trained word moves, the pretrained ones do not.
    optimizer = torch.optim.Adam(encoder.parameters(), lr=0.1, weight_decay=0.1)
    out.sum().backward()
    expected = torch.zeros(4, 4)
    expected[[1, 2, 3]] = 1  # each fitted word once; <pad> (padding_idx) gets none
    torch.testing.assert_close(encoder.embedding.weight.grad, expected)
    optimizer.step()
    assert not torch.equal(encoder.embedding.weight[2], matrix[2])
    torch.testing.assert_close(encoder.pretrained, matrix[4:])
    with pytest.raises(ValueError, match=r"expected \(7, 4\)"):
        encoder.load_pretrained(matrix[:6])
    with pytest.raises(ValueError, match="must leave <pad> and <unk>"):
        TokenEncoderConfig(vocab_size=4, pretrained_rows=3)


def test_pretrained_rows_leave_the_random_draws_alone() -> None:
    """The pretrained rows are not drawn at random, so the rest of a model is initialised as
    without them (a model's outputs on its training words do not change)."""
    with_rows = _encoder()
    after = torch.rand(3)
    torch.manual_seed(0)
    without = build_token_encoder(TokenEncoderConfig(vocab_size=4, embedding_dim=4, trainable=True))
    torch.testing.assert_close(with_rows.embedding.weight, without.embedding.weight)
    torch.testing.assert_close(after, torch.rand(3))
    assert "pretrained" not in without.state_dict()  # the module of old model directories


# --- unknown tokens ---------------------------------------------------------------------------


def test_word_vector_unknown_tokens_and_rate(vectors_file: Path) -> None:
    inputs = _fit(vectors_file, pretrained_vocab=0, vocab_from_eval_splits=False)
    unknown, total = inputs.unknown_tokens(["The python, the python app!", ""])
    assert unknown == Counter({"python": 2, "app": 1, ",": 1, "!": 1}) and total == 7
    assert inputs.unknown_rate(["The python, the python app!"]) == (5, 7)
    with pytest.raises(RuntimeError, match=r"call fit\(\) first"):
        WordVectorInputs(WordVectorsConfig()).unknown_rate(["a"])


def test_fit_records_the_eval_unknown_rate(vectors_file: Path) -> None:
    eval_texts = ("the app zebra", "the app zebra", "python zebra")  # a repeat counts once
    narrow = _fit(
        vectors_file, eval_texts=eval_texts, pretrained_vocab=0, vocab_from_eval_splits=False
    )
    assert narrow.stats["eval_tokens"] == 5 and narrow.stats["eval_unknown_tokens"] == 4
    assert narrow.stats["eval_unknown_rate"] == 0.8
    assert narrow.stats["eval_unknown_top"] == ["zebra", "app", "python"]
    wide = _fit(vectors_file, eval_texts=eval_texts, vocab_from_eval_splits=False)
    assert wide.stats["eval_unknown_rate"] == 0.4 and wide.stats["eval_unknown_top"] == ["zebra"]
    assert "eval_unknown_rate" not in _fit(vectors_file).stats  # no eval texts


def test_trigram_inputs_know_every_word() -> None:
    inputs = TrigramInputs(TrigramInputsConfig(buckets=50))
    assert inputs.unknown_rate(["zxqv wq!", ""]) == (0, 3)
    inputs.fit(["a"], ["new words"])
    assert inputs.stats["eval_unknown_rate"] == 0.0 and inputs.stats["eval_tokens"] == 2


def test_transformer_unknown_sub_words(tmp_path: Path) -> None:
    inputs = TransformerInputs(parse_inputs(str(write_tiny_encoder(tmp_path / "enc"))))  # type: ignore[arg-type]
    # "zebra" and "€" are not in the tiny WordPiece vocabulary; [CLS] and [SEP] do not count.
    unknown, total = inputs.unknown_tokens(["How are Zebra caves formed €", "the ice"])
    assert unknown == Counter({"Zebra": 1, "€": 1}) and total == 6 + 2
    inputs.fit([], ["zebra caves", "zebra"])
    assert inputs.stats["eval_unknown_rate"] == pytest.approx(2 / 3)
    inputs.init_encoder(build_token_encoder(TokenEncoderConfig(**inputs.encoder_config())))
    assert inputs.stats["eval_unknown_top"] == ["zebra"] and "weights_sha256" in inputs.stats


def test_unknown_note_text_and_threshold() -> None:
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random"))  # the training words only
    inputs.fit(["a b c d e f g h i j k l m n o p q r s t u v w x y"])
    known = " ".join("abcdefghijklmnopqrstuvwxy")  # 25 known words
    assert unknown_note(inputs, [known, known], "the candidates") is None  # no unknown word
    # 1 unknown word in 50: 2%, not above the threshold; 2 in 50: 4%.
    assert unknown_note(inputs, [known, known[:-1] + "python"], "the candidates") is None
    note = unknown_note(inputs, [known[:-1] + "python", known[:-1] + "app"], "the candidates")
    assert note == (
        "4.0% of the tokens of the candidates are unknown to this model's vocabulary "
        "(e.g. app, python)"
    )
    many = unknown_note(inputs, ["z9 z8 z7 z6 z5 z4 z4 z3 z3 z3"], "the queries")
    assert many == (
        "100.0% of the tokens of the queries are unknown to this model's vocabulary "
        "(e.g. z3, z4, z5, z6, z7)"
    )
    assert unknown_note(inputs, [], "the queries") is None
    soft_hyphen = unknown_note(inputs, ["a\xad"], "the queries")  # shown, not invisible
    assert soft_hyphen is not None and soft_hyphen.endswith("(e.g. '\\xad')")
    assert unknown_note(inputs, ["python a b c"], "the queries", threshold=0.5) is None


# --- saved models -----------------------------------------------------------------------------


def _matcher(vectors_file: Path, **inputs: object) -> Matcher:
    return Matcher.untrained(
        "mvlstm",
        inputs={"vectors": str(vectors_file), "vocab_from_eval_splits": False, **inputs},
        task=Task(kind="ranking"),
        overrides=TINY["mvlstm"],
        train_texts=TRAIN,
    )


def test_save_load_keeps_the_extended_vocabulary(vectors_file: Path, tmp_path: Path) -> None:
    matcher = _matcher(vectors_file)
    assert isinstance(matcher.inputs, WordVectorInputs) and matcher.inputs.vocab is not None
    assert "python" in matcher.inputs.vocab
    pairs = [("python app", "the glacier caves"), ("password", "caves")]
    loaded = Matcher.load(matcher.save(tmp_path / "model"))
    assert isinstance(loaded.inputs, WordVectorInputs)
    assert loaded.inputs.vocab == matcher.inputs.vocab
    assert loaded.model.token_encoder.config.pretrained_rows == 3  # type: ignore[union-attr]
    np.testing.assert_array_equal(loaded.score(pairs), matcher.score(pairs))
    assert unknown_note(loaded.inputs, ["python app password"], "the candidates") is None


def test_a_model_saved_before_pretrained_vocab_loads(vectors_file: Path, tmp_path: Path) -> None:
    """A directory written before the option: no `pretrained_vocab` in its inputs, no
    `pretrained_rows` in its encoder; its vocabulary is what it is."""
    matcher = _matcher(vectors_file, pretrained_vocab=0)
    path = matcher.save(tmp_path / "model")
    header = json.loads((path / "config.json").read_text(encoding="utf-8"))
    assert header["config"]["encoder"].pop("pretrained_rows") == 0
    assert header["inputs"].pop("pretrained_vocab") == 0
    (path / "config.json").write_text(json.dumps(header), encoding="utf-8")
    loaded = Matcher.load(path)
    assert isinstance(loaded.inputs, WordVectorInputs) and loaded.inputs.vocab is not None
    assert "python" not in loaded.inputs.vocab and loaded.inputs.config.pretrained_vocab == 100_000
    pairs = [("python app", "the glacier caves")]
    np.testing.assert_array_equal(loaded.score(pairs), matcher.score(pairs))
    assert loaded.inputs.unknown_rate(["python app caves"]) == (2, 3)
    entry = {k: v for k, v in matcher.inputs.save(tmp_path).items() if k != "pretrained_vocab"}
    assert load_inputs(tmp_path, entry).encode(["caves"])[0].tolist() == [2]
