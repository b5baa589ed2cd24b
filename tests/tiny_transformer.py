"""A tiny randomly initialised BERT and WordPiece tokenizer, built locally (no download)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORDS = [
    "how", "are", "glacier", "caves", "formed", "?", "a", "cave", "is", "in", "the", "ice",
    "water", "melts", "what", "year", "did", "war", "end", "it", "ended", "##s", "##ed", "in",
    "1945", ".", ",", "man", "dog", "plays", "guitar", "runs",
]  # fmt: skip
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_vocab(extra_words: tuple[str, ...] = ()) -> list[str]:
    seen: list[str] = []
    for w in SPECIALS + WORDS + list(extra_words):
        if w not in seen:
            seen.append(w)
    return seen


def tiny_bert_config(vocab_size: int = 40, hidden: int = 8) -> dict[str, Any]:
    """A BERT config small enough for the common model suite (E = `hidden`)."""
    return {
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "max_position_embeddings": 64,
        "type_vocab_size": 2,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
        "pad_token_id": 0,
    }


def tiny_tokenizer_json(extra_words: tuple[str, ...] = ()) -> str:
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece

    vocab = {w: i for i, w in enumerate(tiny_vocab(extra_words))}
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    return tok.to_str()


def write_tiny_encoder(
    path: Path, *, hidden: int = 8, seed: int = 0, extra_words: tuple[str, ...] = ()
) -> Path:
    """Writes config.json, tokenizer.json and model.safetensors of a random tiny BERT whose
    vocabulary holds `WORDS` and `extra_words`."""
    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    path.mkdir(parents=True, exist_ok=True)
    config = tiny_bert_config(vocab_size=len(tiny_vocab(extra_words)), hidden=hidden)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (path / "tokenizer.json").write_text(tiny_tokenizer_json(extra_words), encoding="utf-8")
    torch.manual_seed(seed)
    cfg = {k: v for k, v in config.items() if k != "model_type"}
    model = BertModel(BertConfig(**cfg))
    # Saved with the "bert." prefix and a pooler, as a BertForPreTraining checkpoint would be.
    state = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(path / "model.safetensors"))
    return path
