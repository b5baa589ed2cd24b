"""Input settings of the first model-directory format (`attnmatch.model/1`), migrated.

Format 1 described the input layer in three places: a `tokenizer` entry beside the model config
(word settings, or {"kind": "subword"}), a `static` or `transformer` token encoder inside the
model config (with an informational `source`), and, for DSSM and CDSSM, a `trigram_buckets`
field with the trigram table inside the model (`first.weight`, `conv.weight`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import torch


def migrate_v1(
    model_type: str,
    config: dict[str, Any],
    tokenizer: dict[str, Any],
    state: dict[str, torch.Tensor],
    *,
    vectors: str,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, torch.Tensor]]:
    """(the `inputs` entry, the model config, the weights) of a format-1 model directory.

    Args:
        model_type: the registered model type.
        config: the format-1 model config (its `encoder` is rewritten).
        tokenizer: the format-1 `tokenizer` entry.
        state: the weights (DSSM/CDSSM's trigram table is renamed to the token encoder's).
        vectors: the word vectors it was trained with (informational once trained).
    """
    encoder = dict(config.get("encoder", {}))
    source = str(encoder.pop("source", "") or "")
    subword = tokenizer.pop("kind", "word") == "subword"
    if subword:
        inputs: dict[str, Any] = {
            "kind": "transformer",
            "source": source or "unknown",
            "trainable": bool(encoder.get("trainable", False)),
            "layer": int(encoder.get("layer", -1)),
            "max_length": int(tokenizer.get("max_length") or encoder.get("max_length") or 256),
            "dropout": float(encoder.get("dropout", 0.0)),
        }
    elif "trigram_buckets" in config:  # DSSM, CDSSM: the trigram table moves to the inputs
        buckets = int(config.pop("trigram_buckets"))
        if model_type == "dssm":
            sizes = list(config.get("hidden_sizes", [300, 300]))
            dim, config["hidden_sizes"] = int(sizes[0]), sizes[1:]
            state["token_encoder.table"] = state.pop("first.weight")
            state["bias"] = state.pop("first.bias")
        else:
            dim = int(config.get("window", 3)) * int(config.get("filters", 300))
            state["token_encoder.table"] = state.pop("conv.weight")
        encoder = {
            "kind": "trigrams",
            "vocab_size": buckets,
            "embedding_dim": dim,
            "trainable": True,
            "dropout": 0.0,
        }
        inputs = {"kind": "trigrams", "buckets": buckets, "dim": dim, **tokenizer}
    else:
        encoder["kind"] = "word_vectors"
        inputs = {
            "kind": "word_vectors",
            "vectors": vectors,
            "dim": int(encoder.get("embedding_dim", 50)),
            "trainable": bool(encoder.get("trainable", False)),
            "dropout": float(encoder.get("dropout", 0.0)),
            **tokenizer,
        }
    config["encoder"] = encoder
    return inputs, config, state
