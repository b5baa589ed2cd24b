"""Tiny configurations and batches for the common model suite."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from attnmatch import configs
from attnmatch.data.collate import collate, pad_ids
from attnmatch.data.encoding import EncodedPairs
from attnmatch.data.schema import PairBatch
from attnmatch.models import (
    build_model,
    default_inputs,
    get_model_entry,
    resolve_model_config,
)
from tests.tiny_transformer import tiny_bert_config

VOCAB = 40
DIM = 8
TRIGRAM_BUCKETS = 23  # letter-trigram ids of the fake bags (`fake_trigrams`)


def tiny_transformer_encoder() -> dict[str, Any]:
    """Encoder overrides for a tiny random BERT (VOCAB sub-words, hidden size DIM)."""
    return {"kind": "transformer", "transformer_config": tiny_bert_config(VOCAB, DIM)}


# Per model type: overrides that make the model tiny. A new model must add an entry here (a test
# checks), so the suite always covers every registered model.
TINY: dict[str, dict[str, Any]] = {
    "mvlstm": {"hidden_size": 6, "k": 5},
    "cbow_mlp": {"hidden_size": 6, "mlp_hidden": 7},
    "lstm": {"hidden_size": 6, "mlp_hidden": 7},
    "cnn": {"hidden_size": 6, "filters": 5, "mlp_hidden": 7},
    "ap_cnn": {"hidden_size": 6, "filters": 5, "mlp_hidden": 7},
    "ap_lstm": {"hidden_size": 6, "mlp_hidden": 7},
    "hcrn": {"hidden_size": 4, "mlp_hidden": 5},
    "iarnn": {"hidden_size": 5, "mlp_hidden": 5},
    "mpcnn": {"holistic_filters": 5, "per_dim_filters": 2, "hidden_size": 6},
    "esim": {"hidden_size": 6},
    "decomposable_attention": {"hidden_size": 6, "max_distance": 2},
    "arc_i": {"filters": 6, "mlp_hidden": 7},
    "arc_ii": {"filters": 6, "pool_size": 2, "mlp_hidden": 7},
    "anmm": {"bins": 11},
    "matchpyramid": {"filters": [3], "pool_size": [2, 3], "mlp_hidden": 5},
    "dssm": {"encoder": {"embedding_dim": 6}, "hidden_sizes": [], "output_size": 5},
    "cdssm": {"encoder": {"embedding_dim": 18}, "filters": 6, "output_size": 5},
    "damm": {
        "hidden_size": 8,
        "num_heads": 2,
        "ffn_size": 10,
        "cnn_filters": 3,
        "mlp_hidden": 7,
        "dropout": 0.0,
    },
    "bi_encoder": {"scale": 1.0},
    "cross_encoder": {"encoder": tiny_transformer_encoder()},
}


def tiny_encoder(kind: str) -> dict[str, Any]:
    """The token encoder config of a tiny model reading `kind` inputs."""
    if kind == "transformer":
        return tiny_transformer_encoder() | {"vocab_size": VOCAB, "embedding_dim": DIM}
    if kind == "trigrams":
        return {"kind": "trigrams", "vocab_size": TRIGRAM_BUCKETS, "embedding_dim": DIM}
    return {"kind": "word_vectors", "vocab_size": VOCAB, "embedding_dim": DIM}


def tiny_model(
    name: str, *, num_outputs: int = 1, trainable: bool = False, **overrides: Any
) -> torch.nn.Module:
    """`name` (a preset or model type) on its default input kind (a tiny random BERT for the
    MiniLM presets, so no real encoder is needed), with its TINY overrides, then `overrides`
    (an "encoder" entry changes the token encoder config)."""
    model_type = get_model_entry(name).name if name in TINY else None
    from attnmatch.models import model_type_of

    model_type = model_type or model_type_of(name)
    over = configs.merge(TINY[model_type], overrides)
    kind = over.get("encoder", {}).get("kind") or default_inputs(name).get("kind", "word_vectors")
    encoder = configs.merge(tiny_encoder(kind), over.pop("encoder", {}))
    encoder["trainable"] = trainable
    mtype, config = resolve_model_config(
        name, encoder=encoder, num_outputs=num_outputs, overrides=over
    )
    torch.manual_seed(0)
    return build_model(mtype, config)


def tiny_inputs(model: torch.nn.Module) -> Any:
    """`Inputs` matching a tiny model's token encoder (for saving it as a Matcher)."""
    from attnmatch.data.subword import SubwordTokenizer
    from attnmatch.data.vocab import Vocab
    from attnmatch.inputs import (
        TransformerInputs,
        TransformerInputsConfig,
        TrigramInputs,
        TrigramInputsConfig,
        WordVectorInputs,
        WordVectorsConfig,
    )
    from tests.tiny_transformer import tiny_tokenizer_json

    encoder = model.config.encoder
    if encoder.kind == "transformer":
        return TransformerInputs(
            TransformerInputsConfig(source="tiny-bert"), SubwordTokenizer(tiny_tokenizer_json())
        )
    if encoder.kind == "trigrams":
        return TrigramInputs(
            TrigramInputsConfig(buckets=encoder.vocab_size, dim=encoder.embedding_dim)
        )
    vocab = Vocab(["<pad>", "<unk>"] + [f"w{i}" for i in range(encoder.vocab_size - 2)])
    return WordVectorInputs(WordVectorsConfig(vectors="random", dim=encoder.embedding_dim), vocab)


