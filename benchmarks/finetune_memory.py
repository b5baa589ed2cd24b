"""Peak resident memory of fine-tuning the default model for your own pairs (the MiniLM
bi-encoder) on WikiQA ranking pairs, and the test MAP it reaches.

The pairs: the first `--questions` questions of the bundled WikiQA train split (880: 8,932 pairs,
"8.5k pairs" once repeats are read once) as train.tsv of a `pairs:` folder, WikiQA dev and test
as they are (or their first `--eval-questions` questions). The run is the command a user types,
`attnmatch train --dataset pairs:FOLDER`, in a child process under `/usr/bin/time -v`, on one
torch thread (`train.threads = 1`), with the default recipe and floors; extra `--set` options
are passed on (e.g. `--set train.max_memory=2000`). Printed and written (`--output`): the peak
resident memory as `/usr/bin/time` measures it and as the run recorded it (metrics.json
`peak_rss_mb`: `resource.getrusage`), wall and CPU time, the run's dev and test MAP, its floors
and the model it kept.

    python benchmarks/finetune_memory.py --output results/finetune_memory.json   # ~20 min CPU
    python benchmarks/finetune_memory.py --questions 100 --eval-questions 100     # a few minutes
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WIKIQA = ROOT / "data" / "wikiqa"


def questions(split: str, limit: int | None) -> list[dict[str, str]]:
    """The rows of WikiQA's `split` whose question is among its first `limit` (None: all)."""
    rows, seen = [], set()
    with gzip.open(WIKIQA / f"WikiQA-{split}.tsv.gz", "rt", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            seen.add(row["QuestionID"])
            if limit is not None and len(seen) > limit:
                break
            rows.append(row)
    return rows


def write_folder(folder: Path, train_questions: int, eval_questions: int | None) -> None:
    """train.tsv, dev.tsv and test.tsv (group, left, right, label) of a `pairs:` folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, limit in (
        ("train", train_questions),
        ("dev", eval_questions),
        ("test", eval_questions),
    ):
        with open(folder / f"{split}.tsv", "w", encoding="utf-8", newline="") as f:
            f.write("group\tleft\tright\tlabel\n")
            for r in questions(split, limit):
                f.write(f"{r['QuestionID']}\t{r['Question']}\t{r['Sentence']}\t{r['Label']}\n")


def time_v(stderr: str) -> dict[str, float]:
    """What `/usr/bin/time -v` printed: peak resident memory (MB), wall and CPU seconds."""

    def field(name: str) -> str:
        match = re.search(rf"{re.escape(name)}: (.+)", stderr)
        return match.group(1).strip() if match else ""

    wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)")
    parts = [float(p) for p in wall.split(":")] if wall else []
    seconds = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    peak = field("Maximum resident set size (kbytes)")
    return {
        "peak_rss_mb": round(int(peak) / 1024, 1) if peak else float("nan"),
        "wall_s": round(seconds, 1),
        "cpu_s": round(
            float(field("User time (seconds)") or 0) + float(field("System time (seconds)") or 0), 1
        ),
    }


def run(folder: Path, out: Path, sets: list[str]) -> dict[str, Any]:
    """`attnmatch train` on `folder` into `out` under `/usr/bin/time -v`."""
    command = [sys.executable, "-m", "attnmatch", "train", "--dataset", f"pairs:{folder}"]
    command += ["-o", str(out), "--no-progress", "--set", "train.threads=1"]
    for item in sets:
        command += ["--set", item]
    timed = ["/usr/bin/time", "-v", *command] if Path("/usr/bin/time").exists() else command
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run(timed, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"attnmatch train failed (exit status {done.returncode})")
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    metrics = result["metrics"]
    kept = result.get("kept") or {}
    return {
        "command": " ".join(command),
        **time_v(done.stderr),
        "recorded_peak_rss_mb": metrics.get("peak_rss_mb"),
        "train_time_s": result.get("train_time_s"),
        "dev_map": (result.get("dev") or {}).get("map"),
        "test_map": (result.get("test") or {}).get("map"),
        "floors_test_map": {
            name: m.get("map")
            for name, m in ((result.get("floors") or {}).get("test") or {}).items()
        },
        "kept": kept.get("model"),
        "best_epoch": result.get("best_epoch"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=880, help="train questions (880)")
    parser.add_argument(
        "--eval-questions", type=int, default=None, help="dev and test questions (all)"
    )
    parser.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--keep", type=Path, default=None, help="the run folder to keep")
    parser.add_argument("--output", type=Path, default=None, help="a JSON file to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="finetune-memory-") as tmp:
        folder = Path(tmp) / "pairs"
        write_folder(folder, args.questions, args.eval_questions)
        out = args.keep or Path(tmp) / "run"
        row = {"questions": args.questions, "eval_questions": args.eval_questions}
        row |= run(folder, out, args.sets)
    print(
        f"{args.questions} questions: peak {row['peak_rss_mb']:,.0f} MB resident "
        f"(/usr/bin/time; the run recorded {row['recorded_peak_rss_mb']} MB), test MAP "
        f"{row['test_map']:.4f}, dev MAP {row['dev_map']:.4f}, kept {row['kept']}, "
        f"{row['wall_s']:.0f} s wall, {row['cpu_s']:.0f} s CPU"
    )
    if args.output:
        args.output.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
