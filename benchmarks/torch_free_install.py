"""A real install without torch: `pip install '.[serve-onnx]'` of this repository into a fresh
venv, `import torch` failing there, and `attnmatch rank EXPORTED -q ... -c ...` answering in it
as a whole process, against the same command on torch.

Steps (in a temporary folder, removed at the end unless --keep):
1. With this interpreter (torch installed): a tiny model, untrained IARNN on random word vectors
   fitted to the candidates (`Matcher.untrained`), saved as a model directory and exported
   (`export_onnx`); with --minilm also all-MiniLM-L6-v2 zero-shot (`Matcher.from_encoder`),
   exported.
2. A venv with `pip install REPO[serve-onnx]` (no torch; pip downloads from the package index):
   its install time, the size of its site-packages on disk (as du counts it), and a check that
   `import torch` fails there.
3. A venv with `pip install TORCH` first (default torch==2.13.0, the CPU build) then
   `REPO[torch,serve-onnx]` (skipped with --no-torch-venv): its size, for comparison.
4. Wall time of the whole process `attnmatch rank MODEL -q QUERY -c CANDIDATES` from start to
   exit (the answer is printed at the end), median of --runs after one untimed warm-up, the
   commands taken in turn in every repeat, with the median CPU seconds (user + system, which
   the other jobs of a shared machine disturb less), on one thread (OMP_NUM_THREADS=1, and
   `taskset -c 1` where there is taskset): the exported tiny model (and MiniLM) in the
   torch-free venv, and in the torch venv the model directory (the torch path) and the same
   export (which the runtime runs there too, without importing torch).

It prints the figures, the load average (`os.getloadavg`) before and after, and with --output
writes them as JSON.

Run: nice -n 5 python benchmarks/torch_free_install.py [--minilm] [--runs 5] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
QUERY = "how are glacier caves formed?"
CANDIDATES = REPO / "examples" / "glacier.txt"


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)


def _checked(cmd: list[str], what: str) -> float:
    """Runs `cmd`; its wall seconds. SystemExit with its last output lines when it fails."""
    start = time.perf_counter()
    done = _run(cmd)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise SystemExit(f"{what} failed ({done.returncode}):\n{tail}")
    return time.perf_counter() - start


def _disk_bytes(folder: Path) -> int:
    """The bytes `folder` takes on disk (allocated blocks, as du counts them)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total


def _site_packages(venv: Path) -> Path:
    found = list((venv / "lib").glob("python3*/site-packages"))
    if len(found) != 1:
        raise SystemExit(f"{venv}: expected one site-packages, found {found}")
    return found[0]


