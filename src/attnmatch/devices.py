"""Where a model runs and in what precision: the `--device` and `--precision` options.

Device names: "cpu", "cuda" (the current CUDA device), "cuda:N", or "auto" (CUDA when torch
sees a device, else the CPU). Names are checked in two steps: their spelling when a config is
read (`check_device_name`: a config written on a GPU machine still loads on a laptop), and the
device's presence when something is about to run on it (`resolve_device`).

Precisions: "fp32" runs everything in float32 with no autocast at all, so it is exactly the
computation of a run made before precision existed; "bf16" and "fp16" run forward passes under
`torch.autocast` (matrix products and convolutions in the lower precision, reductions and
losses in float32; the weights and the optimiser stay float32). fp16 training scales the loss
with `torch.amp.GradScaler` (bf16 has float32's exponent range and needs no scaling). fp16 on the
CPU is refused: CPU autocast covers few operations in fp16 and most CPUs have no fp16
arithmetic, so it is slower than fp32 there; bf16 is the CPU's lower precision.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Literal, cast

import torch

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[Precision, ...] = ("fp32", "bf16", "fp16")
DEVICE_NAMES = "cpu, cuda, cuda:N or auto"

_DEVICE = re.compile(r"cpu|auto|cuda(:[0-9]+)?")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def check_device_name(name: str | torch.device, option: str = "device") -> str:
    """`name` as a device name, checked for spelling only (the device need not be here).

    Raises:
        ValueError: not one of cpu, cuda, cuda:N, auto (the option named).
    """
    text = str(name) if isinstance(name, torch.device) else name
    if not isinstance(text, str) or not _DEVICE.fullmatch(text.strip().lower()):
        raise ValueError(f"{option} {name!r}: not a device name ({DEVICE_NAMES})")
    return text.strip().lower()


def resolve_device(name: str | torch.device, option: str = "device") -> torch.device:
    """The torch device that `name` means here: "auto" becomes cuda when torch sees a CUDA
    device, else cpu.

    Raises:
        ValueError: a misspelt name, CUDA asked for where there is none, or a CUDA index this
            machine does not have (the option named, in one line).
    """
    text = check_device_name(name, option)
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(text)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            built = "without CUDA" if torch.version.cuda is None else "with CUDA, but sees no GPU"
            raise ValueError(
                f"{option} {text!r}: no CUDA device is available here (torch "
                f"{torch.__version__} is built {built}); use 'cpu' or 'auto'"
            )
        if device.index is not None and device.index >= count:
            raise ValueError(
                f"{option} {text!r}: this machine has {count} CUDA device(s), cuda:0 to "
                f"cuda:{count - 1}"
            )
    return device


def check_precision(
    precision: str, device: torch.device | None = None, option: str = "precision"
) -> Precision:
    """`precision` checked by name and, given a device, that it runs well there: fp16 is
    refused on the CPU, bf16 on a GPU without bfloat16 arithmetic.

    Raises:
        ValueError: one line naming the option.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"{option} {precision!r}: not a precision ({', '.join(PRECISIONS)})")
    if device is not None and device.type == "cpu" and precision == "fp16":
        raise ValueError(
            f"{option} 'fp16' is not supported on the CPU (few CPU operations autocast to "
            "fp16, and most CPUs have no fp16 arithmetic): use bf16 or fp32 there"
        )
    if (
        device is not None
        and device.type == "cuda"
        and precision == "bf16"
        and not torch.cuda.is_bf16_supported()
    ):
        raise ValueError(
            f"{option} 'bf16': {torch.cuda.get_device_name(device)} has no bfloat16 "
            "arithmetic; use fp16 or fp32"
        )
    return cast(Precision, precision)


def autocast(device: torch.device, precision: Precision) -> AbstractContextManager[object]:
    """The context that runs forward passes on `device` in `precision`: `torch.autocast`,
    or nothing at all for fp32."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=_DTYPES[precision])


def grad_scaler(device: torch.device, precision: Precision) -> torch.amp.GradScaler | None:
    """A loss scaler for fp16 training (small fp16 gradients would underflow to zero); None
    for fp32 and bf16."""
    if precision != "fp16":
        return None
    return torch.amp.GradScaler(device.type)


def module_device(module: torch.nn.Module) -> torch.device:
    """Where `module`'s first parameter or buffer lives; the CPU for a module without any (a
    lexical scorer)."""
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def set_torch_threads(threads: int) -> None:
    """torch's intra-op CPU threads from now on, for the caller's whole life (a worker process,
    a model's own thread); `torch_threads` sets them for a block. With the window pool
    (`models/fast/_windows.py`), the one place that sets them."""
    if threads != torch.get_num_threads():
        torch.set_num_threads(threads)


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op CPU threads set to `threads` inside the block, the caller's after."""
    before = torch.get_num_threads()
    set_torch_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def busy_cpus(samples: int = 5, interval: float = 0.02) -> float:
    """How many CPUs other work keeps busy now: the median over `samples` readings of the
    kernel's count of runnable threads (`/proc/loadavg`), less this reading thread; where there
    is no /proc, the one-minute load average."""
    import os
    import statistics
    import time

    readings: list[float] = []
    for i in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as f:
                running = int(f.read().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return float(os.getloadavg()[0]) if hasattr(os, "getloadavg") else 0.0
        readings.append(max(0, running - 1))
        if i + 1 < samples:
            time.sleep(interval)
    return float(statistics.median(readings))


def cpu_threads(requested: int) -> tuple[int, str | None]:
    """The torch CPU threads a run uses, and a line saying why when it is fewer than torch's
    default. `requested` > 0 is kept. 0 (automatic): torch's default, less the CPUs that other
    work keeps busy (`busy_cpus`), at least 1. On a busy machine a run with a thread per CPU
    waits at every operation for the thread that another process displaced (OpenMP's barrier):
    benchmarks/finetune_speed.py --busy measures it."""
    import os

    default = torch.get_num_threads()
    if requested > 0 or default <= 1:
        return (requested or default), None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpus = cpus or default
    busy = min(float(cpus), busy_cpus())  # runnable threads can outnumber the CPUs
    free = max(1, min(default, int(cpus - busy + 0.5)))
    if free >= default:
        return default, None
    return free, (
        f"threads: {free} of {default} ({busy:g} of {cpus} CPUs busy with other work; a thread "
        "per CPU would wait for the busy ones); train.threads=N chooses"
    )
