"""`attnmatch.inputs`, the one owner of the input representation: the tagged `[inputs]` configs,
each kind's fit / encode / save / load chain, the token encoders, which models read which kinds,
and a guard that no code outside `attnmatch/inputs/` branches on the kind."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from attnmatch.configs import ConfigError
from attnmatch.data.collate import collate
from attnmatch.data.encoding import encode_examples
from attnmatch.data.schema import Example
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.trigrams import word_trigram_ids
from attnmatch.data.vocab import UNK_ID, Vocab
from attnmatch.inputs import (
    KINDS,
    TokenEncoderConfig,
    TransformerInputs,
    TransformerInputsConfig,
    TrigramInputs,
    TrigramInputsConfig,
    WordVectorInputs,
    WordVectorsConfig,
    build_inputs,
    build_token_encoder,
    check_accepts,
    inputs_class,
    inputs_config_from_dict,
    load_inputs,
    merge_inputs,
    parse_inputs,
)
from attnmatch.inputs.layers import TrigramEncoder, WordVectorEncoder
from attnmatch.inputs.transformer_layer import TransformerTokenEncoder
from attnmatch.losses import compute_loss
from attnmatch.matcher import Matcher
from attnmatch.models import get_model_entry, list_models
from attnmatch.tasks import Task
from tests.models.conftest import TINY, TRIGRAM_BUCKETS, model_batch, random_pairs, tiny_model
from tests.tiny_transformer import tiny_bert_config, write_tiny_encoder

TEXTS = ["How are glacier caves formed?", "A glacier cave is a cave formed in the ice."]


# --- the [inputs] section ---------------------------------------------------------------------


def test_the_five_kinds() -> None:
    assert KINDS == ("word_vectors", "transformer", "trigrams", "wordpiece", "static")
    assert inputs_class("word_vectors") is WordVectorInputs
    assert inputs_class("transformer") is TransformerInputs
    assert inputs_class("trigrams") is TrigramInputs


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"kind": "transformer", "vectors": "x"}, "inputs.vectors"),
        ({"kind": "trigrams", "source": "minilm-l6"}, "inputs.source"),
        ({"kind": "word_vectors", "buckets": 100}, "inputs.buckets"),
        ({"buckets": 100}, "inputs.buckets"),  # no kind: word vectors
        ({"kind": "transformer", "normalize": True}, "inputs.normalize"),
    ],
)
def test_config_rejects_a_key_of_another_kind(data: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(key)):
        inputs_config_from_dict(data)


def test_config_unknown_kind_lists_the_kinds() -> None:
    with pytest.raises(
        ConfigError,
        match="unknown inputs kind 'glove'; choose one of word_vectors, transformer, trigrams",
    ):
        inputs_config_from_dict({"kind": "glove"})
    with pytest.raises(ConfigError, match="unknown inputs kind 'vectors'"):
        inputs_config_from_dict({"kind": "vectors"})
    with pytest.raises(ConfigError, match="expected a table"):
        inputs_config_from_dict("glove-6b-50d")  # type: ignore[arg-type]


def test_config_of_each_kind() -> None:
    assert inputs_config_from_dict({}) == WordVectorsConfig()
    assert inputs_config_from_dict({"vectors": "random", "dim": 7}) == WordVectorsConfig(
        vectors="random", dim=7
    )
    assert inputs_config_from_dict({"kind": "trigrams", "buckets": 100}) == TrigramInputsConfig(
        buckets=100
    )
    assert inputs_config_from_dict(
        {"kind": "transformer", "trainable": True}
    ) == TransformerInputsConfig(trainable=True)
    with pytest.raises(ConfigError, match="buckets must be >= 2"):
        inputs_config_from_dict({"kind": "trigrams", "buckets": 1})
    with pytest.raises(ConfigError, match="inputs.oov"):
        inputs_config_from_dict({"oov": "mean"})


def test_merge_inputs_of_the_same_kind_merges() -> None:
    base = {"kind": "word_vectors", "vectors": "glove-6b-50d", "trainable": True}
    assert merge_inputs(base, {"dropout": 0.1}) == {**base, "dropout": 0.1}
    assert merge_inputs(base, {"kind": "word_vectors", "vectors": "random"}) == {
        "kind": "word_vectors",
        "vectors": "random",
        "trainable": True,
    }
    # A base without a kind is word vectors.
    assert merge_inputs({"vectors": "random"}, {"kind": "word_vectors", "dim": 9}) == {
        "vectors": "random",
        "kind": "word_vectors",
        "dim": 9,
    }
    assert merge_inputs(None, None) == {}
    assert merge_inputs(base, None) == base


def test_merge_inputs_of_another_kind_replaces() -> None:
    base = {"kind": "transformer", "source": "minilm-l6", "trainable": True}
    merged = merge_inputs(base, {"kind": "trigrams", "dim": 300})
    assert merged == {"kind": "trigrams", "dim": 300}  # no transformer keys mixed in
    assert inputs_config_from_dict(merged) == TrigramInputsConfig(dim=300)
    assert merge_inputs({"vectors": "random"}, {"kind": "transformer"}) == {"kind": "transformer"}
    assert merge_inputs(None, {"kind": "trigrams"}) == {"kind": "trigrams"}
    assert base == {"kind": "transformer", "source": "minilm-l6", "trainable": True}  # untouched


def test_parse_inputs_shortcuts(tmp_path: Path) -> None:
    assert parse_inputs("random") == WordVectorsConfig(vectors="random", trainable=True)
    assert parse_inputs("trigrams") == TrigramInputsConfig()
    assert parse_inputs("glove-6b-50d") == WordVectorsConfig(vectors="glove-6b-50d")
    assert parse_inputs("minilm-l6") == TransformerInputsConfig(source="minilm-l6")
    assert parse_inputs("vectors.txt") == WordVectorsConfig(vectors="vectors.txt")
    # A Hugging Face model directory is a transformer; any other directory is not.
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text("{}", encoding="utf-8")
    assert parse_inputs(str(tmp_path / "enc")) == TransformerInputsConfig(
        source=str(tmp_path / "enc")
    )
    assert parse_inputs(str(tmp_path)).kind == "word_vectors"
    assert parse_inputs({"kind": "trigrams", "dim": 8}) == TrigramInputsConfig(dim=8)
    config = TransformerInputsConfig(source="x", layer=2)
    assert parse_inputs(config) is config


def test_a_short_name_keeps_the_other_settings_of_inputs_of_its_kind() -> None:
    cdssm = {"kind": "trigrams", "dim": 900}
    assert parse_inputs("trigrams", default=cdssm) == TrigramInputsConfig(dim=900)
    mine = {"kind": "word_vectors", "vectors": "glove-6b-50d", "normalize": False, "min_freq": 3}
    assert parse_inputs("vectors.txt", default=mine) == WordVectorsConfig(
        vectors="vectors.txt", normalize=False, min_freq=3
    )
    tuned = {"kind": "transformer", "source": "minilm-l6", "trainable": True}
    assert parse_inputs("minilm-l6", default=tuned).trainable
    # Another kind starts from that kind's defaults.
    assert parse_inputs("minilm-l6", default=mine) == TransformerInputsConfig(source="minilm-l6")
    assert parse_inputs("trigrams", default=mine) == TrigramInputsConfig()


def test_inputs_without_a_kind_complete_the_given_default() -> None:
    assert inputs_config_from_dict({"dropout": 0.1}, default={"kind": "trigrams", "dim": 900}) == (
        TrigramInputsConfig(dim=900, dropout=0.1)
    )
    assert inputs_config_from_dict({"dropout": 0.1}) == WordVectorsConfig(dropout=0.1)
    with pytest.raises(ConfigError, match="inputs.kind: expected a string, got list"):
        inputs_config_from_dict({"kind": ["x"]})
    with pytest.raises(ConfigError, match="expected a name or a table"):
        parse_inputs(3)  # type: ignore[arg-type]


def test_token_encoder_config_kinds() -> None:
    with pytest.raises(ConfigError, match="unknown inputs kind 'glove'"):
        TokenEncoderConfig(kind="glove", vocab_size=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs transformer_config"):
        TokenEncoderConfig(kind="transformer", vocab_size=10)
    with pytest.raises(ValueError, match="must equal the transformer's hidden_size"):
        TokenEncoderConfig(
            kind="transformer",
            vocab_size=40,
            embedding_dim=9,
            transformer_config=tiny_bert_config(40, 8),
        )
    with pytest.raises(ValueError, match="<pad>, <unk>"):
        TokenEncoderConfig(kind="word_vectors", vocab_size=1)
    built = {
        "word_vectors": build_token_encoder(TokenEncoderConfig(vocab_size=10, embedding_dim=4)),
        "trigrams": build_token_encoder(
            TokenEncoderConfig(kind="trigrams", vocab_size=10, embedding_dim=4)
        ),
        "transformer": build_token_encoder(
            TokenEncoderConfig(
                kind="transformer",
                vocab_size=40,
                embedding_dim=8,
                transformer_config=tiny_bert_config(40, 8),
            )
        ),
    }
    assert isinstance(built["word_vectors"], WordVectorEncoder)
    assert isinstance(built["trigrams"], TrigramEncoder)
    assert isinstance(built["transformer"], TransformerTokenEncoder)


def test_load_inputs_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown inputs kind ''"):
        load_inputs(tmp_path, {"vectors": "random"})
    with pytest.raises(ValueError, match="'inputs' must be an object"):
        load_inputs(tmp_path, "word_vectors")  # type: ignore[arg-type]


# --- word vectors -----------------------------------------------------------------------------


def test_word_vector_inputs_need_fitting() -> None:
    inputs = build_inputs(WordVectorsConfig(vectors="random"))
    assert isinstance(inputs, WordVectorInputs)
    for call in (lambda: inputs.encode(["a"]), inputs.encoder_config):
        with pytest.raises(RuntimeError, match=r"call fit\(\) first"):
            call()


def test_word_vector_inputs_random_fit_encode(tmp_path: Path) -> None:
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", dim=7, dropout=0.2))
    inputs.fit(TEXTS, eval_texts=["unseen words only"], seed=3)
    tok = Tokenizer()
    vocab = Vocab.build(tok.tokenize(t) for t in TEXTS)
    assert inputs.vocab == vocab  # the training texts' words; no vectors, so no eval words
    assert inputs.vocab is not None and "unseen" not in inputs.vocab.tokens
    assert inputs.matrix is None and inputs.stats["source"] == "random"
    assert inputs.stats["eval_unknown_rate"] == 1.0  # every eval word is unknown
    assert inputs.encoder_config() == {
        "kind": "word_vectors",
        "vocab_size": len(vocab),
        "embedding_dim": 7,
        "trainable": False,
        "dropout": 0.2,
        "pretrained_rows": 0,
    }
    TokenEncoderConfig(**inputs.encoder_config())  # a valid model-config entry
    encoded = inputs.encode(["Glacier caves, unseen!", ""])
    assert [e.dtype for e in encoded] == [np.int64, np.int64]
    assert encoded[0].tolist() == vocab.encode(["glacier", "caves", ",", "unseen", "!"])
    assert encoded[0][3] == UNK_ID and encoded[1].shape == (0,)
    assert inputs.tokens("Glacier caves") == ["glacier", "caves"]


def test_word_vector_inputs_save_load_round_trip(tmp_path: Path) -> None:
    inputs = WordVectorInputs(WordVectorsConfig(vectors="random", dim=5, lowercase=False))
    inputs.fit(TEXTS)
    entry = inputs.save(tmp_path)
    assert (tmp_path / "vocab.json").is_file()
    assert json.loads(json.dumps(entry)) == entry  # what config.json holds
    assert entry["kind"] == "word_vectors" and entry["lowercase"] is False
    assert entry["max_length"] == 512  # the bound it used, unset in its config
    loaded = load_inputs(tmp_path, entry)
    assert isinstance(loaded, WordVectorInputs)
    assert loaded.config == dataclasses.replace(inputs.config, max_length=512)
    assert loaded.vocab == inputs.vocab and loaded.max_tokens == inputs.max_tokens == 512
    texts = [*TEXTS, "How ARE unseen caves?", ""]
    for a, b in zip(loaded.encode(texts), inputs.encode(texts), strict=True):
        np.testing.assert_array_equal(a, b)
    (tmp_path / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        load_inputs(tmp_path, entry)


def test_word_vector_inputs_from_a_vectors_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pretrained vectors: their size, eval words with a vector join the vocabulary, and the
    aligned (normalised) matrix is copied into the encoder."""
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("glacier 3 0 4\ncave 0 2 0\nice 1 1 1\n", encoding="utf-8")
    inputs = build_inputs(parse_inputs(str(vectors)))
    inputs.fit(["glacier caves"], eval_texts=["the ice", "cave"], seed=0)
    assert inputs.vocab is not None
    # The training words, then the eval words that have a vector (sorted).
    assert inputs.vocab.tokens == ["<pad>", "<unk>", "caves", "glacier", "cave", "ice"]
    assert "the" not in inputs.vocab.tokens  # an eval word without a vector stays <unk>
    config = inputs.encoder_config()
    assert config["embedding_dim"] == 3 and config["vocab_size"] == 6  # the file's dim, not 50
    assert inputs.stats["kind"] == "word_vectors" and inputs.stats["found"] == 3
    encoder = build_token_encoder(TokenEncoderConfig(**config))
    inputs.init_encoder(encoder)
    weight = encoder.embedding.weight
    torch.testing.assert_close(weight[3], torch.tensor([0.6, 0.0, 0.8]))  # normalised
    torch.testing.assert_close(weight[4], torch.tensor([0.0, 1.0, 0.0]))
    torch.testing.assert_close(weight[5], torch.full((3,), 3**-0.5))
    assert (weight[0] == 0).all()


