"""The checklists of docs/README.md stay true: every file, function and name a step shows in
backticks exists, and every registered model has what "How to add a model" asks for."""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from torch import nn

import attnmatch.inputs
import attnmatch.models
from attnmatch.data.schema import PairBatch
from attnmatch.matcher import Matcher
from attnmatch.models import contract, get_model_entry, list_models, list_presets
from attnmatch.models._registry import register_model, register_preset
from tests.models.conftest import TINY

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# What a checklist may name: the package's model and input API, and the contract's methods.
NAMES: dict[str, Any] = {
    **vars(attnmatch.models),
    **vars(attnmatch.inputs),
    **vars(contract),
    "register_model": register_model,
    "register_preset": register_preset,
    "PairBatch": PairBatch,
    "Matcher": Matcher,
    "TINY": TINY,
    "nn": nn,
    "dataclass": dataclasses.dataclass,
}
METHODS = {"forward", "__post_init__", *contract.CAPABILITY_METHODS.values()}


def section(title: str) -> str:
    """The text of docs/README.md under `## title`, up to the next `## ` heading."""
    text = (DOCS / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/README.md has no section '## {title}'"
    return match.group(1)


def named(text: str) -> tuple[list[str], list[str]]:
    """The paths (with a '/', placeholders such as <paper> left out) and the Python names
    (identifiers, dotted names, and the functions called) of `text`'s backticked spans."""
    paths, names = [], []
    for span in re.findall(r"`([^`]+)`", text):
        if "/" in span and " " not in span and "=" not in span:
            if "<" not in span:
                paths.append(span)
            continue
        names += re.findall(r"@?([A-Za-z_][\w.]*)\(", span)
        if re.fullmatch(r"[A-Za-z_][\w.]*", span) and not span.startswith("self."):
            names.append(span)
    return paths, names


def resolves(name: str) -> bool:
    head, *rest = name.split(".")
    if name in METHODS:
        return True
    if head not in NAMES:
        return False
    value = NAMES[head]
    for part in rest:
        if not hasattr(value, part):
            return False
        value = getattr(value, part)
    return True


def test_how_to_add_a_model_names_what_exists() -> None:
    paths, names = named(section("How to add a model"))
    assert len(paths) >= 6 and len(names) >= 8  # the parser sees the steps
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"docs/README.md names files that do not exist: {missing}"
    unknown = sorted({n for n in names if not resolves(n)})
    assert not unknown, f"docs/README.md names what does not exist: {unknown}"


def test_the_name_finder() -> None:
    text = (
        "`src/a.py`, `tests/golden/<name>.json`, `register_model(name, x=...)`, "
        "`self.token_encoder = build_token_encoder(config.encoder)`, `Matcher.explain`, "
        "`explains=True`, `(B, num_outputs)`, `PairBatch`"
    )
    paths, names = named(text)
    assert paths == ["src/a.py"]
    assert names == ["register_model", "build_token_encoder", "Matcher.explain", "PairBatch"]
    assert all(resolves(n) for n in names) and not resolves("Matcher.nowhere")


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_has_what_the_checklist_asks_for(name: str) -> None:
    entry = get_model_entry(name)
    module = Path(inspect.getfile(entry.model_cls))
    models_md = (DOCS / "models.md").read_text(encoding="utf-8")
    assert module.parent == ROOT / "src" / "attnmatch" / "models"
    assert f"`{module.name}`" in models_md, f"docs/models.md does not name {module.name}"
    assert f"`{name}`" in models_md, f"docs/models.md does not name the model {name}"
    assert name in TINY, f"tests/models/conftest.py has no tiny config for {name}"
    assert (ROOT / "tests" / "golden" / f"{name}.json").is_file(), f"no golden file for {name}"
    fields = {f.name for f in dataclasses.fields(entry.config_cls)}
    assert {"encoder", "num_outputs"} <= fields
    assert entry.config_cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_every_preset_is_named_in_models_md() -> None:
    models_md = (DOCS / "models.md").read_text(encoding="utf-8")
    missing = [p for p in list_presets() if f"`{p}`" not in models_md]
    assert not missing, f"docs/models.md does not name the presets {missing}"
