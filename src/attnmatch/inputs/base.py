"""What every input kind provides.

A model never asks which kind of input it reads: it builds `build_token_encoder(config.encoder)`
(its `TokenEncoderConfig`, checked by its kind: both in `attnmatch.inputs`, where the kinds are
known) and calls it as ``token_encoder(ids, mask) -> (B, L, E)``. Everything that differs
between kinds (tokenizing, the vocabulary, pretrained weights, what is saved with a model, which
tokens it does not know, how many tokens of a text it keeps) is a method of the kind's `Inputs`
class.

Every kind bounds the length of a text in `encode`, the one path of training, scoring and
serving alike: at most `max_tokens` tokens (`inputs.max_length`; `attnmatch.data.tokenize` has
the defaults and the bound on characters read). `truncated` counts the texts it cuts and
`truncation_note` turns that count into a one-line warning.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from attnmatch.inputs import TokenEncoderConfig

InputKind = Literal["word_vectors", "transformer", "trigrams", "wordpiece", "static"]

UNKNOWN_NOTE_THRESHOLD = 0.02
"""`unknown_note` speaks up above this share of unknown tokens."""


class lazy_class:  # noqa: N801  a class attribute, named as one
    """A class attribute that is the class `name` of `module`, imported when first read: an
    input kind names its token-encoder module (torch) without importing it, so that
    tokenizing and encoding texts need no torch (`attnmatch.runtime`)."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def __get__(self, instance: object, owner: type | None = None) -> type[nn.Module]:
        return getattr(importlib.import_module(self.module), self.name)  # type: ignore[no-any-return]


