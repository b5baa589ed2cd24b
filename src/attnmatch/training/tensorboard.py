"""TensorBoard scalars of a training run (`attnmatch train --log tensorboard`).

Each epoch writes `train/loss`, `train/pairs_per_s` and every dev metric as `dev/<metric>`
(when dev was evaluated that epoch) to RUN/tensorboard/, at step = epoch, flushed at once so
that `tensorboard --logdir RUN` shows a run while it trains. TensorBoard is imported only here,
only when asked for (the `tensorboard` extra).
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from attnmatch.training.loop import EpochCallback

INSTALL_HINT = "pip install 'attnmatch[tensorboard]'"


def check_installed() -> None:
    """Raises ImportError, with the command that installs it, when tensorboard is missing."""
    import importlib.util

    if importlib.util.find_spec("tensorboard") is None:
        raise ImportError(
            f"--log tensorboard needs the tensorboard package: {INSTALL_HINT}", name="tensorboard"
        )


class TensorBoardLog:
    """An `on_epoch` callback writing an epoch's scalars, then calling `then` (if any).

    Raises:
        ImportError: tensorboard is not installed (with the command that installs it).
    """

    def __init__(self, run_path: Path, then: EpochCallback | None = None) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError(
                f"--log tensorboard needs the tensorboard package: {INSTALL_HINT}",
                name="tensorboard",
            ) from e
        self.folder = Path(run_path) / "tensorboard"
        self.writer = SummaryWriter(log_dir=str(self.folder))
        self.then = then
        # Everything is flushed every epoch; the writer (and its thread) ends with the run's
        # callback, or at exit.
        weakref.finalize(self, self.writer.close)

    def __call__(self, entry: dict[str, Any]) -> None:
        epoch = int(entry["epoch"])
        scalars = {
            "train/loss": entry.get("train_loss"),
            "train/pairs_per_s": entry.get("train_pairs_per_s"),
        }
        for name, value in (entry.get("dev") or {}).items():
            scalars[f"dev/{name}"] = value
        for tag, value in scalars.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.writer.add_scalar(tag, float(value), global_step=epoch)
        self.writer.flush()
        if self.then is not None:
            self.then(entry)


def with_tensorboard(run_path: Path, then: EpochCallback | None = None) -> TensorBoardLog:
    """An `on_epoch` callback that logs to run_path/tensorboard/ and then calls `then`."""
    return TensorBoardLog(run_path, then)