def model_batch(
    model: torch.nn.Module,
    left: list[list[int]],
    right: list[list[int]],
    *,
    extra_pad: int = 0,
    labels: list[float] | None = None,
) -> PairBatch:
    """`make_batch` for `model`'s input kind: token ids, or stand-in letter-trigram ids
    (`fake_trigrams`) for a model on trigram inputs."""
    batch = make_batch(left, right, extra_pad=extra_pad, labels=labels)
    if model.config.encoder.kind == "trigrams":
        batch.left_ids = fake_trigrams(batch.left_ids, batch.left_mask)
        batch.right_ids = fake_trigrams(batch.right_ids, batch.right_mask)
    return batch


def make_batch(
    left: list[list[int]],
    right: list[list[int]],
    *,
    extra_pad: int = 0,
    labels: list[float] | None = None,
) -> PairBatch:
    import numpy as np

    lids, lmask = pad_ids([np.asarray(s) for s in left])
    rids, rmask = pad_ids([np.asarray(s) for s in right])
    if extra_pad:
        lids = torch.nn.functional.pad(lids, (0, extra_pad))
        lmask = torch.nn.functional.pad(lmask, (0, extra_pad))
        rids = torch.nn.functional.pad(rids, (0, extra_pad + 1))
        rmask = torch.nn.functional.pad(rmask, (0, extra_pad + 1))
    n = len(left)
    return PairBatch(
        left_ids=lids,
        left_mask=lmask,
        right_ids=rids,
        right_mask=rmask,
        labels=torch.tensor(labels if labels is not None else [0.0] * n),
        group_index=torch.arange(n),
    )


def fake_trigrams(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stand-in letter-trigram ids for token ids (1..TRIGRAM_BUCKETS-1, 0 on padding), as
    trigram inputs give them; a word has 1-3 trigrams, so the bags are ragged.
    Shape: (B, T) -> (B, T, 3)"""
    k = torch.arange(3)  # (3,)
    tri = (ids.unsqueeze(-1) * 7 + k * 13) % (TRIGRAM_BUCKETS - 1) + 1  # (B, T, 3)
    keep = mask.unsqueeze(-1) & (k < ids.unsqueeze(-1) % 3 + 1)  # (B, T, 3)
    return tri * keep


def random_pairs(n: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    left = [
        torch.randint(
            2, VOCAB, (int(torch.randint(1, 6, (1,), generator=g)),), generator=g
        ).tolist()
        for _ in range(n)
    ]
    right = [
        torch.randint(
            2, VOCAB, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g
        ).tolist()
        for _ in range(n)
    ]
    return left, right


@pytest.fixture
def share_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared encoding on the tests' small batches too (it starts at SHARE_MIN_ROWS pairs)."""
    import attnmatch.nn.distinct

    monkeypatch.setattr(attnmatch.nn.distinct, "SHARE_MIN_ROWS", 0)


def plain_outputs(model: torch.nn.Module, data: EncodedPairs) -> torch.Tensor:
    """`forward` on each pair alone, in eval mode without autograd: the reference of the
    whole-input inference paths (`attnmatch.models.fast`)."""
    model.eval()
    with torch.no_grad():
        return torch.cat([model(collate(data, np.array([i]))) for i in range(len(data))])


def ranking_data(
    pairs: int, seed: int, *, max_right: int = 14, repeated_answers: int = 6
) -> EncodedPairs:
    """Pairs in random order over 5 questions (repeated left texts; one of a single token, one
    empty) and answers of 1 to `max_right` tokens (one empty, one of 2 tokens: shorter than the
    widest filters), `repeated_answers` of them in a second pair: the hard cases of the
    whole-input inference paths.

    Shape:
        -> `pairs` pairs (pairs > repeated_answers + 3)
    """
    rng = np.random.default_rng(seed)
    questions = [rng.integers(1, VOCAB, rng.integers(1, 7)) for _ in range(5)]
    questions[0] = rng.integers(1, VOCAB, 1)  # a 1-token text
    questions[4] = np.zeros(0, dtype=np.int64)  # a question without a token
    answers = [
        rng.integers(1, VOCAB, rng.integers(1, max_right + 1))
        for _ in range(pairs - repeated_answers)
    ]
    answers[1] = np.zeros(0, dtype=np.int64)  # an answer without a token
    answers[2] = rng.integers(1, VOCAB, 2)  # shorter than the widest filters
    texts = [np.asarray(t, dtype=np.int64) for t in questions + answers]
    left = rng.integers(0, len(questions), pairs)
    left[:3] = 0  # the 1-token question more than once
    twice = rng.integers(0, len(answers), repeated_answers)  # with the same or another question
    right = len(questions) + rng.permutation(np.concatenate([np.arange(len(answers)), twice]))
    return EncodedPairs(
        texts=texts,
        left=left.astype(np.int64),
        right=right.astype(np.int64),
        labels=np.zeros(pairs, dtype=np.float32),
        group_ids=left.astype(np.int64),
        group_names=[str(q) for q in range(len(questions))],
    )
