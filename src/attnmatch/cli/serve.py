"""`attnmatch serve`: models over HTTP (`attnmatch.serving`)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from attnmatch.cli.console import _warn, err
from attnmatch.cli.files import _reading
from attnmatch.cli.options import (
    _Backend,
    _BackendOption,
    _device,
    _DeviceOption,
    _load_model,
    _Precision,
    _PrecisionOption,
    _run_tag,
)
from attnmatch.terminal import shown


def _model_specs(specs: list[str]) -> list[tuple[str, str]]:
    """(name, spec) of each `attnmatch serve` MODEL: NAME=SPEC, or the spec named by its folder
    (RUN/model by its run) or source name. A spec that exists as a path is never split at '='."""
    named: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if sep and name and rest and "/" not in name and not Path(spec).exists():
            if not name.isprintable() or name != name.strip() or not name.strip():
                raise typer.BadParameter(
                    f"{spec!r}: a model name is printable text without surrounding spaces",
                    param_hint="MODEL",
                )
            named.append((name, rest))
        else:
            named.append((_run_tag(spec), spec))
    seen: dict[str, str] = {}
    for name, spec in named:
        if name in seen:
            raise typer.BadParameter(
                f"two models are named {name!r} ({seen[name]} and {spec}); name them: "
                f"NAME=SPEC, e.g. {name}2={spec}",
                param_hint="MODEL",
            )
        seen[name] = spec
    return named


def serve(
    models: Annotated[
        list[str],
        typer.Argument(
            metavar="MODEL...",
            help="Model folders, encoders (minilm-l6) or lexical scorers (bm25), each optionally "
            "NAME=SPEC; the first is the default model.",
        ),
    ],
    host: Annotated[
        str, typer.Option(help="The address to listen on (the default: this machine only).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="The port to listen on.")] = 8000,
    max_batch: Annotated[
        int, typer.Option("--max-batch", min=1, help="The most pairs of one batched forward pass.")
    ] = 256,
    max_wait_ms: Annotated[
        float,
        typer.Option(
            "--max-wait-ms", min=0, max=10_000, help="How long a request waits to share a batch."
        ),
    ] = 5,
    no_batching: Annotated[
        bool, typer.Option("--no-batching", help="Run every request on its own.")
    ] = False,
    device: _DeviceOption = "cpu",
    precision: _PrecisionOption = _Precision.fp32,
    backend: _BackendOption = _Backend.auto,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="torch's intra-op threads for the forward passes (default: torch's, one per "
            "core); 1 leaves a core to the HTTP side on a small machine.",
        ),
    ] = None,
) -> None:
    """Serve models over HTTP: rank, score, classify, explain, TEI /rerank and a web page."""
    _check_installed()
    import uvicorn

    from attnmatch.serving import ServeSettings, create_app

    if not math.isfinite(max_wait_ms):
        raise typer.BadParameter(f"{max_wait_ms} is not a number of ms", param_hint="--max-wait-ms")
    torch_device = _device(device, precision.value)
    settings = ServeSettings(
        max_batch_pairs=max_batch,
        max_wait_ms=max_wait_ms,
        batching=not no_batching,
        threads=threads,
    )
    _check_can_listen(host, port)  # a clear line now rather than uvicorn's log after loading
    loaded = {}
    for name, spec in _model_specs(models):
        with _reading(spec):
            loaded[name] = _load_model(spec, torch_device, precision, backend)
    app_ = create_app(loaded, settings=settings)
    _log_requests()
    shown_host = f"[{host}]" if ":" in host else host
    err.print(
        shown(f"serving {', '.join(loaded)} on http://{shown_host}:{port} (Ctrl-C stops)"),
        highlight=False,
        soft_wrap=True,
    )
    if host not in ("127.0.0.1", "localhost", "::1"):
        _warn(
            f"listening on {host}: the API has no authentication; anyone who reaches it can use it"
        )
    config = uvicorn.Config(
        app_,
        host=host,
        port=port,
        access_log=False,  # the attnmatch.serve logger writes one JSON line per request
        timeout_graceful_shutdown=10,
        log_level="warning",
    )
    uvicorn.Server(config).run()


def _check_installed() -> None:
    """ImportError with the install command when a package of the serve extra is missing."""
    try:
        import fastapi  # noqa: F401
        import orjson  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"attnmatch serve needs {e.name or 'fastapi'}: pip install 'attnmatch[serve]'"
        ) from None


def _check_can_listen(host: str, port: int) -> None:
    """OSError naming the address when nothing can listen on host:port (taken, not here)."""
    import socket

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except (OSError, UnicodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise OSError(f"cannot listen on {host}:{port}: {reason} (--host, --port)") from None


def _log_requests() -> None:
    """The `attnmatch.serve` logger writes one JSON line per request on stderr."""
    import logging

    access = logging.getLogger("attnmatch.serve")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
        access.propagate = False
