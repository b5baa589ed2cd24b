"""DSSM and CDSSM beyond the common suite: the sparse first layers against the literal dense
count-vector matmuls, the cosine head, heavy padding (with junk under it), the real trigram
pipeline, missing or wrong trigram inputs, config errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnmatch.data.collate import collate
from attnmatch.data.encoding import encode_examples
from attnmatch.data.schema import Example
from attnmatch.data.tokenize import Tokenizer
from attnmatch.data.vocab import Vocab
from attnmatch.models import encoding_options
from attnmatch.models.dssm import CDSSM, DSSM, CDSSMConfig, DSSMConfig, TrigramConv
from attnmatch.models.token_encoder import TokenEncoderConfig

from .conftest import TRIGRAM_BUCKETS, VOCAB, make_batch, random_pairs, tiny_model

V = TRIGRAM_BUCKETS


# The TINY entries proposed for conftest.py; until they are there, the models are built here.
def _tiny(name: str, *, num_outputs: int = 1, **overrides: Any) -> Any:
    return tiny_model(name, num_outputs=num_outputs, **overrides).eval()


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
    model = _tiny("dssm", hidden_sizes=[4, 3])
    model.first.bias.normal_()  # a non-zero b_1
    trigrams = _random_trigrams(1, 3, 5, 4)
    trigrams[2, 4] = torch.tensor([9, 9, 11, 0])  # junk under a padded word
    mask = torch.tensor([[True] * 5, [True, True, False, False, False], [True] * 4 + [False]])
    x = _counts(trigrams, mask).sum(dim=1)  # (B, V), the text's trigram bag
    dense = x @ model.first.weight + model.first.bias  # W_1 x + b_1, W_1^T = weight (V, H)
    torch.testing.assert_close(model.first(trigrams, mask), dense)

    # The whole tower: tanh layers 4 -> 3 -> 5 on the dense bag.
    h = torch.tanh(dense)
    for layer in model.layers:
        h = torch.tanh(h @ layer.weight.T + layer.bias)
    torch.testing.assert_close(model.tower(trigrams, mask), h)


@torch.no_grad()
@pytest.mark.parametrize(("window", "length"), [(3, 5), (3, 2), (3, 1), (5, 6), (5, 2), (1, 3)])
def test_cdssm_conv_equals_dense_window_concatenation(window: int, length: int) -> None:
    """h_t = W_c [f_{t-c}; ...; f_{t+c}] + b_c with zero vectors outside the text, for every real
    word t, and the tower's max over real words; texts shorter than the window included."""
    filters, c = 4, (window - 1) // 2
    torch.manual_seed(0)
    conv = TrigramConv(V, window, filters)
    conv.bias.normal_()
    t = length + 2  # two padded positions, with junk trigrams under them
    trigrams = _random_trigrams(2, 2, t, 3)
    mask = torch.arange(t) < torch.tensor([[length], [max(length - 1, 1)]])  # (B, T)
    f = _counts(trigrams, mask)  # (B, T, V), zero on padded words
    w_blocks = conv.weight.reshape(V, window, filters)  # (V, w, F)
    w_c = torch.cat([w_blocks[:, k].T for k in range(window)], dim=1)  # (F, w V) = [W_1 ... W_w]
    out = conv(trigrams, mask)  # (B, T, F)
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
    h = torch.tanh(model.conv(trigrams, mask))[0, :2]  # (2, F), the real words
    v = h.amax(dim=0)  # (F,)
    expected = torch.tanh(model.semantic(v))
    torch.testing.assert_close(model.tower(trigrams, mask)[0], expected)
    torch.testing.assert_close(model.tower(trigrams[:, :2], mask[:, :2])[0], expected)


