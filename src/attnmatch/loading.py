"""What the commands and the service load for a MODEL argument: an exported directory always
on `attnmatch.runtime` (ONNX Runtime, no torch imported), anything else with
`attnmatch.matcher.load_matcher` (torch). `attnmatch rank`, `score` (and its workers) and
`serve` (and its workers) all load through `load_served`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attnmatch.runtime import check_cpu_fp32, check_exported_backend, is_exported

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher
    from attnmatch.runtime import ExportedMatcher


def load_served(
    spec: str,
    device: Any = None,
    precision: str = "fp32",
    backend: str = "auto",
    *,
    threads: int | None = None,
) -> Matcher | ExportedMatcher:
    """The model `spec` names, as the commands serve it.

    Args:
        device: a torch device or its name; None: the CPU.
        precision: "fp32", "bf16" or "fp16" (an exported directory: fp32 only).
        backend: "auto", "torch" or "onnx" (an exported directory: not torch).
        threads: ONNX Runtime's intra-op threads of an exported directory (default:
            `attnmatch.runtime.load`'s); a torch model keeps torch's setting.

    Raises:
        ValueError: an exported directory with backend torch, a GPU or another precision than
            fp32 (one line, no torch imported), or what `load_matcher` raises.
    """
    if is_exported(spec):
        check_exported_backend(spec, backend)
        check_cpu_fp32("cpu" if device is None else str(device), precision)
        from attnmatch.runtime import load

        return load(spec, threads=threads)
    from attnmatch.matcher import load_matcher

    return load_matcher(spec, backend=backend).to(device or "cpu", precision=precision)


def exported_only(specs: list[str]) -> bool:
    """Whether every model of `specs` is an exported directory (a command then imports no
    torch)."""
    return all(is_exported(spec) for spec in specs)
