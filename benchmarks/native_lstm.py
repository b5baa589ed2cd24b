"""A native LSTM kernel against oneDNN's: is a compiled recurrence the way to faster inference?

MV-LSTM's inference is bound by its BiLSTM, which runs through oneDNN's fused kernel (`nn.LSTM`
on the CPU) at ~0.85-0.95M tokens/s per thread. This builds `native_lstm.cpp` (the plain
design: one product for every token's input projection, then per step one GEMM and one pass of
ATen's vectorised sigmoid/tanh over the gates) with `torch.utils.cpp_extension` and times it
beside `nn.LSTM` on the shapes of WikiQA's answers (BiLSTM 50 over 50-d vectors), after checking
that both give the same states. It also times the kernel's parts: the input projection alone,
plus the step GEMMs, plus the gate math. Needs a C++ compiler (and ninja); the build takes
~30 s and is cached by torch.

Run: python benchmarks/native_lstm.py [--threads 1] [--repeats 20]
See docs/speed.md, "What 3x would take".
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.utils.cpp_extension import load

HERE = Path(__file__).resolve().parent
# Which of ATen's vectorised code paths the kernel's Vectorized<float> compiles to.
CAPABILITY_FLAGS = {
    "AVX512": ["-DCPU_CAPABILITY=AVX512", "-DCPU_CAPABILITY_AVX512", "-march=native"],
    "AVX2": ["-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2", "-march=native"],
}
SHAPES = [(256, 40), (128, 40), (256, 24), (64, 10), (758, 40)]  # (sequences, length)


def best_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--repeats", type=int, default=20, help="timed calls per figure (best)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    capability = torch.backends.cpu.get_cpu_capability()
    started = time.perf_counter()
    try:
        ext = load(
            "attnmatch_native_lstm",
            [str(HERE / "native_lstm.cpp")],
            extra_cflags=["-O3", *CAPABILITY_FLAGS.get(capability, [])],
        )
    except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SystemExit(
            f"native_lstm.py: building native_lstm.cpp failed (it needs a C++ compiler and "
            f"ninja): {first}"
        ) from e
    build = time.perf_counter() - started
    load_avg = os.getloadavg()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()} ({capability}), build/load {build:.1f} s, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load_avg[0]:.2f}"
    )
    print("BiLSTM 50 over 50-d inputs, every sequence of one length; best of", args.repeats)
    print(
        f"{'n':>4s} {'T':>3s} {'nn.LSTM Mtok/s':>14s} {'native Mtok/s':>13s} {'ratio':>6s} "
        f"{'max |diff|':>10s} {'input ms':>8s} {'+GEMMs ms':>9s} {'+math ms':>8s} "
        f"{'nn.LSTM ms':>10s}"
    )
    torch.manual_seed(0)
    rnn = torch.nn.LSTM(50, 50, batch_first=True, bidirectional=True).eval()
    w_ih = torch.stack([rnn.weight_ih_l0, rnn.weight_ih_l0_reverse]).detach()
    w_hh = torch.stack([rnn.weight_hh_l0, rnn.weight_hh_l0_reverse]).detach()
    bias = torch.stack(
        [rnn.bias_ih_l0 + rnn.bias_hh_l0, rnn.bias_ih_l0_reverse + rnn.bias_hh_l0_reverse]
    ).detach()
    with torch.inference_mode():
        for n, steps in SHAPES:
            x = torch.randn(n, steps, 50)
            diff = (rnn(x)[0] - ext.lstm_forward(x, w_ih, w_hh, bias, 3)).abs().max().item()
            onednn = best_seconds(lambda: rnn(x), args.repeats)  # noqa: B023
            parts = [
                best_seconds(lambda p=p: ext.lstm_forward(x, w_ih, w_hh, bias, p), args.repeats)  # noqa: B023
                for p in (0, 1, 3)
            ]
            print(
                f"{n:4d} {steps:3d} {n * steps / onednn / 1e6:14.2f} "
                f"{n * steps / parts[2] / 1e6:13.2f} {onednn / parts[2]:6.2f} {diff:10.1e} "
                f"{parts[0] * 1e3:8.2f} {parts[1] * 1e3:9.2f} {parts[2] * 1e3:8.2f} "
                f"{onednn * 1e3:10.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
