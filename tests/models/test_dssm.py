"""DSSM and CDSSM beyond the common suite: the trigram input layer plus each model's tower
against the literal dense count-vector matmuls, the cosine head, heavy padding (with junk under
it), the real trigram pipeline, missing or wrong trigram inputs, config errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnmatch.data.collate import collate
from attnmatch.data.schema import Example
from attnmatch.data.trigrams import word_trigram_ids
from attnmatch.inputs import (
    TokenEncoderConfig,
    TrigramInputsConfig,
    build_inputs,
    build_token_encoder,
    parse_inputs,
)
from attnmatch.inputs.layers import TrigramEncoder, WordVectorEncoder
from attnmatch.matcher import Matcher
from attnmatch.models import default_inputs, resolve_model_config
from attnmatch.models.dssm import CDSSM, DSSM, CDSSMConfig, DSSMConfig, TrigramConv
from attnmatch.tasks import Task

from .conftest import TRIGRAM_BUCKETS, VOCAB, model_batch, random_pairs, tiny_model

V = TRIGRAM_BUCKETS


def _tiny(name: str, *, num_outputs: int = 1, trainable: bool = False, **overrides: Any) -> Any:
    """The tiny DSSM / CDSSM (conftest's TINY) on V trigram buckets, in eval mode."""
    return tiny_model(name, num_outputs=num_outputs, trainable=trainable, **overrides).eval()


def _counts(trigrams: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-word trigram count vectors f_t, written out with loops (id 0 and padded words count
    nothing). Shape: (B, T, K), (B, T) -> (B, T, V)"""
    b, t, k = trigrams.shape
    f = torch.zeros(b, t, V)
    for i in range(b):
        for s in range(t):
            if mask[i, s]:
                for j in range(k):
                    tri = int(trigrams[i, s, j])
                    if tri != 0:
                        f[i, s, tri] += 1.0
    return f


def _random_trigrams(seed: int, b: int, t: int, k: int) -> torch.Tensor:
    """Ragged random bags with repeated ids (counts > 1), zero-padded within each word."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 6, (b, t, k), generator=g)  # few distinct ids: many repeats
    keep = torch.arange(k) < torch.randint(1, k + 1, (b, t, 1), generator=g)  # (B, T, K)
    return ids * keep


@torch.no_grad()
def test_dssm_count_vectors_by_hand() -> None:
    """The reference itself: words (3, 5, 5) and (5) -> count 1 for trigram 3, 3 for trigram 5;
    the padded word's trigram 7 counts nothing."""
    trigrams = torch.tensor([[[3, 5, 5], [5, 0, 0], [7, 0, 0]]])
    mask = torch.tensor([[True, True, False]])
    x = _counts(trigrams, mask).sum(dim=1)[0]  # (V,)
    assert x[3] == 1.0 and x[5] == 3.0 and x.sum() == 4.0


@torch.no_grad()
def test_dssm_embedding_bag_first_layer_equals_dense_count_vector_matmul() -> None:
    """The first layer W_1 x + b_1 is the trigram encoder's words summed over the text plus
    DSSM's bias; the table is W_1^T (V, H_1)."""
    model = _tiny("dssm", hidden_sizes=[4, 3])
    table = model.token_encoder.table  # (V, H_1) = W_1^T
    assert tuple(table.shape) == (V, 6)
    model.bias.normal_()  # a non-zero b_1
    trigrams = _random_trigrams(1, 3, 5, 4)
    trigrams[2, 4] = torch.tensor([9, 9, 11, 0])  # junk under a padded word
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [True] * 4 + [False]])
    x = _counts(trigrams, mask).sum(dim=1)  # (B, V), the text's trigram bag
    dense = x @ table + model.bias  # W_1 x + b_1
    first = model.token_encoder(trigrams, mask).sum(dim=1) + model.bias
    torch.testing.assert_close(first, dense)

    # The whole tower: tanh layers 6 -> 4 -> 3 -> 5 on the dense bag.
    assert [layer.in_features for layer in model.layers] == [6, 4, 3]
    h = torch.tanh(dense)
    for layer in model.layers:
        h = torch.tanh(h @ layer.weight.T + layer.bias)
    torch.testing.assert_close(model.tower(trigrams, mask), h)


