"""Fine-tuning MiniLM as a bi-encoder on WikiQA: where a training step's time goes, attnmatch
against sentence-transformers' trainer on the same model, groups and batch, and what a busy
machine does to a run that uses every core.

Both sides train all-MiniLM-L6-v2 (the same local files) on the same WikiQA training groups,
16 a batch, each a question, its correct answer and 4 wrong ones (96 texts a step), with the
same loss: softmax over the candidates of 20 x cosine (attnmatch's `minilm_bi_encoder` preset
as the `wikiqa-bi-encoder` row of the modern table trains it; sentence-transformers'
`MultipleNegativesRankingLoss` with scale 20 on (anchor, positive, negative x 4) rows, which
also scores the other groups' answers, a cost of a few dot products). AdamW 2e-5, no warm-up.
Both run in a child process each with the same torch thread count, one after the other, then
again (`--rounds`); the median of each side's rounds is kept. A step's time:

- attnmatch: `loop.backward` (pad the pre-tokenised ids, forward, loss, backward), gradient
  clipping and the optimiser step, each timed on its own (the trainer's step, piece by piece);
- sentence-transformers: `SentenceTransformerTrainer` with a callback timing each step from the
  end of the previous one (data loading and tokenisation included: its collator tokenises).

`--busy N` starts N processes that spin on a CPU during the attnmatch runs, and compares
`train.threads` = the CPU count with `train.threads` = 0 (automatic: the CPUs not busy with
other work, `attnmatch.training.trainer.auto_threads`).

    python benchmarks/finetune_speed.py --steps 8 --rounds 2 --threads 1 \
        --output results/finetune_speed_cpu.json
    python benchmarks/finetune_speed.py --steps 6 --rounds 1 --busy 1 --skip-st
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

OURS = r"""
import json, sys, time
import numpy as np, torch
from attnmatch.research.reproduce import experiment_for, find_table, load_table
from attnmatch.training import build_experiment
from attnmatch.training.loop import backward, make_sampler
from attnmatch.training.optim import make_optimizer
from attnmatch.training.trainer import torch_settings
job = json.loads(sys.argv[1])
spec = load_table(find_table("modern"))
(row,) = [r for r in spec.rows if r.id == "wikiqa-bi-encoder"]
config = experiment_for(spec, row)
exp = build_experiment(config)
sampler = make_sampler(exp)
batches = sampler.epoch(1)[: job["steps"]]
data = getattr(sampler, "data", exp.train)
assert len(data.texts) == len(exp.train_texts)
groups = []
for idx in batches:
    for g in np.unique(data.group_ids[idx]):
        rows = idx[data.group_ids[idx] == g]
        labels = data.labels[rows]
        left = exp.train_texts[data.left[rows[0]]]
        pos = [exp.train_texts[data.right[r]] for r in rows[labels > 0]]
        neg = [exp.train_texts[data.right[r]] for r in rows[labels <= 0]]
        groups.append({"anchor": left, "positive": pos[0], "negatives": neg})
with torch_settings(job["threads"]):
    threads = torch.get_num_threads()
    optimizer = make_optimizer(exp.model, exp.config.train)
    exp.model.train()
    phases = {"forward_backward": [], "clip": [], "optimizer": []}
    texts = []
    for idx in batches:
        optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        backward(exp, data, idx, sampler.group_index(idx))
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(exp.model.parameters(), 1.0)
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        phases["forward_backward"].append(t1 - t0)
        phases["clip"].append(t2 - t1)
        phases["optimizer"].append(t3 - t2)
        texts.append(len(set(data.left[idx])) + len(idx))
