"""Start-up time of `attnmatch rank` (or `attnmatch score`): process start to the first score
on stdout, end to end, as a user waits for it.

Each run starts a fresh `python -m attnmatch rank MODEL -q QUERY -c CANDIDATES` (with --command
score: `attnmatch score MODEL PAIRS`, the query paired with each candidate) and stops the timer
when the first line holding a score arrives on its stdout. The same number of runs of
`python -c "import torch"` (to its exit) says how much of the figure is torch's own import, and
`python -c pass` how much is the interpreter's start. It prints the median (and the range) of
each, the median CPU seconds (user + system) of the whole process, which other jobs disturb less
than the wall time, the date, the threads (OMP_NUM_THREADS, set for every child) and the load
average before and after. One warm-up run of each comes first (file caches), untimed.

--src DIR (repeatable) puts DIR on PYTHONPATH for the attnmatch runs, so two source trees
(before and after a change) are timed side by side, alternating in every repeat. Without it,
the attnmatch that `python -m attnmatch` imports here is timed.

--pycache DIR keeps compiled bytecode in DIR (PYTHONPYCACHEPREFIX), as an installed package has
it; without it the children inherit this environment (with PYTHONDONTWRITEBYTECODE set, every
module of attnmatch is compiled again on each start).

Run: python benchmarks/startup.py --model runs/demo/model [--runs 5] [--threads 1]
     python benchmarks/startup.py --model runs/demo/model --src OLD/src --src src
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

QUERY = "how are glacier caves formed?"
CANDIDATES = Path(__file__).resolve().parent.parent / "examples" / "glacier.txt"
# A score: a decimal number (the table's score column, a line of `attnmatch score`); the
# table's title line (the query, which may hold numbers too) is not one.
_SCORE = re.compile(r"-?\d+\.\d+")
_TITLE = "query: "


def _env(threads: int, src: str | None, pycache: str | None) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    return env


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def first_score_seconds(command: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from starting `command` to the first line of its stdout that holds a score, and
    the CPU seconds (user + system) of the whole run, which a busy machine disturbs less."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    seconds = None
    for line in proc.stdout:
        if _SCORE.search(line) and not line.strip().startswith(_TITLE):
            seconds = time.perf_counter() - start
            break
    out, err = proc.communicate()
    if proc.returncode != 0 or seconds is None:
        raise SystemExit(f"{shlex.join(command)} failed ({proc.returncode}): {err.strip()}")
    return seconds, _children_cpu() - cpu


def run_seconds(command: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from starting `command` to its exit, and its CPU seconds."""
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def _summary(runs: list[tuple[float, float]]) -> str:
    wall, cpu = [w for w, _ in runs], [c for _, c in runs]
    return (
        f"median {statistics.median(wall):.3f} s (min {min(wall):.3f}, max {max(wall):.3f}, "
        f"n={len(wall)}); CPU median {statistics.median(cpu):.3f} s"
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", required=True, help="a saved model folder, e.g. runs/demo/model")
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each command")
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every child")
    ap.add_argument("--command", choices=("rank", "score"), default="rank")
    ap.add_argument("--query", default=QUERY)
    ap.add_argument("--candidates", type=Path, default=CANDIDATES, help="one candidate a line")
    ap.add_argument(
        "--src", action="append", default=None, help="a source tree for PYTHONPATH (repeatable)"
    )
    ap.add_argument("--pycache", default=None, help="PYTHONPYCACHEPREFIX for the children")
    args = ap.parse_args()

    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        if args.command == "rank":
            command = [python, "-m", "attnmatch", "rank", args.model, "-q", args.query]
            command += ["-c", str(args.candidates)]
        else:
            pairs = Path(tmp) / "pairs.tsv"
            lines = [t for t in args.candidates.read_text(encoding="utf-8").splitlines() if t]
            pairs.write_text("".join(f"{args.query}\t{t}\n" for t in lines), encoding="utf-8")
            command = [python, "-m", "attnmatch", "score", args.model, str(pairs)]
        trees: list[str | None] = list(args.src) if args.src else [None]
        envs = {tree: _env(args.threads, tree, args.pycache) for tree in trees}
        plain = _env(args.threads, None, args.pycache)
        torch_cmd, pass_cmd = [python, "-c", "import torch"], [python, "-c", "pass"]

        bytecode = (
            f"kept in {args.pycache}"
            if args.pycache
            else ("not cached" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "cached")
        )
        print(
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node()}, "
            f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"OMP_NUM_THREADS={args.threads}, bytecode {bytecode}"
        )
        print(f"load average before: {_load()}")
        print(f"command: {shlex.join(['python', *command[1:]])}")
        for env in envs.values():  # warm-up: file caches, bytecode
            first_score_seconds(command, env)
        run_seconds(torch_cmd, plain)
        firsts: dict[str | None, list[tuple[float, float]]] = {tree: [] for tree in trees}
        torch_s: list[tuple[float, float]] = []
        pass_s: list[tuple[float, float]] = []
        for _ in range(args.runs):  # alternating, so load changes hit every command alike
            for tree, env in envs.items():
                firsts[tree].append(first_score_seconds(command, env))
            torch_s.append(run_seconds(torch_cmd, plain))
            pass_s.append(run_seconds(pass_cmd, plain))
        for tree, values in firsts.items():
            where = f" [{tree}]" if tree is not None else ""
            print(f"first score{where}: {_summary(values)}")
        print(f"python -c 'import torch': {_summary(torch_s)}")
        print(f"python -c pass: {_summary(pass_s)}")
        print(f"load average after: {_load()}")


if __name__ == "__main__":
    main()
