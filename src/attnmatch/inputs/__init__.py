"""The one owner of the input representation.

Five kinds, one class each, each owning the whole chain (tokenize -> fit the vocabulary ->
encode texts -> build the token-encoder module -> initialise it from pretrained weights ->
save/load with the model):

- `word_vectors` (`WordVectorInputs`): word tokens, a vocabulary, GloVe or another vectors file;
- `transformer` (`TransformerInputs`): sub-word tokens and a pretrained Hugging Face encoder
  (e.g. all-MiniLM-L6-v2), frozen or fine-tuned;
- `trigrams` (`TrigramInputs`): words as bags of hashed letter trigrams (DSSM's word hashing);
- `wordpiece` (`WordPieceInputs`): a pretrained transformer's sub-word embedding table read as
  static vectors (no transformer pass);
- `static` (`StaticInputs`): static vectors distilled from a transformer by model2vec (each
  vocabulary token passed through it once).

Configs have one tagged `[inputs]` section (`kind = "word_vectors" | "transformer" |
"trigrams" | "wordpiece" | "static"`) whose other keys must belong to that kind. No code outside this package asks which
kind it has: it calls the methods of `Inputs` and `build_token_encoder`. `unknown_note` turns
any kind's unknown tokens (`Inputs.unknown_tokens`) into a one-line warning, and
`truncation_note` the texts it cuts to its length bound (`Inputs.truncated`,
`Inputs.max_tokens`: `inputs.max_length`, `DEFAULT_MAX_TOKENS` words unless set).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnmatch import configs
from attnmatch.configs import ConfigError
from attnmatch.data.tokenize import DEFAULT_MAX_TOKENS, MAX_TOKENS_LIMIT
from attnmatch.inputs.base import (
    UNKNOWN_NOTE_THRESHOLD,
    InputKind,
    Inputs,
    truncation_note,
    unknown_note,
)
from attnmatch.inputs.migrate import migrate_v1
from attnmatch.inputs.static import StaticInputs, StaticInputsConfig
from attnmatch.inputs.transformer import TransformerInputs, TransformerInputsConfig
from attnmatch.inputs.trigrams import TrigramInputs, TrigramInputsConfig
from attnmatch.inputs.word_vectors import WordVectorInputs, WordVectorsConfig
from attnmatch.inputs.wordpiece import WordPieceInputs, WordPieceInputsConfig

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

InputsConfig = (
    WordVectorsConfig
    | TransformerInputsConfig
    | TrigramInputsConfig
    | WordPieceInputsConfig
    | StaticInputsConfig
)

_KINDS: dict[str, type[Inputs]] = {
    cls.kind: cls
    for cls in (WordVectorInputs, TransformerInputs, TrigramInputs, WordPieceInputs, StaticInputs)
}
KINDS: tuple[str, ...] = tuple(_KINDS)


def inputs_class(kind: str) -> type[Inputs]:
    """The `Inputs` class of `kind` (ConfigError naming the kinds if unknown)."""
    if kind not in _KINDS:
        raise ConfigError(f"unknown inputs kind {kind!r}; choose one of {', '.join(_KINDS)}")
    return _KINDS[kind]


@dataclass(frozen=True, kw_only=True)
class TokenEncoderConfig:
    """The input layer of a model, as the model's config records it (filled by `Inputs`).

    Args:
        kind: which `Inputs` kind built it: "word_vectors" (a word-vector table), "transformer"
            (a pretrained sub-word encoder) or "trigrams" (letter-trigram bags per word).
        vocab_size: rows of the table (word vectors: `<pad>` (0) and `<unk>` (1) included;
            transformer: its vocabulary; trigrams: the hash buckets, 0 = padding).
        embedding_dim: E, the output size (transformer: its hidden size).
        trainable: fine-tune the table / the transformer.
        dropout: dropout on the output vectors.
        layer: transformer: which hidden state to output (0 = the embedding layer, -1 = the last).
        max_length: transformer: sub-words per text, special tokens included.
        transformer_config: transformer: the Hugging Face config.json of the encoder, kept here
            so a saved model rebuilds the architecture without the original files.
        pretrained_rows: word vectors: the last rows of the table hold words taken from the
            pretrained file beyond the fitted vocabulary (`WordVectorsConfig.pretrained_vocab`);
            they keep their pretrained vectors even when `trainable`.
    """

    kind: InputKind = "word_vectors"
    vocab_size: int
    embedding_dim: int = 50
    trainable: bool = False
    dropout: float = 0.0
    layer: int = -1
    max_length: int = 256
    transformer_config: dict[str, Any] = field(default_factory=dict)
    pretrained_rows: int = 0

    def __post_init__(self) -> None:
        if self.embedding_dim < 1:
            raise ValueError(f"embedding_dim must be >= 1, got {self.embedding_dim}")
        if self.pretrained_rows < 0:
            raise ValueError(f"pretrained_rows must be >= 0, got {self.pretrained_rows}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        inputs_class(self.kind).check_encoder_config(self)

    @property
    def output_dim(self) -> int:
        return self.embedding_dim


def build_token_encoder(config: TokenEncoderConfig) -> nn.Module:
    """The token-encoder module a model config asks for: (ids, mask) -> (B, L, E)."""
    return inputs_class(config.kind).encoder_cls(config)


def inputs_config_from_dict(
    data: dict[str, Any], *, path: str = "inputs", default: dict[str, Any] | None = None
) -> InputsConfig:
    """The `[inputs]` section as its kind's config; keys of another kind are errors.

    A section without `kind` completes `default` (a model's own inputs,
    `attnmatch.models.default_inputs`; word vectors when None): `{"dropout": 0.1}` for DSSM
    keeps its trigrams.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a table/object, got {type(data).__name__}")
    if "kind" not in data:
        data = configs.merge(dict(default or {"kind": "word_vectors"}), data)
    kind = data.get("kind", "word_vectors")
    if not isinstance(kind, str):
        raise ConfigError(f"{path}.kind: expected a string, got {type(kind).__name__}")
    cls = inputs_class(kind).config_cls
    return configs.from_dict(cls, {**data, "kind": kind}, path=path)  # type: ignore[no-any-return]


