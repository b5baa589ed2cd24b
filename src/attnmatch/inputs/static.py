"""Static inputs distilled from a transformer: its tokenizer and one vector per sub-word, made
by passing each vocabulary token through the transformer once (model2vec, Tulkens and van
Dongen 2024), then PCA and Zipf (SIF) weighting.

A seed model reads these at the cost of a table lookup, as it reads `wordpiece` inputs, but the
vectors carry what the transformer's layers make of each token: the mean of a text's vectors
ranks WikiQA test answers at MAP .599 and correlates with STS Benchmark test scores at .687,
against .320 / .108 for the raw word-piece table and .577 / .335 for GloVe 6B 50d
(docs/encoders.md gives the table and its benchmark).

The distillation runs once per source model, dimension and weighting (about 20 s for MiniLM on
one CPU thread) and is cached under `$ATTNMATCH_CACHE/encoders/static/` by the sha256 of the source's
weights, so a fine-tuned teacher's folder gets its own vectors. A saved model keeps the table in
its weights and `tokenizer.json` beside them: it needs neither the source nor model2vec.

Deviations from model2vec's defaults: the vectors are kept in float32 (model2vec stores
float16), and the tokenizer is model2vec's (the source's vocabulary without `[unused*]` tokens,
no special tokens added).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from attnmatch import configs
from attnmatch.atomic import atomic_directory
from attnmatch.data.subword import SubwordTokenizer
from attnmatch.data.tokenize import check_max_length
from attnmatch.inputs.wordpiece import WordPieceInputs

if TYPE_CHECKING:  # pragma: no cover
    import torch

PIP = "pip install 'attnmatch[static]'"


@dataclass(frozen=True, kw_only=True)
class StaticInputsConfig:
    """The `[inputs]` section for static vectors distilled from a transformer.

    Args:
        source: "minilm-l6" (all-MiniLM-L6-v2), a local Hugging Face / sentence-transformers
            model directory, an attnmatch model folder with a transformer inside (a
            fine-tuned bi-encoder: the teacher's own vectors), or a model2vec model folder
            (static vectors already made, e.g. fitted to a corpus by
            benchmarks/static_fit.py: read as they are, `dims` and `sif` unused).
        dims: PCA dimensions of the vectors (model2vec's `pca_dims`).
        sif: the Zipf weighting's coefficient (model2vec's `sif_coefficient`; 0: none).
        trainable: train the table with the model (fixed by default).
        normalize: scale each vector to unit length.
        max_length: sub-words per text.
        dropout: dropout on the vectors.
    """

    kind: Literal["static"] = "static"
    source: str = "minilm-l6"
    dims: int = 256
    sif: float = 1e-4
    trainable: bool = False
    normalize: bool = False
    max_length: int = 256
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if not self.source:
            raise ValueError('source is empty: name an encoder ("minilm-l6") or a directory')
        if self.dims < 2:
            raise ValueError(f"dims must be >= 2, got {self.dims}")
        if not 0.0 <= self.sif < 1.0:
            raise ValueError(f"sif must be in [0, 1), got {self.sif}")
        check_max_length(self.max_length, minimum=2)
        configs.check_dropout(self.dropout)


def transformer_folder(source_dir: Path) -> Path:
    """`source_dir` as a Hugging Face model folder: itself, or for an attnmatch model folder
    with a transformer inside (a fine-tuned bi-encoder), its transformer's config, tokenizer and
    weights written once under the cache (by the weights' digest)."""
    import json

    from safetensors.torch import load_file, save_file

    from attnmatch.encoders import cache_dir, source_fingerprint

    saved = json.loads((source_dir / "config.json").read_text(encoding="utf-8"))
    if not str(saved.get("format", "")).startswith("attnmatch.model"):
        return source_dir
    encoder = saved.get("config", {}).get("encoder", {})
    if encoder.get("kind") != "transformer":
        raise ValueError(f"{source_dir}: a {saved.get('model_type')} model has no transformer")
    target = cache_dir() / "static" / f"source-{source_fingerprint(source_dir)[:16]}"
    if not (target / "model.safetensors").is_file():
        with atomic_directory(target) as tmp:
            prefix = "token_encoder.transformer."
            weights = load_file(str(source_dir / "model.safetensors"))
            kept = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
            save_file(kept, str(tmp / "model.safetensors"))
            shutil.copy(source_dir / "tokenizer.json", tmp / "tokenizer.json")
            config = json.dumps(encoder["transformer_config"])
            (tmp / "config.json").write_text(config, encoding="utf-8")
    return target


def distilled_vectors(source_dir: Path, *, dims: int, sif: float) -> Path:
    """The folder of the static vectors of the transformer in `source_dir` (`tokenizer.json`,
    `model.safetensors` with a table `embeddings`), distilled by model2vec on first use and
    cached by the source's weights digest.

    Raises:
        ImportError: model2vec is not installed (the extra named).
    """
    from attnmatch.encoders import cache_dir, source_fingerprint

    key = f"{source_fingerprint(source_dir)[:16]}-d{dims}-sif{sif:g}"
    target = cache_dir() / "static" / key
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    try:
        from model2vec.distill import distill
    except ImportError as e:
        raise ImportError(f"static inputs are distilled by model2vec: {PIP}") from e
    source = transformer_folder(source_dir)
    with atomic_directory(target) as tmp:  # a concurrent distillation writes the same files
        model = distill(
            str(source), pca_dims=dims, sif_coefficient=sif or None, quantize_to="float32"
        )
        model.save_pretrained(str(tmp))
    return target


def is_static_folder(folder: Path) -> bool:
    """Whether `folder` holds static vectors already (a model2vec model: its config.json says
    `"model_type": "model2vec"`), read as they are rather than distilled again."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "model2vec"


def static_table_shape(folder: Path) -> tuple[int, int]:
    """(V, dims) of a model2vec folder's table, read from the file's header alone."""
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), framework="pt") as weights:
        rows, dims = weights.get_slice("embeddings").get_shape()
        return int(rows), int(dims)


def read_static_table(folder: Path) -> torch.Tensor:
    """The (V, dims) float32 table of a model2vec folder (its `embeddings` tensor)."""
    from safetensors import safe_open

    file = folder / "model.safetensors"
    with safe_open(str(file), framework="pt") as weights:
        if "embeddings" not in weights.keys():  # noqa: SIM118
            raise ValueError(f"{file}: no 'embeddings' tensor (not a model2vec folder)")
        return weights.get_tensor("embeddings").float()


class StaticInputs(WordPieceInputs):
    """A transformer's tokenizer and its model2vec-distilled vectors (`StaticInputsConfig`)."""

    kind = "static"
    config_cls = StaticInputsConfig

    def _resolve(self) -> None:
        """Finds the source, distils (or reads the cached) vectors and their tokenizer."""
        if self.directory is not None:
            return
        from attnmatch.encoders import resolve_source

        source = resolve_source(self.config.source)
        folder = (
            source
            if is_static_folder(source)
            else distilled_vectors(source, dims=self.config.dims, sif=self.config.sif)
        )
        self.directory = folder
        self.tokenizer = SubwordTokenizer.from_file(
            folder / "tokenizer.json", max_length=self.config.max_length
        )
        self.shape = static_table_shape(folder)

    def _table(self) -> torch.Tensor:
        assert self.directory is not None
        return read_static_table(self.directory)