def _venv(folder: Path, requirements: list[list[str]]) -> dict[str, Any]:
    """A fresh venv at `folder` with each pip install of `requirements` in turn: its install
    seconds and its site-packages' size."""
    _checked([sys.executable, "-m", "venv", str(folder)], f"python -m venv {folder}")
    pip = [str(folder / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "-q"]
    seconds = sum(
        _checked([*pip, "install", *args], f"pip install {' '.join(args)}") for args in requirements
    )
    site = _site_packages(folder)
    return {"install_s": round(seconds, 1), "site_packages_mb": round(_disk_bytes(site) / 1e6, 1)}


def _models(folder: Path, minilm: bool) -> dict[str, Path]:
    """The tiny model's directory and export (and MiniLM's export), built with torch here."""
    from attnmatch.export import export_onnx
    from attnmatch.matcher import Matcher
    from attnmatch.tasks import RankingTask

    texts = [QUERY, *CANDIDATES.read_text(encoding="utf-8").splitlines()]
    tiny = Matcher.untrained(
        "iarnn", inputs="random", task=RankingTask(), train_texts=texts, seed=1
    )
    paths = {"tiny-model": tiny.save(folder / "tiny-model")}
    paths["tiny-onnx"] = export_onnx(tiny, folder / "tiny-onnx")
    if minilm:
        paths["minilm-onnx"] = export_onnx(Matcher.from_encoder("minilm-l6"), folder / "minilm")
    return paths


def _rank_command(venv: Path, model: Path) -> list[str]:
    """`attnmatch rank MODEL -q QUERY -c CANDIDATES` of `venv`, pinned to core 1 where there
    is taskset."""
    pin = ["taskset", "-c", "1"] if shutil.which("taskset") and os.cpu_count() != 1 else []
    cmd = [*pin, str(venv / "bin" / "attnmatch"), "rank", str(model), "-q", QUERY]
    return [*cmd, "-c", str(CANDIDATES), "--format", "json"]


def _one_run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = _run(cmd, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _imports_torch(venv: Path, model: Path, env: dict[str, str]) -> bool:
    """Whether `attnmatch rank` of `venv` on `model` imports torch."""
    probe = "import runpy, sys; sys.argv = ['attnmatch', *sys.argv[1:]]\n"
    probe += "try:\n    runpy.run_module('attnmatch', run_name='__main__')\nexcept SystemExit:\n"
    probe += "    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    args = _rank_command(venv, model)
    args = args[args.index(str(venv / "bin" / "attnmatch")) + 1 :]
    words = _run([str(venv / "bin" / "python"), "-c", probe, *args], env=env).stderr.split()
    return bool(words) and words[-1] == "True"


def _time_ranks(timed: dict[str, tuple[Path, Path]], runs: int) -> dict[str, Any]:
    """Each command of `timed` (name -> (venv, model)) `runs` times, taken in turn in every
    repeat (so that the machine's load falls on all alike), after one untimed warm-up of each:
    the median and range of the wall seconds, the median CPU seconds, whether it imports
    torch."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    walls: dict[str, list[float]] = {name: [] for name in timed}
    cpus: dict[str, list[float]] = {name: [] for name in timed}
    for repeat in range(runs + 1):
        for name, (venv, model) in timed.items():
            wall, cpu = _one_run(_rank_command(venv, model), env)
            if repeat:  # the first round warms the file caches
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {
        name: {
            "median_s": round(statistics.median(walls[name]), 3),
            "min_s": round(min(walls[name]), 3),
            "max_s": round(max(walls[name]), 3),
            "cpu_median_s": round(statistics.median(cpus[name]), 3),
            "imports_torch": _imports_torch(venv, model, env),
        }
        for name, (venv, model) in timed.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--minilm", action="store_true", help="also time a MiniLM export")
    parser.add_argument("--torch", default="torch==2.13.0", help="the torch of the torch venv")
    parser.add_argument("--no-torch-venv", action="store_true")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("--output", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="attnmatch-torch-free-"))
    folder.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": platform.platform(),
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "runs": args.runs,
        "threads": 1,
    }
    try:
        models = _models(folder, args.minilm)
        free = folder / "venv-serve-onnx"
        result["serve_onnx_venv"] = _venv(free, [[f"{REPO}[serve-onnx]"]])
        no_torch = _run([str(free / "bin" / "python"), "-c", "import torch"]).returncode != 0
        result["serve_onnx_venv"]["import_torch_fails"] = no_torch
        timed = {"serve-onnx venv, tiny export": (free, models["tiny-onnx"])}
        if "minilm-onnx" in models:
            timed["serve-onnx venv, MiniLM export"] = (free, models["minilm-onnx"])
        if not args.no_torch_venv:
            heavy = folder / "venv-torch"
            steps = [[args.torch], [f"{REPO}[torch,serve-onnx]"]]
            result["torch_venv"] = _venv(heavy, steps)
            timed["torch venv, tiny model directory (torch)"] = (heavy, models["tiny-model"])
            timed["torch venv, tiny export"] = (heavy, models["tiny-onnx"])
        result["rank_first_answer"] = _time_ranks(timed, args.runs)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    if args.output is not None:
        args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