print(json.dumps({"phases": phases, "groups": groups, "threads": threads, "texts": texts}))
"""

# forward+backward split into its parts on one more pass (autograd profiler off: plain timers)
SPLIT = r"""
import json, sys, time
import torch
from attnmatch.data.collate import collate
from attnmatch.research.reproduce import experiment_for, find_table, load_table
from attnmatch.training import build_experiment
from attnmatch.training.loop import batch_loss, make_sampler
from attnmatch.training.trainer import torch_settings
job = json.loads(sys.argv[1])
spec = load_table(find_table("modern"))
(row,) = [r for r in spec.rows if r.id == "wikiqa-bi-encoder"]
exp = build_experiment(experiment_for(spec, row))
sampler = make_sampler(exp)
data = getattr(sampler, "data", exp.train)
out = {"collate": [], "forward_loss": [], "backward": []}
with torch_settings(job["threads"]):
    exp.model.train()
    for idx in sampler.epoch(1)[: job["steps"]]:
        exp.model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        batch = collate(data, idx, group_index=sampler.group_index(idx))
        t1 = time.perf_counter()
        loss = batch_loss(exp, batch)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        out["collate"].append(t1 - t0)
        out["forward_loss"].append(t2 - t1)
        out["backward"].append(t3 - t2)
print(json.dumps(out))
"""

ST = r"""
import json, sys, time
import torch
job = json.loads(sys.argv[1])
torch.set_num_threads(job["threads"])
from datasets import Dataset
from sentence_transformers import SentenceTransformer, __version__
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from sentence_transformers.losses import MultipleNegativesRankingLoss
from transformers import TrainerCallback
groups = json.load(open(job["groups"]))
k = max(len(g["negatives"]) for g in groups)
columns = {"anchor": [g["anchor"] for g in groups], "positive": [g["positive"] for g in groups]}
for i in range(k):  # a group with fewer wrong answers repeats its last one
    columns[f"negative_{i + 1}"] = [g["negatives"][min(i, len(g["negatives"]) - 1)] for g in groups]
model = SentenceTransformer(job["model"], device="cpu")
class Timer(TrainerCallback):
    def __init__(self):
        self.ends = []
    def on_train_begin(self, args, state, control, **kw):
        self.ends.append(time.perf_counter())
    def on_step_end(self, args, state, control, **kw):
        self.ends.append(time.perf_counter())
        self.threads = torch.get_num_threads()
if job.get("plain"):  # the same loss and optimiser in a plain loop: no trainer, groups in order
    loss = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01)
    model.train()
    names = list(columns)
    ends = [time.perf_counter()]
    for start in range(0, len(groups), 16):
        features = []
        for name in names:
            tok = model.tokenize(columns[name][start : start + 16])
            features.append({k: v for k, v in tok.items() if isinstance(v, torch.Tensor)})
        optimizer.zero_grad(set_to_none=True)
        loss(features, None).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        ends.append(time.perf_counter())
    steps = [b - a for a, b in zip(ends, ends[1:])]
    print(json.dumps({"steps": steps, "version": __version__, "threads": torch.get_num_threads()}))
    sys.exit(0)
timer = Timer()
args = SentenceTransformerTrainingArguments(
    output_dir=job["tmp"], per_device_train_batch_size=16, max_steps=job["steps"],
    learning_rate=2e-5, warmup_steps=0, weight_decay=0.01, max_grad_norm=1.0,
    save_strategy="no", report_to=[], logging_strategy="no", use_cpu=True,
    dataloader_num_workers=0, seed=1, disable_tqdm=True)
trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=Dataset.from_dict(columns),
    loss=MultipleNegativesRankingLoss(model, scale=20.0), callbacks=[timer])