# --- transformer ------------------------------------------------------------------------------


def test_transformer_inputs_from_a_directory(tmp_path: Path) -> None:
    path = write_tiny_encoder(tmp_path / "enc")
    config = parse_inputs(str(path))
    inputs = build_inputs(config)
    assert isinstance(inputs, TransformerInputs)
    inputs.fit()
    enc = inputs.encoder_config()
    assert enc["kind"] == "transformer" and enc["embedding_dim"] == 8
    assert enc["transformer_config"]["model_type"] == "bert"
    encoder = build_token_encoder(TokenEncoderConfig(**enc))
    inputs.init_encoder(encoder)
    assert inputs.stats["directory"] == str(path) and inputs.stats["kind"] == "transformer"
    encoded = inputs.encode(TEXTS)
    assert inputs.tokens(TEXTS[0])[0] == "[CLS]" and len(encoded[0]) == len(inputs.tokens(TEXTS[0]))
    entry = inputs.save(tmp_path)
    assert (tmp_path / "tokenizer.json").is_file()
    loaded = load_inputs(tmp_path, entry)
    assert isinstance(loaded, TransformerInputs) and loaded.config == config
    for a, b in zip(loaded.encode(TEXTS), encoded, strict=True):
        np.testing.assert_array_equal(a, b)


