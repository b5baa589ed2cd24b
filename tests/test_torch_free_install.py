"""A real install without torch: `pip install '.[serve-onnx]'` of this repository into a fresh
venv (pip downloads from the package index), `import torch` failing there, and `attnmatch rank`
of a tiny export answering in it as a whole process with the numbers `Matcher.load` gives.
About 40 s on a warm pip cache (benchmarks/torch_free_install.py measures the same install's
size and first-answer time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from attnmatch import Matcher
from attnmatch.export import export_onnx
from attnmatch.tasks import RankingTask

REPO = Path(__file__).resolve().parents[1]
QUERY = "how are glacier caves formed?"
# Far above what the install takes (about 290 MB: onnxruntime, numpy, tokenizers and the
# service's packages), far below torch's own 750 MB: torch pulled in by a dependency fails it.
MAX_SITE_PACKAGES_BYTES = 450_000_000


def _disk_bytes(folder: Path) -> int:
    return sum(
        (Path(root) / name).stat().st_blocks * 512
        for root, _, files in os.walk(folder)
        for name in files
        if not (Path(root) / name).is_symlink()
    )


def test_serve_onnx_installs_and_ranks_without_torch(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
    done = subprocess.run(
        [*pip, f"{REPO}[serve-onnx]"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert subprocess.run([str(python), "-c", "import torch"], capture_output=True).returncode
    (site,) = (venv / "lib").glob("python3*/site-packages")
    assert _disk_bytes(site) < MAX_SITE_PACKAGES_BYTES
    candidates = ["A glacier cave is a cave formed within the ice of a glacier.", "The Alps", "ok"]
    matcher = Matcher.untrained(
        "iarnn", inputs="random", task=RankingTask(), train_texts=[QUERY, *candidates], seed=1
    )
    exported = export_onnx(matcher, tmp_path / "onnx")
    (tmp_path / "candidates.txt").write_text("\n".join(candidates) + "\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1"}
    rank = [str(venv / "bin" / "attnmatch"), "rank", str(exported), "-q", QUERY]
    rank += ["-c", str(tmp_path / "candidates.txt"), "--format", "json"]
    done = subprocess.run(rank, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    want = Matcher.load(exported).rank(QUERY, candidates)
    assert [r["index"] for r in rows] == [r.index for r in want]
    np.testing.assert_allclose([r["score"] for r in rows], [r.score for r in want], atol=1e-6)
