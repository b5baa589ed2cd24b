"""Whether two training runs of one experiment are the same run, to the last digit.

Compares two run folders (`attnmatch train -o A`, or `attnmatch reproduce --runs-dir` seeds):
the dev and test metrics of result.json, the per-epoch log (training loss and dev metrics), the
best epoch, and the weights of the dev-selected model bit for bit. Weights are matched by name,
or, when the two runs were saved under different model-directory formats (whose parameter
names may differ), by a bit-equal tensor of the same shape. It prints one line per check and
exits 1 when any differs.

Typical use: the same experiment trained at two commits (e.g. a refactoring that must not
change numerics), each from its own checkout, on one machine with the same thread count:

    git worktree add /tmp/before OLD && git worktree add /tmp/after NEW
    (cd /tmp/before && OMP_NUM_THREADS=1 PYTHONPATH=src python -m attnmatch.cli reproduce \
        amvlstm_table3 --rows mvlstm --seeds 1 --runs-dir /tmp/runs-before --no-progress)
    (the same in /tmp/after into /tmp/runs-after)
    python benchmarks/compare_runs.py /tmp/runs-before/amvlstm_table3/mvlstm/seed-1 \
        /tmp/runs-after/amvlstm_table3/mvlstm/seed-1
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import safetensors.torch
import torch


def _result(run: Path) -> dict[str, Any]:
    path = run / "result.json"
    if not path.is_file():
        raise SystemExit(f"{path}: not found (is {run} a finished run folder?)")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _log(run: Path) -> list[tuple[Any, Any, str]]:
    rows = []
    for line in (run / "log.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        dev = json.dumps(entry.get("dev"), sort_keys=True)
        rows.append((entry.get("epoch"), entry.get("train_loss"), dev))
    return rows


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return safetensors.torch.load_file(str(run / "model" / "model.safetensors"))


def compare(a: Path, b: Path) -> list[tuple[str, bool, str]]:
    """(check, equal, detail) for each check."""
    ra, rb = _result(a), _result(b)
    checks = []
    for split in ("dev", "test"):
        checks.append((f"{split} metrics", ra.get(split) == rb.get(split), f"{ra.get(split)}"))
    checks.append(("best epoch", ra["best_epoch"] == rb["best_epoch"], str(ra["best_epoch"])))
    la, lb = _log(a), _log(b)
    checks.append(("epoch log (loss, dev)", la == lb, f"{len(la)} vs {len(lb)} epochs"))
    wa, wb = _weights(a), _weights(b)
    equal = 0
    for name, tensor in wa.items():
        other = wb.get(name)
        if other is not None and other.shape == tensor.shape and torch.equal(other, tensor):
            equal += 1
        elif any(t.shape == tensor.shape and torch.equal(t, tensor) for t in wb.values()):
            equal += 1
    same = equal == len(wa) == len(wb)
    checks.append(("weights bit-equal", same, f"{equal}/{len(wa)} tensors ({len(wb)} in B)"))
    return checks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args()
    checks = compare(args.run_a, args.run_b)
    for name, ok, detail in checks:
        print(f"{'same' if ok else 'DIFFERENT':9s} {name}: {detail}")
    sys.exit(0 if all(ok for _, ok, _ in checks) else 1)


if __name__ == "__main__":
    main()