def test_position_limit_and_the_sub_words_read() -> None:
    from attnmatch.inputs.transformer import position_limit, sub_words_read

    bert = {"model_type": "bert", "max_position_embeddings": 512, "pad_token_id": 0}
    roberta = {"model_type": "roberta", "max_position_embeddings": 514, "pad_token_id": 1}
    assert position_limit(bert) == 512 and position_limit(roberta) == 512
    assert position_limit({"model_type": "bert"}) is None
    assert sub_words_read(256, bert) == 256 and sub_words_read(1000, roberta) == 512
    assert sub_words_read(1000, None) == 1000


# --- trigrams ---------------------------------------------------------------------------------


def test_trigram_inputs_encode_the_tokens_trigrams(tmp_path: Path) -> None:
    inputs = TrigramInputs(TrigramInputsConfig(buckets=500, dim=6))
    inputs.fit(TEXTS)  # nothing to fit: no vocabulary
    tok = Tokenizer()
    encoded = inputs.encode(TEXTS)
    for text, ids in zip(TEXTS, encoded, strict=True):
        assert ids.dtype == np.int64 and ids.ndim == 2
        assert ids.shape[0] == len(tok.tokenize(text))
        np.testing.assert_array_equal(ids, word_trigram_ids(tok.tokenize(text), 500))
    assert inputs.tokens(TEXTS[0]) == tok.tokenize(TEXTS[0])
    assert inputs.encoder_config() == {
        "kind": "trigrams",
        "vocab_size": 500,
        "embedding_dim": 6,
        "trainable": True,
        "dropout": 0.0,
    }
    entry = inputs.save(tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing besides the config entry
    loaded = load_inputs(tmp_path, json.loads(json.dumps(entry)))
    assert isinstance(loaded, TrigramInputs) and entry["max_length"] == 512
    assert loaded.config == dataclasses.replace(inputs.config, max_length=512)
    for a, b in zip(loaded.encode(TEXTS), encoded, strict=True):
        np.testing.assert_array_equal(a, b)


def _trigram_encoder(v: int = 6, e: int = 2, **kw) -> TrigramEncoder:
    torch.manual_seed(0)
    encoder = build_token_encoder(
        TokenEncoderConfig(kind="trigrams", vocab_size=v, embedding_dim=e, **kw)
    )
    assert isinstance(encoder, TrigramEncoder)
    return encoder


@torch.no_grad()
def test_trigram_encoder_sums_the_table_rows_of_each_word() -> None:
    encoder = _trigram_encoder()
    encoder.table.copy_(torch.tensor([[100.0, 100.0]] + [[i, 10.0 * i] for i in range(1, 6)]))
    ids = torch.tensor(
        [
            [[1, 2, 0], [3, 3, 0], [5, 0, 0]],  # "1+2", "3+3", then a padded word
            [[4, 0, 0], [0, 0, 0], [2, 2, 2]],  # a word of padding ids only, a padded word
        ]
    )
    mask = torch.tensor([[True, True, False], [True, True, False]])
    out = encoder(ids, mask)  # (B, L, E)
    expected = torch.tensor(
        [
            [[3.0, 30.0], [6.0, 60.0], [0.0, 0.0]],
            [[4.0, 40.0], [0.0, 0.0], [0.0, 0.0]],  # id 0 reads nothing, not row 0 (100)
        ]
    )
    torch.testing.assert_close(out, expected)
    with pytest.raises(ValueError, match=r"need \(B, L, K\) trigram ids"):
        encoder(ids[..., 0], mask)


def test_trigram_encoder_init() -> None:
    encoder = _trigram_encoder(v=50, e=10, trainable=True, dropout=0.0)
    bound = math.sqrt(6.0 / (50 + 10))
    assert encoder.bound == pytest.approx(bound)
    assert (encoder.table[0] == 0).all() and encoder.table.abs().max() <= bound
    assert encoder.table.requires_grad
    assert not _trigram_encoder(trainable=False).table.requires_grad


@torch.no_grad()
def test_rescale_init_scales_the_table() -> None:
    encoder = _trigram_encoder(v=50, e=10)
    before = encoder.table.clone()
    old, new = math.sqrt(6.0 / 60), math.sqrt(6.0 / (150 + 4))
    encoder.rescale_init(150, 4)
    assert encoder.bound == pytest.approx(new)
    torch.testing.assert_close(encoder.table, before * (new / old))
    encoder.rescale_init(50, 10)  # back to the original fans: the original draws
    torch.testing.assert_close(encoder.table, before)


# --- which models read which kinds ------------------------------------------------------------

TRIGRAM_MODELS = [m for m in list_models() if "trigrams" in get_model_entry(m).inputs]


def test_every_model_but_the_pretrained_baselines_reads_trigrams() -> None:
    assert {"mvlstm", "esim", "dssm", "cdssm"} <= set(TRIGRAM_MODELS)
    assert set(list_models()) - set(TRIGRAM_MODELS) == {"bi_encoder", "cross_encoder"}


# CDSSM's blocks must be window * filters wide; every other model takes the tiny trigram encoder.
_TRIGRAM_DIM = {"cdssm": 18, "dssm": 6}


@pytest.mark.parametrize("model_type", TRIGRAM_MODELS)
def test_a_model_on_trigram_inputs_runs_forward_and_backward(model_type: str) -> None:
    encoder = {"kind": "trigrams", "vocab_size": TRIGRAM_BUCKETS}
    if model_type in _TRIGRAM_DIM:
        encoder["embedding_dim"] = _TRIGRAM_DIM[model_type]
    model = tiny_model(model_type, num_outputs=2, trainable=True, encoder=encoder).train()
    assert isinstance(model.token_encoder, TrigramEncoder)
    left, right = random_pairs(6, seed=4)
    batch = model_batch(model, left, right, labels=[0, 1] * 3)
    assert batch.left_ids.dim() == 3
    out = model(batch)
    assert out.shape == (6, 2) and torch.isfinite(out).all()
    compute_loss("cross_entropy", out, batch).backward()
    grad = model.token_encoder.table.grad
    assert grad is not None and grad[1:].abs().sum() > 0
    assert grad[0].abs().sum() == 0  # the padding row is never read


def test_mvlstm_on_trigram_inputs_end_to_end() -> None:
    """Text -> trigram ids -> an aMV-LSTM whose input layer is a trigram table."""
    matcher = Matcher.untrained(
        "mvlstm",
        inputs={"kind": "trigrams", "buckets": 101, "dim": 8},
        task=Task(kind="ranking"),
        overrides=TINY["mvlstm"],
    )
    assert isinstance(matcher.model.token_encoder, TrigramEncoder)
    assert tuple(matcher.model.token_encoder.table.shape) == (101, 8)
    examples = [Example(left=TEXTS[0], right=TEXTS[1], label=1), Example("caves", "ice", 0)]
    data = encode_examples(examples, matcher.inputs.encode)
    batch = collate(data, np.arange(2))
    assert batch.left_ids.shape[:2] == batch.left_mask.shape and batch.left_ids.dim() == 3
    scores = matcher.score([(e.left, e.right) for e in examples])
    assert scores.shape == (2,) and np.isfinite(scores).all()


def test_check_accepts() -> None:
    cross = get_model_entry("cross_encoder").inputs
    assert cross == ("transformer",)
    with pytest.raises(
        ConfigError,
        match="model 'cross_encoder' cannot read word_vectors inputs; it reads transformer",
    ):
        check_accepts("cross_encoder", cross, WordVectorsConfig())
    with pytest.raises(ConfigError, match="cannot read trigrams inputs"):
        check_accepts("cross_encoder", cross, TrigramInputsConfig())
    check_accepts("cross_encoder", cross, TransformerInputsConfig())
    bi = get_model_entry("bi_encoder").inputs
    with pytest.raises(ConfigError, match="it reads word_vectors or transformer"):
        check_accepts("bi_encoder", bi, TrigramInputsConfig())
    check_accepts("bi_encoder", bi, WordVectorsConfig())
    check_accepts("mvlstm", get_model_entry("mvlstm").inputs, TrigramInputsConfig())


def test_matcher_refuses_inputs_a_model_cannot_read() -> None:
    with pytest.raises(ConfigError, match="cross_encoder' cannot read word_vectors"):
        Matcher.untrained("cross_encoder", inputs="random", task=Task(kind="ranking"))


# --- no kind branches outside attnmatch/inputs/ -----------------------------------------------

SRC = Path(__file__).resolve().parents[1] / "src" / "attnmatch"
INPUT_KINDS = frozenset({"word_vectors", "transformer", "trigrams"})
KIND_CLASSES = frozenset(
    {
        "WordVectorEncoder",
        "TransformerTokenEncoder",
        "TrigramEncoder",
        "WordVectorInputs",
        "TransformerInputs",
        "TrigramInputs",
        "WordVectorsConfig",
        "TransformerInputsConfig",
        "TrigramInputsConfig",
    }
)
# Attributes only one kind's encoder has: probing for them is asking the kind.
KIND_ATTRIBUTES = frozenset(
    {
        "transformer",
        "table",
        "embedding",
        "load_pretrained_transformer",
        "rescale_init",
        "enable_cache",
        "disable_cache",
    }
)
# A comparison with a kind written in the source text (a second net under the AST check).
KIND_COMPARISON = re.compile(
    r"""(?:[!=]=|\bin)\s*\(?\s*["'](?:word_vectors|transformer|trigrams)["']"""
    r"""|["'](?:word_vectors|transformer|trigrams)["']\s*(?:[!=]=|\bin\b|\bnot\s+in\b)"""
)


def _strings(node: ast.AST) -> set[str]:
    """String constants of a comparison operand: itself, or the items of a literal container."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for item in node.elts for s in _strings(item)}
    return set()


def _names(node: ast.AST) -> set[str]:
    """Class names in an isinstance() second argument (a name, a tuple, or an X | Y union)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Tuple):
        return {n for item in node.elts for n in _names(item)}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _names(node.left) | _names(node.right)
    return set()


