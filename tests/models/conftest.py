"""Tiny configurations and batches for the common model suite."""

from __future__ import annotations

from typing import Any

import torch

from attnmatch import configs
from attnmatch.data.collate import pad_ids
from attnmatch.data.schema import PairBatch
from attnmatch.models import (
    build_model,
    get_model_entry,
    get_preset,
    list_presets,
    resolve_model_config,
)
from attnmatch.models.build import encoder_settings
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
    "dssm": {"trigram_buckets": TRIGRAM_BUCKETS, "hidden_sizes": [6], "output_size": 5},
    "cdssm": {"trigram_buckets": TRIGRAM_BUCKETS, "filters": 6, "output_size": 5},
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


def tiny_model(
    name: str, *, num_outputs: int = 1, trainable: bool = False, **overrides: Any
) -> torch.nn.Module:
    """`name` (a preset or model type) with its TINY overrides, then `overrides`. A transformer
    encoder (e.g. the MiniLM presets) gets the tiny BERT config, so no real encoder is needed."""
    model_type = get_preset(name).model if name in list_presets() else name
    over = configs.merge(TINY[get_model_entry(model_type).name], overrides)
    over["encoder"] = {**over.get("encoder", {}), "trainable": trainable}
    if encoder_settings(name, over).get("kind") == "transformer":
        over["encoder"].setdefault("transformer_config", tiny_bert_config(VOCAB, DIM))
    mtype, config = resolve_model_config(
        name, vocab_size=VOCAB, embedding_dim=DIM, num_outputs=num_outputs, overrides=over
    )
    torch.manual_seed(0)
    return build_model(mtype, config)


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
        extras={
            "left_trigrams": fake_trigrams(lids, lmask),
            "right_trigrams": fake_trigrams(rids, rmask),
        },
    )


def fake_trigrams(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Stand-in letter-trigram ids for token ids (1..TRIGRAM_BUCKETS-1, 0 on padding), as
    `collate` adds them for models with `trigram_buckets` (other models ignore extras); a word
    has 1-3 trigrams, so the bags are ragged. Shape: (B, T) -> (B, T, 3)"""
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
