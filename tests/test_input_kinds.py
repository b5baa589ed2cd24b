"""Every input kind keeps the `Inputs` contract, and docs/README.md's "How to add an input kind"
stays true: each registered kind is registered at the one dispatch point, documented in
docs/encoders.md and put through the contract below, and every file and name the checklist
cites exists.

A new kind fails `test_every_kind_has_a_tiny_config` until it has a tiny config in
`TINY_INPUTS`; then the contract test runs it: fit -> encode -> the token encoder -> save -> load.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import typing
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import attnmatch
from attnmatch import inputs as inputs_package
from attnmatch.inputs import (
    KINDS,
    InputKind,
    InputsConfig,
    StaticInputsConfig,
    TokenEncoderConfig,
    TransformerInputsConfig,
    TrigramInputsConfig,
    WordPieceInputsConfig,
    WordVectorsConfig,
    build_inputs,
    build_token_encoder,
    inputs_class,
    load_inputs,
    parse_inputs,
)
from attnmatch.inputs.base import Inputs
from attnmatch.models import _registry
from tests.tiny_transformer import write_tiny_encoder

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(attnmatch.__file__).resolve().parent
DOCS = ROOT / "docs"
SECTION = "How to add an input kind"

TEXTS = ["How are glacier caves formed?", "A glacier cave is a cave formed in the ice.", ""]
EVAL_TEXTS = ["what year did the war end?"]


def _transformer(tmp_path: Path) -> TransformerInputsConfig:
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("the transformer kind needs transformers (pip install 'attnmatch[minilm]')")
    return TransformerInputsConfig(source=str(write_tiny_encoder(tmp_path / "encoder")))


def _wordpiece(tmp_path: Path) -> WordPieceInputsConfig:
    if importlib.util.find_spec("transformers") is None:
        pytest.skip(
            "the tiny encoder is written with transformers (pip install 'attnmatch[minilm]')"
        )
    return WordPieceInputsConfig(source=str(write_tiny_encoder(tmp_path / "encoder")))


def _static(tmp_path: Path) -> StaticInputsConfig:
    if importlib.util.find_spec("model2vec") is None:
        pytest.skip("static inputs are distilled by model2vec (pip install 'attnmatch[static]')")
    return StaticInputsConfig(source=str(write_tiny_encoder(tmp_path / "encoder")), dims=4)


# A tiny config of each kind (built in a temporary folder), for the contract test.
TINY_INPUTS: dict[str, Callable[[Path], InputsConfig]] = {
    "word_vectors": lambda tmp: WordVectorsConfig(vectors="random", dim=6),
    "transformer": _transformer,
    "trigrams": lambda tmp: TrigramInputsConfig(buckets=200, dim=6),
    "wordpiece": _wordpiece,
    "static": _static,
}


def test_every_kind_has_a_tiny_config() -> None:
    assert set(TINY_INPUTS) == set(KINDS)


def test_every_kind_is_registered_at_the_one_dispatch_point() -> None:
    """`_KINDS` (hence `KINDS`), `InputsConfig` and `InputKind` name the same kinds."""
    assert set(typing.get_args(InputKind)) == set(KINDS)
    configs = {inputs_class(kind).config_cls for kind in KINDS}
    assert set(typing.get_args(InputsConfig)) == configs
    for kind in KINDS:
        cls = inputs_class(kind)
        assert issubclass(cls, Inputs) and cls.kind == kind
        defaults = {f.name: f.default for f in dataclasses.fields(cls.config_cls)}
        assert defaults["kind"] == kind
        assert issubclass(cls.encoder_cls, torch.nn.Module)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_keeps_the_contract(kind: str, tmp_path: Path) -> None:
    config = TINY_INPUTS[kind](tmp_path)
    assert config.kind == kind and parse_inputs(config) is config
    inputs = build_inputs(config)
    assert type(inputs) is inputs_class(kind)
    inputs.fit(TEXTS, EVAL_TEXTS, seed=0)
    assert inputs.stats["kind"] == kind and "eval_tokens" in inputs.stats

    encoded = inputs.encode(TEXTS)
    assert len(encoded) == len(TEXTS)
    for text, ids in zip(TEXTS, encoded, strict=True):
        assert ids.dtype == np.int64 and len(ids) == len(inputs.tokens(text))
        assert inputs.max_tokens is None or len(ids) <= inputs.max_tokens
    unknown, total = inputs.unknown_tokens(EVAL_TEXTS)
    assert isinstance(unknown, Counter) and total > 0 and sum(unknown.values()) <= total
    assert inputs.truncated(TEXTS) == 0

    encoder_config = TokenEncoderConfig(**inputs.encoder_config())
    assert encoder_config.kind == kind
    torch.manual_seed(0)
    encoder = build_token_encoder(encoder_config)
    assert isinstance(encoder, inputs_class(kind).encoder_cls)
    inputs.init_encoder(encoder)
    ids = torch.as_tensor(np.stack([encoded[0], encoded[0]]))  # (B, L) or (B, L, K)
    mask = torch.ones(ids.shape[:2], dtype=torch.bool)  # (B, L), True on real tokens
    encoder.eval()
    with torch.no_grad():
        out = encoder(ids, mask)  # (B, L, E)
    assert out.shape == (2, len(encoded[0]), encoder_config.output_dim)

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    entry = inputs.save(model_dir)
    assert entry["kind"] == kind
    loaded = load_inputs(model_dir, entry)
    assert type(loaded) is type(inputs)
    for a, b in zip(loaded.encode(TEXTS), encoded, strict=True):
        np.testing.assert_array_equal(a, b)
    assert loaded.encoder_config() == inputs.encoder_config()


def _kinds_table(text: str) -> set[str]:
    """The kinds named in the first column of the kinds table of docs/encoders.md."""
    return set(re.findall(r"^\| `([a-z_]+)` \|", text, re.M))


def test_every_kind_is_documented() -> None:
    encoders = (DOCS / "encoders.md").read_text(encoding="utf-8")
    assert _kinds_table(encoders) == set(KINDS)
    for kind in KINDS:  # the [inputs] example lists the kinds too
        assert f'"{kind}"' in encoders, kind


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/README.md has no section '## {title}'"
    return match.group(1)


def _code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def test_the_checklist_names_files_and_names_that_exist() -> None:
    """Each code span of the section is a file (under the package, the repository or docs/), a
    file of a model directory, a name of `attnmatch.inputs`, of an `Inputs`, of a model's
    registration, or code (a shape, a placeholder)."""
    section = _section((DOCS / "README.md").read_text(encoding="utf-8"), SECTION)
    saved_files = {"vocab.json", "tokenizer.json", "config.json"}
    code = {"(ids, mask)", "(B, L, E)", "inputs/<kind>.py", "[inputs]", "nn.Module"}
    names = {*vars(inputs_package), *dir(Inputs), *Inputs.__annotations__, *vars(_registry)}
    names |= {"inputs", *globals()}  # a registration's `inputs`; TINY_INPUTS here
    unknown = []
    for span in _code_spans(section):
        if span in code or span in saved_files or span in names:
            continue
        if span.endswith((".py", ".md", "/")) and any(
            (base / span).exists() for base in (PACKAGE, ROOT, DOCS)
        ):
            continue
        unknown.append(span)
    assert not unknown, f"docs/README.md '{SECTION}' names what does not exist: {unknown}"
    assert "tests/test_input_kinds.py" in section and "TINY_INPUTS" in section


# What each kind writes into a model directory besides config.json (the checklist names them).
SAVED: dict[str, set[str]] = {
    "word_vectors": {"vocab.json"},
    "transformer": {"tokenizer.json"},
    "trigrams": set(),
    "wordpiece": {"tokenizer.json"},
    "static": {"tokenizer.json"},
}


def test_the_checklist_names_what_each_kind_saves() -> None:
    assert set(SAVED) == set(KINDS)
    section = _section((DOCS / "README.md").read_text(encoding="utf-8"), SECTION)
    for files in SAVED.values():
        for name in files:
            assert f"`{name}`" in section


@pytest.mark.parametrize("kind", KINDS)
def test_what_each_kind_saves(kind: str, tmp_path: Path) -> None:
    inputs = build_inputs(TINY_INPUTS[kind](tmp_path))
    inputs.fit(TEXTS)
    folder = tmp_path / "saved"
    folder.mkdir()
    inputs.save(folder)
    assert {p.name for p in folder.iterdir()} == SAVED[kind]