def _pattern_strings(pattern: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(pattern):
        if isinstance(node, ast.MatchValue):
            out |= _strings(node.value)
        if isinstance(node, ast.MatchClass):
            out |= _names(node.cls)
    return out


def _ast_kind_branches(source: str, filename: str) -> list[str]:
    """Every place in `source` that asks which input kind it has: a comparison or membership
    test with a kind name, isinstance() with a kind's class, a match case on either, or
    hasattr()/getattr() of an attribute only one kind's encoder has."""
    found: list[str] = []

    def hit(node: ast.AST) -> None:
        found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")  # type: ignore[attr-defined]

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Compare):
            if any(_strings(op) & INPUT_KINDS for op in (node.left, *node.comparators)):
                hit(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            func, args = node.func.id, node.args
            if func in ("isinstance", "issubclass") and len(args) == 2:
                if _names(args[1]) & KIND_CLASSES:
                    hit(node)
            elif func in ("hasattr", "getattr") and len(args) >= 2:
                if _strings(args[1]) & KIND_ATTRIBUTES:
                    hit(node)
        elif isinstance(node, ast.match_case):
            if _pattern_strings(node.pattern) & (INPUT_KINDS | KIND_CLASSES):
                hit(node.pattern)
    return found


def _text_kind_comparisons(source: str, filename: str) -> list[str]:
    """The grep: source lines comparing with a kind name, outside comments and docstrings."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(source, filename)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return [
        f"{filename}:{lineno}: {line.strip()}"
        for lineno, line in enumerate(source.splitlines(), start=1)
        if lineno not in docs and KIND_COMPARISON.search(line.split("#", 1)[0])
    ]


def kind_branches(source: str, filename: str = "<src>") -> list[str]:
    """Both checks' findings (the AST check and the grep), one line each."""
    found = _ast_kind_branches(source, filename)
    seen = {f.split(": ", 1)[0] for f in found}
    found += [
        f for f in _text_kind_comparisons(source, filename) if f.split(": ", 1)[0] not in seen
    ]
    return found


def _source_files() -> list[Path]:
    inputs_dir = SRC / "inputs"
    files = [p for p in sorted(SRC.rglob("*.py")) if inputs_dir not in p.parents]
    assert len(files) > 20 and SRC / "models" / "dssm.py" in files  # the tree was found
    return files


@pytest.mark.parametrize(
    ("planted", "grep_too"),
    [
        ('if config.encoder.kind == "transformer":\n    pass', True),
        ('if "trigrams" != kind:\n    pass', True),
        ('ok = encoder.kind in ("word_vectors", "trigrams")', True),
        ('ok = entry.get("kind") not in ["transformer"]', False),
        ("if isinstance(m.token_encoder, TransformerTokenEncoder):\n    pass", False),
        ("ok = isinstance(enc, (WordVectorEncoder, TrigramEncoder))", False),
        ("ok = isinstance(enc, inputs.trigrams.TrigramEncoder | int)", False),
        ("ok = isinstance(inputs, TransformerInputs)", False),
        ('ok = hasattr(model.token_encoder, "transformer")', False),
        ('table = getattr(encoder, "table", None)', False),
        ('rescale = getattr(self.token_encoder, "rescale_init", None)', False),
        ('match kind:\n    case "trigrams":\n        pass', False),
        ("match enc:\n    case TrigramEncoder():\n        pass", False),
    ],
)
def test_the_kind_branch_guard_catches_planted_branches(planted: str, grep_too: bool) -> None:
    """The guard below can fail: the AST check reports each planted line (and the grep the
    plain comparisons with a kind name)."""
    assert _ast_kind_branches(planted, "planted.py"), f"the AST check missed: {planted}"
    if grep_too:
        assert _text_kind_comparisons(planted, "planted.py"), f"the grep missed: {planted}"
    assert len(kind_branches(planted, "planted.py")) == 1  # one finding per line


@pytest.mark.parametrize(
    "innocent",
    [
        'if self.task.kind == "classification":\n    pass',  # task kinds, not input kinds
        'if kind == "cosine":\n    pass',
        'register(inputs=("word_vectors", "transformer"))',  # declaring, not branching
        'PRESET = {"kind": "transformer", "source": "minilm-l6"}',
        'if encoder.get("kind") == "static":\n    pass',  # the format-1 migration's old name
        "ok = isinstance(x, nn.Module)",
        '"""Docs may say kind = "transformer"."""',
        'def f():\n    """Not when kind == "transformer": the inputs decide."""',
        'x = 1  # a comment may say kind == "trigrams"',
    ],
)
def test_the_kind_branch_guard_ignores_other_code(innocent: str) -> None:
    assert kind_branches(innocent, "innocent.py") == []


def test_no_kind_branches_outside_inputs() -> None:
    """Only `attnmatch/inputs/` may ask which input kind it has; everything else calls the
    methods of `Inputs` (fit, encode, encoder_config, init_encoder, save) and
    `build_token_encoder`, or reads the registry's declared kinds."""
    found = [
        f
        for path in _source_files()
        for f in kind_branches(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    ]
    assert found == [], "input-kind branches outside attnmatch/inputs/:\n" + "\n".join(found)


def test_wordpiece_vectors_are_the_encoders_table_rows(tmp_path: Path) -> None:
    """Static word pieces: the encoder's tokenizer, and each id's row of its input embedding
    table, no transformer pass; `wordpiece` is the short name."""
    pytest.importorskip("transformers")
    from attnmatch.inputs.wordpiece import read_table
    from tests.tiny_transformer import write_tiny_encoder

    source = write_tiny_encoder(tmp_path / "encoder")
    config = parse_inputs(f"wordpiece:{source}")
    assert config.kind == "wordpiece"
    inputs = build_inputs(config)
    inputs.fit(["a glacier cave"])
    encoder = build_token_encoder(TokenEncoderConfig(**inputs.encoder_config()))
    inputs.init_encoder(encoder)
    ids = torch.from_numpy(inputs.encode(["a glacier cave"])[0])[None]  # (1, L)
    mask = torch.ones_like(ids, dtype=torch.bool)
    vectors = encoder(ids, mask)  # (1, L, E)
    assert torch.equal(vectors[0], read_table(source)[ids[0]])
    assert not any(p.requires_grad for p in encoder.parameters())  # fixed by default


def test_static_vectors_are_distilled_once_per_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Static inputs: model2vec's vectors of the source, cached by the source's weights; the
    same source is distilled once, another source (other weights) gets its own vectors, and a
    model reads each id's row of the distilled table."""
    pytest.importorskip("model2vec")
    from attnmatch.inputs.static import distilled_vectors, read_static_table
    from tests.tiny_transformer import write_tiny_encoder

    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    source = write_tiny_encoder(tmp_path / "encoder")
    config = parse_inputs({"kind": "static", "source": str(source), "dims": 4})
    inputs = build_inputs(config)
    inputs.fit(["a glacier cave"])
    encoder = build_token_encoder(TokenEncoderConfig(**inputs.encoder_config()))
    inputs.init_encoder(encoder)
    folder = distilled_vectors(source, dims=4, sif=1e-4)
    written = (folder / "model.safetensors").stat().st_mtime_ns
    assert distilled_vectors(source, dims=4, sif=1e-4) == folder  # cached, not distilled again
    assert (folder / "model.safetensors").stat().st_mtime_ns == written
    ids = torch.from_numpy(inputs.encode(["a glacier cave"])[0])[None]  # (1, L)
    vectors = encoder(ids, torch.ones_like(ids, dtype=torch.bool))  # (1, L, 4)
    assert torch.equal(vectors[0], read_static_table(folder)[ids[0]])
    other = write_tiny_encoder(tmp_path / "other", seed=1)
    assert distilled_vectors(other, dims=4, sif=1e-4) != folder
    assert parse_inputs(f"static:{source}").kind == "static"


def test_static_inputs_without_model2vec_name_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from attnmatch.inputs.static import distilled_vectors
    from tests.tiny_transformer import write_tiny_encoder

    pytest.importorskip("transformers")
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "model2vec.distill", None)
    with pytest.raises(ImportError, match=r"attnmatch\[static\]"):
        distilled_vectors(write_tiny_encoder(tmp_path / "encoder"), dims=4, sif=0.0)


def test_static_vectors_of_a_saved_bi_encoder_are_its_transformers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model folder with a transformer inside (a fine-tuned teacher) is read as that
    transformer: its weights, tokenizer and config, written once to the cache."""
    pytest.importorskip("model2vec")
    from safetensors.torch import load_file

    from attnmatch.inputs.static import distilled_vectors, transformer_folder
    from tests.tiny_transformer import write_tiny_encoder

    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    source = write_tiny_encoder(tmp_path / "encoder")
    saved = Matcher.from_encoder(str(source)).save(tmp_path / "teacher")
    folder = transformer_folder(saved)
    assert folder != saved and transformer_folder(source) == source
    ours, theirs = (
        load_file(str(folder / "model.safetensors")),
        load_file(str(source / "model.safetensors")),
    )
    assert set(ours) <= {k.removeprefix("bert.") for k in theirs}
    for name, tensor in ours.items():
        assert torch.equal(tensor, theirs[f"bert.{name}"])
    assert (distilled_vectors(saved, dims=4, sif=1e-4) / "tokenizer.json").is_file()


def test_a_model2vec_folder_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Static vectors already made (a model2vec folder, e.g. fitted to a corpus) are read
    directly: the model reads each id's row of that folder's table, with no distillation (it
    works without model2vec installed)."""
    import json
    import shutil
    import sys

    from safetensors.torch import save_file

    from attnmatch.inputs.static import is_static_folder
    from tests.tiny_transformer import write_tiny_encoder

    pytest.importorskip("transformers")
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    encoder_dir = write_tiny_encoder(tmp_path / "encoder")
    folder = tmp_path / "fitted"
    folder.mkdir()
    shutil.copy(encoder_dir / "tokenizer.json", folder / "tokenizer.json")
    (folder / "config.json").write_text(json.dumps({"model_type": "model2vec"}))
    vocab = len(json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"])
    table = torch.randn(vocab, 3)
    save_file({"embeddings": table}, str(folder / "model.safetensors"))
    assert is_static_folder(folder) and not is_static_folder(encoder_dir)
    monkeypatch.setitem(sys.modules, "model2vec.distill", None)  # nothing is distilled
    inputs = build_inputs(parse_inputs(f"static:{folder}"))
    inputs.fit(["a glacier cave"])
    encoder = build_token_encoder(TokenEncoderConfig(**inputs.encoder_config()))
    inputs.init_encoder(encoder)
    ids = torch.from_numpy(inputs.encode(["a glacier cave"])[0])[None]  # (1, L)
    vectors = encoder(ids, torch.ones_like(ids, dtype=torch.bool))  # (1, L, 3)
    assert torch.equal(vectors[0], table[ids[0]])