trainer.train()
steps = [b - a for a, b in zip(timer.ends, timer.ends[1:])]
print(json.dumps({"steps": steps, "version": __version__, "threads": timer.threads}))
"""


def child(code: str, job: dict[str, Any], python: str) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS=str(job["threads"] or os.cpu_count()))
    out = subprocess.run(
        [python, "-c", code, json.dumps(job)], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def spin(stop: Any) -> None:
    while not stop.is_set():
        pass


def per_group(seconds: list[float], groups_a_step: int = 16) -> float:
    """Seconds a training group, the first step left out on both sides (allocations, the
    trainer's set-up)."""
    later = seconds[1:] or seconds
    return sum(later) / (len(later) * groups_a_step)


def _fmt(seconds: list[float]) -> str:
    return " ".join(f"{s:.2f}" for s in seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--busy", type=int, default=0, help="spinning processes (thread test)")
    parser.add_argument("--skip-st", action="store_true")
    parser.add_argument("--python", default=sys.executable, help="sentence-transformers' Python")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    from attnmatch.encoders import resolve_source

    model = str(resolve_source("minilm-l6"))
    report: dict[str, Any] = {"machine": platform.platform(), "cpus": os.cpu_count()}
    job = {"steps": args.steps, "threads": args.threads}
    print(
        f"{args.steps} steps of 16 groups (96 texts), {args.threads} thread(s), {args.rounds} round(s)"
    )

    if args.busy:
        stop = multiprocessing.Event()
        spinners = [multiprocessing.Process(target=spin, args=(stop,)) for _ in range(args.busy)]
        for p in spinners:
            p.start()
        time.sleep(2)
        try:
            rows = {}
            for name, threads in (("all CPUs", os.cpu_count() or 1), ("automatic", 0)):
                result = child(OURS, {"steps": args.steps, "threads": threads}, sys.executable)
                step = [sum(p) for p in zip(*result["phases"].values(), strict=True)]
                rows[name] = {"threads": result["threads"], "step_s": step}
                print(
                    f"busy {args.busy}: threads {name} ({result['threads']}): "
                    f"median step {statistics.median(step):.2f} s, slowest {max(step):.2f} s"
                )
        finally:
            stop.set()
            for p in spinners:
                p.join()
        report["busy"] = {"spinners": args.busy, "rows": rows}
        ratio = statistics.median(rows["all CPUs"]["step_s"]) / statistics.median(
            rows["automatic"]["step_s"]
        )
        print(f"automatic threads are {ratio:.2f}x as fast as all CPUs beside {args.busy} busy")
    else:
        ours: list[float] = []
        theirs: list[float] = []
        theirs_plain: list[float] = []
        phases: dict[str, list[float]] = {}
        version = None
        for r in range(args.rounds):
            result = child(OURS, job, sys.executable)
            ours.append(per_group([sum(p) for p in zip(*result["phases"].values(), strict=True)]))
            for name, values in result["phases"].items():
                phases.setdefault(name, []).extend(values)
            steps = [sum(p) for p in zip(*result["phases"].values(), strict=True)]
            print(f"round {r + 1}: attnmatch {ours[-1] * 1000:.0f} ms a group; steps {_fmt(steps)}")
            print(f"  texts a step: {result['texts']}")
            if args.skip_st:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                groups = Path(tmp) / "groups.json"
                groups.write_text(json.dumps(result["groups"]))
                st = child(
                    ST,
                    job | {"groups": str(groups), "model": model, "tmp": str(Path(tmp) / "out")},
                    args.python,
                )
                plain = child(
                    ST,
                    job | {"groups": str(groups), "model": model, "plain": True},
                    args.python,
                )
            version = st["version"]
            theirs.append(per_group(st["steps"]))
            theirs_plain.append(per_group(plain["steps"]))
            print(
                f"round {r + 1}: sentence-transformers' model and loss in a plain loop "
                f"{theirs_plain[-1] * 1000:.0f} ms a group; steps {_fmt(plain['steps'])}"
            )
            print(
                f"round {r + 1}: sentence-transformers {theirs[-1] * 1000:.0f} ms a group; "
                f"steps {_fmt(st['steps'])}; {st['threads']} thread(s)"
            )
        split = child(SPLIT, job, sys.executable)
        parts = {k: statistics.median(v) for k, v in (phases | split).items()}
        report |= {
            "attnmatch_s_per_group": ours,
            "phases_median_s": parts,
            "sentence_transformers_version": version,
            "sentence_transformers_s_per_group": theirs,
            "sentence_transformers_plain_loop_s_per_group": theirs_plain,
        }
        print(
            "attnmatch, median seconds a step: "
            + ", ".join(f"{k} {v:.3f}" for k, v in parts.items())
        )
        if theirs:
            ratio = statistics.median(theirs) / statistics.median(ours)
            report["speedup_vs_sentence_transformers"] = ratio
            print(
                f"attnmatch {statistics.median(ours) * 1000:.0f} ms a group, sentence-transformers "
                f"{version} {statistics.median(theirs) * 1000:.0f} ms: {ratio:.2f}x"
            )
    if args.output:
        args.output.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