@torch.no_grad()
@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("dssm", {}),
        ("dssm", {"hidden_sizes": []}),
        ("cdssm", {}),
        ("cdssm", {"window": 5}),
        ("cdssm", {"window": 1}),
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
    batch = make_batch(left, right, extra_pad=23)
    for side in ("left", "right"):  # junk trigram ids under every padded word
        mask = getattr(batch, f"{side}_mask")
        junk = torch.randint(1, V, batch.extras[f"{side}_trigrams"].shape, generator=g)
        batch.extras[f"{side}_trigrams"] = torch.where(
            mask.unsqueeze(-1), batch.extras[f"{side}_trigrams"], junk
        )
    batched = model(batch)
    assert torch.isfinite(batched).all()
    for i in range(len(left)):
        alone = model(make_batch([left[i]], [right[i]]))
        torch.testing.assert_close(alone[0], batched[i], atol=1e-5, rtol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_head_is_the_cosine_or_a_linear_map_of_it(name: str) -> None:
    left, right = random_pairs(5, seed=3)
    batch = make_batch(left, right)
    model = _tiny(name)
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
    torch.testing.assert_close(model(make_batch(left, right)), model(make_batch(right, left)))
    assert not any(n.startswith(("left", "right")) for n, _ in model.named_parameters())


@torch.no_grad()
def test_empty_text_gives_a_finite_score() -> None:
    model = _tiny("cdssm")
    batch = make_batch([[5, 6]], [[7]])
    batch.right_mask[:] = False  # a fully padded text pools to zeros
    batch.extras["right_trigrams"][:] = 0
    assert torch.isfinite(model(batch)).all()


def test_padding_trigram_row_gets_no_gradient() -> None:
    model = _tiny("dssm").train()
    left, right = random_pairs(4, seed=2)
    model(make_batch(left, right)).sum().backward()
    grad = model.first.weight.grad
    assert grad is not None and grad[0].abs().sum() == 0 and grad[1:].abs().sum() > 0


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_runs_on_the_real_trigram_pipeline(name: str) -> None:
    model = _tiny(name, trigram_buckets=1000)
    assert encoding_options(model) == {"trigram_buckets": 1000}
    tok = Tokenizer(lowercase=True)
    examples = [
        Example(left="where is paris", right="paris is in france", label=1.0),
        Example(left="where is paris", right="a dog", label=0.0),
    ]
    vocab = Vocab.build([tok.tokenize(e.left) + tok.tokenize(e.right) for e in examples])
    data = encode_examples(examples, tok, vocab, **encoding_options(model))
    batch = collate(data, np.array([0, 1]))
    scores = model(batch)
    assert scores.shape == (2, 1) and torch.isfinite(scores).all()
    assert (scores.abs() <= 1.0 + 1e-6).all()


@torch.no_grad()
@pytest.mark.parametrize("name", ["dssm", "cdssm"])
def test_missing_or_wrong_trigram_inputs_are_clear_errors(name: str) -> None:
    model = _tiny(name)
    left, right = random_pairs(2, seed=1)
    batch = make_batch(left, right)
    del batch.extras["right_trigrams"]
    with pytest.raises(ValueError, match=r"needs letter-trigram inputs.*trigram_buckets=23"):
        model(batch)
    batch = make_batch(left, right)
    batch.extras["left_trigrams"] = batch.extras["left_trigrams"][:, :1]
    with pytest.raises(ValueError, match="shape of the token ids"):
        model(batch)
    batch = make_batch(left, right)
    batch.extras["left_trigrams"][0, 0, 0] = V  # hashed with more buckets than the model has
    with pytest.raises(ValueError, match="not hashed with trigram_buckets=23"):
        model(batch)


ENC = TokenEncoderConfig(vocab_size=10, embedding_dim=4)


@pytest.mark.parametrize(
    ("cls", "field", "value", "match"),
    [
        (DSSMConfig, "trigram_buckets", 1, "trigram_buckets must be >= 2"),
        (DSSMConfig, "hidden_sizes", (300, 0), "hidden_sizes must all be >= 1"),
        (DSSMConfig, "output_size", 0, "output_size must be >= 1"),
        (DSSMConfig, "num_outputs", 0, "num_outputs must be >= 1"),
        (DSSMConfig, "dropout", 1.0, "dropout must be in"),
        (CDSSMConfig, "trigram_buckets", 0, "trigram_buckets must be >= 2"),
        (CDSSMConfig, "window", 2, "window must be a positive odd number"),
        (CDSSMConfig, "window", -1, "window must be a positive odd number"),
        (CDSSMConfig, "filters", 0, "filters must be >= 1"),
        (CDSSMConfig, "output_size", 0, "output_size must be >= 1"),
        (CDSSMConfig, "dropout", -0.1, "dropout must be in"),
    ],
)
def test_config_errors(cls: type, field: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(encoder=ENC, **{field: value})


def test_config_defaults_are_the_papers() -> None:
    dssm = DSSMConfig(encoder=ENC)
    assert (dssm.trigram_buckets, dssm.hidden_sizes, dssm.output_size) == (30001, (300, 300), 128)
    cdssm = CDSSMConfig(encoder=ENC)
    assert (cdssm.window, cdssm.filters, cdssm.output_size) == (3, 300, 128)
    assert DSSMConfig(encoder=ENC, hidden_sizes=()).hidden_sizes == ()


def test_no_word_embedding_table() -> None:
    for model in (_tiny("dssm"), _tiny("cdssm")):
        assert isinstance(model, DSSM | CDSSM)
        assert not hasattr(model, "token_encoder")
        assert all(p.requires_grad for p in model.parameters())