@torch.no_grad()
def test_dssm_first_layer_size_is_the_inputs_dim() -> None:
    """H_1 is the encoder's embedding_dim; hidden_sizes are the layers after it."""
    model = _tiny("dssm", encoder={"embedding_dim": 7}, hidden_sizes=[4])
    assert tuple(model.token_encoder.table.shape) == (V, 7)
    assert tuple(model.bias.shape) == (7,)
    assert [(lay.in_features, lay.out_features) for lay in model.layers] == [(7, 4), (4, 5)]
    straight = _tiny("dssm", encoder={"embedding_dim": 7}, hidden_sizes=[])
    assert [(lay.in_features, lay.out_features) for lay in straight.layers] == [(7, 5)]


@torch.no_grad()
@pytest.mark.parametrize(("window", "length"), [(3, 5), (3, 2), (3, 1), (5, 6), (5, 2), (1, 3)])
def test_cdssm_conv_equals_dense_window_concatenation(window: int, length: int) -> None:
    """h_t = W_c [f_{t-c}; ...; f_{t+c}] + b_c with zero vectors outside the text, for every real
    word t: the trigram encoder (table [W_1^T | ... | W_w^T]) then the shift-and-sum
    convolution; texts shorter than the window included."""
    filters, c = 4, (window - 1) // 2
    torch.manual_seed(0)
    encoder = build_token_encoder(
        TokenEncoderConfig(kind="trigrams", vocab_size=V, embedding_dim=window * filters)
    )
    conv = TrigramConv(window, filters)
    conv.bias.normal_()
    t = length + 2  # two padded positions, with junk trigrams under them
    trigrams = _random_trigrams(2, 2, t, 3)
    mask = torch.arange(t) < torch.tensor([[length], [max(length - 1, 1)]])  # (B, T)
    f = _counts(trigrams, mask)  # (B, T, V), zero on padded words
    w_blocks = encoder.table.reshape(V, window, filters)  # (V, w, F)
    w_c = torch.cat([w_blocks[:, k].T for k in range(window)], dim=1)  # (F, w V) = [W_1 ... W_w]
    out = conv(encoder(trigrams, mask))  # (B, T, F)
    for i in range(2):
        n = int(mask[i].sum())
        for s in range(n):
            window_vectors = [
                f[i, s + k - c] if 0 <= s + k - c < n else torch.zeros(V) for k in range(window)
            ]
            l_t = torch.cat(window_vectors)  # (w V), the word-n-gram layer
            torch.testing.assert_close(out[i, s], w_c @ l_t + conv.bias)


@torch.no_grad()
def test_cdssm_tower_max_pools_real_words_only() -> None:
    model = _tiny("cdssm")
    model.conv.bias.fill_(5.0)  # tanh(5 + ...) at padded positions would win every max
    trigrams = _random_trigrams(3, 1, 6, 3)
    mask = torch.tensor([[True, True, False, False, False, False]])
    h = torch.tanh(model.conv(model.token_encoder(trigrams, mask)))[0, :2]  # (2, F), real words
    v = h.amax(dim=0)  # (F,)
    expected = torch.tanh(model.semantic(v))
    torch.testing.assert_close(model.tower(trigrams, mask)[0], expected)
    torch.testing.assert_close(model.tower(trigrams[:, :2], mask[:, :2])[0], expected)


def test_cdssm_rescales_the_trigram_table_to_the_convolutions_fans() -> None:
    """The table starts Xavier-uniform for (V, w F); CDSSM rescales it to the convolution's
    fans, +-sqrt(6 / (w V + F)), the same draws scaled."""
    model = _tiny("cdssm")  # window 3, filters 6, V buckets, dim 18
    bound = math.sqrt(6.0 / (3 * V + 6))
    assert model.token_encoder.bound == pytest.approx(bound)
    torch.manual_seed(0)  # tiny_model's seed: the encoder is the first module built
    plain = TrigramEncoder(model.config.encoder)
    assert plain.bound == pytest.approx(math.sqrt(6.0 / (V + 18)))
    torch.testing.assert_close(model.token_encoder.table, plain.table * (bound / plain.bound))
    assert model.token_encoder.table.abs().max() <= bound
    assert (model.token_encoder.table[0] == 0).all()