def inputs_config_to_dict(config: InputsConfig) -> dict[str, Any]:
    return configs.to_dict(config)


def merge_inputs(base: dict[str, Any] | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """`overrides` applied to an `[inputs]` dict; naming another kind starts from that kind's
    defaults instead of mixing the two kinds' keys."""
    base, overrides = dict(base or {}), dict(overrides or {})
    kind = overrides.get("kind")
    if kind is not None and kind != base.get("kind", "word_vectors"):
        return overrides
    return configs.merge(base, overrides)


def shortcut(name: str) -> dict[str, Any]:
    """The `[inputs]` keys a short name sets:

    - "random": word vectors without pretrained values, trained with the model;
    - "trigrams": letter trigrams;
    - "wordpiece": MiniLM's sub-word table as static vectors (`wordpiece:SOURCE` another
      encoder's);
    - "static": vectors distilled from MiniLM by model2vec (`static:SOURCE` another encoder's);
    - an encoder source ("minilm-l6" or a Hugging Face model directory): a transformer;
    - anything else: word vectors from that source ("glove-6b-50d" or a vectors file).
    """
    from attnmatch.encoders import ENCODERS

    if name == "random":
        return {"kind": "word_vectors", "vectors": "random", "trainable": True}
    if name == "trigrams":
        return {"kind": "trigrams"}
    for kind in ("wordpiece", "static"):
        if name == kind or name.startswith(f"{kind}:"):
            return {"kind": kind, "source": name.partition(":")[2] or "minilm-l6"}
    path = Path(name).expanduser()
    if name in ENCODERS or (path.is_dir() and (path / "config.json").is_file()):
        return {"kind": "transformer", "source": name}
    return {"kind": "word_vectors", "vectors": name}


def parse_inputs(
    spec: str | dict[str, Any] | InputsConfig, *, default: dict[str, Any] | None = None
) -> InputsConfig:
    """An inputs config from a config, an `[inputs]` dict, or a short name (`shortcut`).

    `default` is what the inputs are read against (a model's own inputs, or an experiment's
    current ones): a dict without `kind` completes it, and a short name of the same kind keeps
    its other settings (`"trigrams"` for CDSSM keeps its 900 dimensions; `"minilm-l6"` for a
    fine-tuned bi-encoder stays fine-tuned). A short name of another kind starts from that
    kind's defaults.
    """
    if isinstance(spec, InputsConfig):
        return spec
    if isinstance(spec, dict):
        return inputs_config_from_dict(spec, default=default)
    if not isinstance(spec, str):
        raise ConfigError(f"inputs: expected a name or a table/object, got {type(spec).__name__}")
    return inputs_config_from_dict(merge_inputs(default, shortcut(spec)))


def build_inputs(config: InputsConfig) -> Inputs:
    """A new, unfitted `Inputs` of the config's kind."""
    return inputs_class(config.kind)(config)  # type: ignore[call-arg]


def load_inputs(directory: Path, entry: dict[str, Any]) -> Inputs:
    """The inputs saved in a model directory (`entry`: the `inputs` of its config.json)."""
    if not isinstance(entry, dict):
        raise ValueError(f"{directory / 'config.json'}: 'inputs' must be an object")
    cls = inputs_class(entry.get("kind", ""))
    try:
        return cls.load(directory, entry)
    except ConfigError as e:  # a value of the saved inputs: say which file holds it
        raise ConfigError(f"{directory / 'config.json'}: {e}") from e


def check_accepts(model: str, accepted: Iterable[str], config: InputsConfig) -> None:
    """ConfigError when model `model` cannot read inputs of this kind."""
    accepted = tuple(accepted)
    if config.kind not in accepted:
        raise ConfigError(
            f"model {model!r} cannot read {config.kind} inputs; it reads "
            f"{' or '.join(accepted)} (set [inputs] kind, or --inputs)"
        )


__all__ = [
    "DEFAULT_MAX_TOKENS",
    "KINDS",
    "MAX_TOKENS_LIMIT",
    "UNKNOWN_NOTE_THRESHOLD",
    "InputKind",
    "Inputs",
    "InputsConfig",
    "StaticInputs",
    "StaticInputsConfig",
    "TokenEncoderConfig",
    "TransformerInputs",
    "TransformerInputsConfig",
    "TrigramInputs",
    "TrigramInputsConfig",
    "WordPieceInputs",
    "WordPieceInputsConfig",
    "WordVectorInputs",
    "WordVectorsConfig",
    "build_inputs",
    "build_token_encoder",
    "check_accepts",
    "inputs_class",
    "inputs_config_from_dict",
    "inputs_config_to_dict",
    "load_inputs",
    "merge_inputs",
    "migrate_v1",
    "parse_inputs",
    "shortcut",
    "truncation_note",
    "unknown_note",
]