class Inputs:
    """One input kind: tokenize, fit, encode, build and initialise the token encoder, save/load.

    Subclasses set `kind`, `config_cls` (the `[inputs]` section) and `encoder_cls` (the module,
    a `lazy_class`: torch is imported when a model is built, not when texts are encoded).
    """

    kind: ClassVar[str]
    config_cls: ClassVar[type]
    encoder_cls: ClassVar[lazy_class]
    # The model directory's file that holds the saved state (config.json: the settings alone).
    state_file: ClassVar[str] = "config.json"

    def __init__(self, config: Any) -> None:
        self.config = config
        self.stats: dict[str, Any] = {"kind": self.kind}

    @staticmethod
    def check_encoder_config(config: TokenEncoderConfig) -> None:
        """Raises ValueError when `config` cannot build this kind's encoder."""

    def fit(
        self, train_texts: Iterable[str], eval_texts: Iterable[str] = (), *, seed: int = 0
    ) -> None:
        """Prepares the inputs for a new model (vocabulary, pretrained weights) and records in
        `stats` the unknown tokens of the distinct `eval_texts` (`record_eval_unknown`); only
        the latter by default. `eval_texts` may add words of dev/test texts that have a
        pretrained vector (texts only, never labels)."""
        self.record_eval_unknown(*self.unknown_tokens(dict.fromkeys(eval_texts)))

    def unknown_tokens(self, texts: Iterable[str]) -> tuple[Counter[str], int]:
        """The tokens of `texts` the inputs do not know, with their counts, and the number of
        tokens (special tokens such as `[CLS]` not counted). Needs fitted inputs."""
        raise NotImplementedError

    def unknown_rate(self, texts: Iterable[str]) -> tuple[int, int]:
        """(unknown tokens, tokens) of `texts` (`unknown_tokens`)."""
        unknown, total = self.unknown_tokens(texts)
        return sum(unknown.values()), total

    def record_eval_unknown(self, unknown: Counter[str], total: int) -> None:
        """Keeps the unknown tokens of the dev/test texts in `stats` (nothing without texts):
        `eval_tokens`, `eval_unknown_tokens`, `eval_unknown_rate` and `eval_unknown_top` (the
        5 most frequent unknown tokens), so that run results carry them."""
        if not total:
            return
        n = sum(unknown.values())
        self.stats.update(
            eval_tokens=total,
            eval_unknown_tokens=n,
            eval_unknown_rate=round(n / total, 6),
            eval_unknown_top=most_frequent(unknown, 5),
        )

    def encoder_config(self) -> dict[str, Any]:
        """The model config's `encoder` values (a `TokenEncoderConfig` as a dict)."""
        raise NotImplementedError

    def init_encoder(self, encoder: nn.Module) -> None:
        """Copies pretrained weights into a freshly built token encoder (no-op by default)."""

    def enable_cache(self, encoder: nn.Module) -> None:
        """Lets a frozen encoder memoise its outputs per distinct text (no-op by default)."""

    def disable_cache(self, encoder: nn.Module) -> None:
        """Turns `enable_cache` off: every text is encoded again (no-op by default)."""

    def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Id arrays of texts: (n,) token ids, or (n, K) per-token ids (trigrams), n at most
        `max_tokens`."""
        raise NotImplementedError

    @property
    def max_tokens(self) -> int | None:
        """The most tokens `encode` keeps per text (None: texts are not cut)."""
        return None

    def truncated(self, texts: Iterable[str]) -> int:
        """How many of `texts` `encode` cuts (more than `max_tokens` tokens, or more
        characters than it reads); 0 for inputs that do not cut."""
        return 0

    def record_truncated(self, n: int) -> None:
        """Keeps in `stats` the number of distinct fit texts (training, dev and test) that
        `encode` cuts, as `truncated_texts` with `max_tokens`; nothing when none is cut."""
        if n:
            self.stats.update(truncated_texts=n, max_tokens=self.max_tokens)

    def tokens(self, text: str) -> list[str]:
        """The tokens `encode` gives ids for, as strings (for attention plots)."""
        raise NotImplementedError

    def save(self, directory: Path) -> dict[str, Any]:
        """Writes what the inputs need besides the weights into a model directory (a vocabulary
        or a tokenizer file) and returns the `inputs` entry of its config.json."""
        raise NotImplementedError

    @classmethod
    def load(cls, directory: Path, entry: dict[str, Any]) -> Inputs:
        """The inputs saved by `save` in `directory` (`entry` is what `save` returned)."""
        raise NotImplementedError

    def check_fits(self, rows: int, directory: Path) -> None:
        """Raises ValueError, naming the file, when the ids these inputs (loaded from the model
        directory `directory`) give are not exactly the `rows` rows of the model's embedding
        table: a vocabulary shorter than the table shifts every word onto another vector, a
        longer one gives ids past its end. Nothing to check by default."""


def most_frequent(counts: Counter[str], k: int) -> list[str]:
    """The `k` most frequent keys of `counts`, ties in sorted order."""
    return [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]]


def unknown_note(
    inputs: Inputs | None,
    texts: Iterable[str],
    where: str,
    *,
    threshold: float = UNKNOWN_NOTE_THRESHOLD,
) -> str | None:
    """A one-line warning when more than `threshold` of the tokens of `texts` are unknown to
    the inputs (`Inputs.unknown_tokens`), naming up to 5 of the most frequent; None otherwise.

    Args:
        inputs: fitted or loaded inputs; None for a matcher that reads the texts themselves (a
            lexical one: no vocabulary, no note).
        texts: the texts about to be scored.
        where: what the texts are, as the sentence says it ("the candidates").
        threshold: the share of unknown tokens above which to speak.

    Example:
        >>> unknown_note(matcher.inputs, candidates, "the candidates")  # doctest: +SKIP
        "6.1% of the tokens of the candidates are unknown to this model's vocabulary (e.g.
        python, password, app)"
    """
    if inputs is None:
        return None
    unknown, total = inputs.unknown_tokens(texts)
    n = sum(unknown.values())
    if not total or n / total <= threshold:
        return None
    examples = ", ".join(_shown(w) for w in most_frequent(unknown, 5))
    return (
        f"{100 * n / total:.1f}% of the tokens of {where} are unknown to this model's "
        f"vocabulary (e.g. {examples})"
    )


SHOWN_TOKEN_CHARS = 30
"""A token longer than this is shortened in a note (a text without spaces is one token)."""


def _shown(token: str) -> str:
    shown = token if len(token) <= SHOWN_TOKEN_CHARS else f"{token[:SHOWN_TOKEN_CHARS]}..."
    return shown if shown.isprintable() else ascii(shown)


def truncation_note(inputs: Inputs | None, texts: Iterable[str], where: str) -> str | None:
    """A one-line warning when `encode` cuts some of `texts` to the inputs' bound
    (`Inputs.truncated`, `Inputs.max_tokens`); None when it cuts none.

    Args:
        inputs: fitted or loaded inputs; None for a matcher that reads the texts themselves
            (whole: no note).
        texts: the texts about to be scored or trained on (each distinct text counted once).
        where: what the texts are, as the sentence says it ("the candidates").

    Example:
        >>> truncation_note(matcher.inputs, candidates, "the candidates")  # doctest: +SKIP
        "2 of the 40 distinct texts of the candidates are longer than this model's bound of
        512 tokens per text (inputs.max_length): only their first 512 tokens are read"
    """
    if inputs is None:
        return None
    distinct = list(dict.fromkeys(texts))
    n = inputs.truncated(distinct)
    if not n:
        return None
    bound = inputs.max_tokens
    return (
        f"{n} of the {len(distinct)} distinct texts of {where} are longer than this model's "
        f"bound of {bound} tokens per text (inputs.max_length): only their first {bound} "
        "tokens are read"
    )