@torch.no_grad()
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("dssm", {}),
        ("dssm", {"hidden_sizes": [4, 3]}),
        ("cdssm", {}),
        ("cdssm", {"window": 5, "encoder": {"embedding_dim": 30}}),
        ("cdssm", {"window": 1, "encoder": {"embedding_dim": 6}}),
    ],
)
def test_padding_invariance_with_much_padding(name: str, overrides: dict[str, Any]) -> None:
    model = _tiny(name, **overrides)
    for pname, param in model.named_parameters():  # non-zero biases: padding is not neutral
        if pname.endswith("bias"):
            param.normal_(generator=torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(9)
    lengths = [(1, 1), (2, 17), (9, 3), (20, 25), (4, 1), (13, 8)]
    left = [torch.randint(2, VOCAB, (n,), generator=g).tolist() for n, _ in lengths]
    right = [torch.randint(2, VOCAB, (m,), generator=g).tolist() for _, m in lengths]
    batch = model_batch(model, left, right, extra_pad=23)
    for side in ("left", "right"):  # junk trigram ids under every padded word
        mask, ids = getattr(batch, f"{side}_mask"), getattr(batch, f"{side}_ids")
        assert ids.dim() == 3 and ids.shape[:2] == mask.shape
        junk = torch.randint(1, V, ids.shape, generator=g)
        setattr(batch, f"{side}_ids", torch.where(mask.unsqueeze(-1), ids, junk))
    batched = model(batch)
    assert torch.isfinite(batched).all()
    for i in range(len(left)):
        alone = model(model_batch(model, [left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_head_is_the_cosine_or_a_linear_map_of_it(name: str) -> None:
    left, right = random_pairs(5, seed=3)
    model = _tiny(name)
    batch = model_batch(model, left, right)
    a, b = model.encode(batch)  # (B, S) each
    cosine = F.cosine_similarity(a, b, dim=-1).unsqueeze(-1)  # (B, 1)
    torch.testing.assert_close(model(batch), cosine)
    several = _tiny(name, num_outputs=3)
    a, b = several.encode(batch)
    cosine = F.cosine_similarity(a, b, dim=-1).unsqueeze(-1)
    linear = several.head.output
    torch.testing.assert_close(several(batch), cosine @ linear.weight.T + linear.bias)


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_towers_are_shared_so_the_score_is_symmetric(name: str) -> None:
    model = _tiny(name)
    left, right = random_pairs(4, seed=3)
    torch.testing.assert_close(
        model(model_batch(model, left, right)), model(model_batch(model, right, left))
    )
    assert not any(n.startswith(("left", "right")) for n, _ in model.named_parameters())


@torch.no_grad()
def test_empty_text_gives_a_finite_score() -> None:
    model = _tiny("cdssm")
    batch = model_batch(model, [[5, 6]], [[7]])
    batch.right_mask[:] = False  # a fully padded text pools to zeros
    batch.right_ids[:] = 0
    assert torch.isfinite(model(batch)).all()
    dssm = _tiny("dssm")
    batch = model_batch(dssm, [[5, 6]], [[7]])
    batch.right_mask[:] = False
    batch.right_ids[:] = 0
    assert torch.isfinite(dssm(batch)).all()


@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_padding_trigram_row_gets_no_gradient(name: str) -> None:
    model = _tiny(name, trainable=True).train()
    left, right = random_pairs(4, seed=2)
    model(model_batch(model, left, right)).sum().backward()
    grad = model.token_encoder.table.grad
    assert grad is not None and grad[0].abs().sum() == 0 and grad[1:].abs().sum() > 0


@torch.no_grad()
@pytest.mark.parametrize(("name", "dim", "overrides"), [
    ("dssm", 6, {"hidden_sizes": [], "output_size": 5}),
    ("cdssm", 18, {"filters": 6, "output_size": 5}),
])  # fmt: skip
def test_runs_on_the_real_trigram_pipeline(name: str, dim: int, overrides: dict[str, Any]) -> None:
    """Text -> TrigramInputs (1000 buckets) -> encode_examples -> collate -> the model."""
    matcher = Matcher.untrained(
        name,
        inputs={"kind": "trigrams", "buckets": 1000, "dim": dim},
        task=Task(kind="ranking"),
        overrides=overrides,
    )
    model = matcher.model
    assert model.config.encoder.kind == "trigrams" and model.config.encoder.vocab_size == 1000
    assert tuple(model.token_encoder.table.shape) == (1000, dim)
    examples = [
        Example(left="where is paris", right="paris is in france", label=1.0),
        Example(left="where is paris", right="a dog", label=0.0),
    ]
    data = matcher.encode(examples)
    assert len(data.texts) == 3  # "where is paris" once
    np.testing.assert_array_equal(data.texts[0], word_trigram_ids(["where", "is", "paris"], 1000))
    batch = collate(data, np.array([0, 1]))
    assert batch.left_ids.shape[:2] == batch.left_mask.shape and batch.left_ids.dim() == 3
    assert int(batch.left_ids.max()) < 1000 and int(batch.right_ids.max()) < 1000
    scores = model(batch)
    assert scores.shape == (2, 1) and torch.isfinite(scores).all()
    assert (scores.abs() <= 1.0 + 1e-6).all()
    np.testing.assert_allclose(
        matcher.score([(e.left, e.right) for e in examples]), scores[:, 0].numpy(), atol=1e-6
    )


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_missing_or_wrong_trigram_inputs_are_clear_errors(name: str) -> None:
    model = _tiny(name)
    left, right = random_pairs(2, seed=1)
    batch = model_batch(model, left, right)
    batch.right_ids = batch.right_ids[..., 0]  # (B, R) token ids, not trigram bags
    with pytest.raises(ValueError, match=r"trigram inputs need \(B, L, K\) trigram ids"):
        model(batch)
    batch = model_batch(model, left, right)
    assert batch.left_mask.shape[1] > 2
    batch.left_ids = batch.left_ids[:, :2]  # misaligned with the mask
    with pytest.raises(ValueError, match="aligned with the"):
        model(batch)
    batch = model_batch(model, left, right)
    batch.left_ids[0, 0, 0] = V  # hashed with more buckets than the model has
    with pytest.raises(ValueError, match="buckets"):
        model(batch)


@torch.no_grad()
def test_trigram_ids_of_one_word_against_a_longer_mask_are_an_error() -> None:
    model = _tiny("dssm")
    left, right = random_pairs(2, seed=1)
    batch = model_batch(model, left, right)
    assert batch.left_mask.shape[1] > 1
    batch.left_ids = batch.left_ids[:, :1]
    with pytest.raises(ValueError, match="aligned with the"):
        model(batch)


@torch.no_grad()
@pytest.mark.parametrize(("name", "encoder"), [
    ("dssm", {"kind": "word_vectors", "embedding_dim": 6}),
    ("cdssm", {"kind": "word_vectors", "embedding_dim": 18}),
])  # fmt: skip
def test_the_towers_read_other_inputs_too(name: str, encoder: dict[str, Any]) -> None:
    """DSSM/CDSSM are a tower over any input layer: on word vectors they read (B, L) ids, and
    only a trigram table is rescaled."""
    model = _tiny(name, encoder=encoder)
    assert isinstance(model.token_encoder, WordVectorEncoder)
    left, right = random_pairs(3, seed=4)
    batch = model_batch(model, left, right)
    assert batch.left_ids.dim() == 2
    out = model(batch)
    assert out.shape == (3, 1) and torch.isfinite(out).all()


ENC = TokenEncoderConfig(kind="trigrams", vocab_size=10, embedding_dim=4)
ENC_C = TokenEncoderConfig(kind="trigrams", vocab_size=10, embedding_dim=900)  # 3 * 300


@pytest.mark.parametrize(
    ("cls", "field", "value", "match"),
    [
        (DSSMConfig, "hidden_sizes", (300, 0), "hidden_sizes must all be >= 1"),
        (DSSMConfig, "output_size", 0, "output_size must be >= 1"),
        (DSSMConfig, "num_outputs", 0, "num_outputs must be >= 1"),
        (DSSMConfig, "dropout", 1.0, "dropout must be in"),
        (CDSSMConfig, "window", 2, "window must be a positive odd number"),
        (CDSSMConfig, "window", -1, "window must be a positive odd number"),
        (CDSSMConfig, "filters", 0, "filters must be >= 1"),
        (CDSSMConfig, "output_size", 0, "output_size must be >= 1"),
        (CDSSMConfig, "dropout", -0.1, "dropout must be in"),
        (CDSSMConfig, "filters", 100, r"dim must be window \* filters = 300, got 900"),
        (CDSSMConfig, "window", 5, r"dim must be window \* filters = 1500, got 900"),
    ],
)
def test_config_errors(cls: type, field: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(encoder=ENC if cls is DSSMConfig else ENC_C, **{field: value})


def test_trigram_bucket_errors() -> None:
    """The bucket count (formerly trigram_buckets) is checked by the trigram inputs."""
    with pytest.raises(ValueError, match=r"vocab_size \(trigram buckets\) must be >= 2"):
        TokenEncoderConfig(kind="trigrams", vocab_size=1, embedding_dim=4)
    with pytest.raises(ValueError, match="buckets must be >= 2"):
        TrigramInputsConfig(buckets=1)
    with pytest.raises(ValueError, match="buckets must be >= 2"):
        TrigramInputsConfig(buckets=0)


def test_cdssm_dim_mismatch_names_the_inputs() -> None:
    with pytest.raises(ValueError, match="window \\* filters = 18, got 8"):
        tiny_model("cdssm", encoder={"embedding_dim": 8})


def test_config_defaults_are_the_papers() -> None:
    dssm = DSSMConfig(encoder=ENC)
    assert (dssm.hidden_sizes, dssm.output_size) == ((300,), 128)
    cdssm = CDSSMConfig(encoder=ENC_C)
    assert (cdssm.window, cdssm.filters, cdssm.output_size) == (3, 300, 128)
    assert DSSMConfig(encoder=ENC, hidden_sizes=()).hidden_sizes == ()
    # The default inputs: ~30K trigram buckets; DSSM's first layer 300 (so 300 -> 300 -> 128),
    # CDSSM's per-word blocks 3 * 300.
    for name, dim in (("dssm", 300), ("cdssm", 900)):
        config = parse_inputs(default_inputs(name))
        assert (config.kind, config.buckets, config.dim, config.trainable) == (
            "trigrams", 30001, dim, True,
        )  # fmt: skip
        _, model_config = resolve_model_config(
            name, encoder=build_inputs(config).encoder_config(), num_outputs=1
        )
        assert model_config.encoder.kind == "trigrams"
        assert (model_config.encoder.vocab_size, model_config.encoder.embedding_dim) == (30001, dim)


def test_config_has_no_trigram_buckets() -> None:
    from attnmatch.configs import ConfigError

    with pytest.raises(ConfigError, match="trigram_buckets"):
        resolve_model_config(
            "dssm",
            encoder={"kind": "trigrams", "vocab_size": V, "embedding_dim": 6},
            num_outputs=1,
            overrides={"trigram_buckets": V},
        )


def test_the_trigram_table_is_the_token_encoder() -> None:
    """No word-embedding table: the input layer is the trigram table, trained by default."""
    for model in (_tiny("dssm", trainable=True), _tiny("cdssm", trainable=True)):
        assert isinstance(model, DSSM | CDSSM)
        assert isinstance(model.token_encoder, TrigramEncoder)
        assert not any(isinstance(m, torch.nn.Embedding) for m in model.modules())
        assert tuple(model.token_encoder.table.shape) == (V, model.config.encoder.embedding_dim)
        assert all(p.requires_grad for p in model.parameters())
    assert TrigramInputsConfig().trainable
