"""Teacher and student pairs/s of finished distillation runs, measured again side by side.

For each run folder (`attnmatch distill --output RUN`), loads its teacher and its chosen
student (RUN/model), and times both on one CPU thread on up to 300 test pairs of new text
(`attnmatch.training.distill_runs.new_text_pairs`), interleaved, the best of `--rounds`; the figures
replace RUN/summary.json's "pairs_per_s" (written atomically), so that rows of
results/distill.md measured before on pairs that share texts, or on a busier machine, are
measured alike.

    python benchmarks/distill_speed.py --teacher runs/modern/wikiqa-bi-encoder/seed-1/model \
        --dataset wikiqa runs/distill/wikiqa-amvlstm_q-glove-ft/distilled
    (TrecQA: --dataset trecqa --test-split raw-test; STS2015: --dataset semeval-sts
    --test-split test-2015)

With `--onnx`, the teacher is also exported (fp32 and int8, `attnmatch.export.export_onnx`)
and so is the student (fp32: the seed models' graphs equal torch within 1e-5), into a temporary
folder, and timed in the same interleaved rounds on ONNX Runtime, one intra-op thread each: the
figures go to summary.json's "pairs_per_s" as "teacher onnx fp32", "teacher onnx int8" and
"student onnx fp32", and the line printed compares each one's fastest backend.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from attnmatch.atomic import write_text_atomic
from attnmatch.devices import torch_threads
from attnmatch.export import export_onnx
from attnmatch.matcher import Matcher
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.distill_runs import new_text_pairs, pairs_per_second
from attnmatch.training.experiment import load_splits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--teacher", required=True, help="model folder or minilm-l6")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--test-split", default=None, help="e.g. raw-test for TrecQA")
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--onnx", action="store_true", help="also time the teacher on ONNX")
    args = parser.parse_args()
    data: dict[str, str] = {"dataset": args.dataset}
    if args.test_split is not None:  # only the test split is read: the others name it too
        data |= {s: args.test_split for s in ("train_split", "dev_split", "test_split")}
    config = ExperimentConfig.from_dict({"model": "mvlstm", "data": data})
    _, dev, test = load_splits(config)
    split = test if test is not None else dev
    assert split is not None
    pairs = new_text_pairs(split.examples, args.pairs)
    teacher = (
        Matcher.from_encoder(args.teacher)
        if not Path(args.teacher).is_dir()
        else Matcher.load(args.teacher)
    )
    with tempfile.TemporaryDirectory() as tmp, torch_threads(1):  # ONNX sessions: 1 thread
        teachers = {"teacher": teacher}
        if args.onnx:
            for quantize in (None, "int8"):
                name = f"teacher onnx {quantize or 'fp32'}"
                folder = export_onnx(teacher, Path(tmp) / name.replace(" ", "-"), quantize=quantize)
                teachers[name] = Matcher.load(folder)
        for run in args.runs:
            _measure(run, teachers, pairs, args.rounds, Path(tmp) if args.onnx else None)


def _measure(
    run: Path,
    teachers: dict[str, Matcher],
    pairs: list[tuple[str, str]],
    rounds: int,
    onnx_dir: Path | None,
) -> None:
    """Times `teachers` and the run's student (also exported, with `onnx_dir`) side by side
    and writes the figures to run/summary.json."""
    summary_file = run / "summary.json"
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    seeds = sorted(run.glob("seed-*/model")) or [run / "model"]
    students = {"student": Matcher.load(seeds[0])}
    if onnx_dir is not None:
        folder = export_onnx(
            students["student"], onnx_dir / f"student-{len(list(onnx_dir.iterdir()))}"
        )
        students["student onnx fp32"] = Matcher.load(folder)
    speeds = pairs_per_second(teachers | students, pairs, rounds=rounds)
    summary["pairs_per_s"] = speeds | {"pairs": len(pairs), "texts": "new (none repeated)"}
    write_text_atomic(summary_file, json.dumps(summary, indent=2) + "\n")
    student_speed = max(speeds[name] for name in students)
    teacher_speed = max(speeds[name] for name in teachers)
    cells = ", ".join(f"{name} {speeds[name]:,.0f}" for name in teachers | students)
    print(
        f"{run}: pairs/s {cells}; fastest student / fastest teacher "
        f"{student_speed / teacher_speed:.1f}x; {len(pairs)} pairs of new text, one thread"
    )


if __name__ == "__main__":
    main()
