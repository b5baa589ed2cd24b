"""`attnmatch serve`: models over HTTP (`attnmatch.serving`)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from attnmatch.cli.console import err, print_warning
from attnmatch.cli.files import reading
from attnmatch.cli.options import (
    Backend,
    BackendOption,
    DeviceOption,
    Precision,
    PrecisionOption,
    checked_device,
    default_run_tag,
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
            named.append((default_run_tag(spec), spec))
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


_Models = Annotated[
    list[str],
    typer.Argument(
        metavar="MODEL...",
        help="Model folders, encoders (minilm-l6) or lexical scorers (bm25), each optionally "
        "NAME=SPEC; the first is the default model.",
    ),
]

_Workers = Annotated[
    int,
    typer.Option(
        min=1,
        max=64,
        help="Processes behind the one port, each with its own copy of the models.",
    ),
]

_MaxConcurrent = Annotated[
    int,
    typer.Option(
        "--max-concurrent-requests",
        min=1,
        help="Requests in progress at once, per worker; beyond it a 429 with Retry-After.",
    ),
]

_ApiKey = Annotated[
    str | None,
    typer.Option(
        envvar="ATTNMATCH_API_KEY",
        show_envvar=True,
        help="Require 'Authorization: Bearer KEY' on every request but /healthz and /readyz "
        "(the environment variable keeps the key out of the process list).",
    ),
]

_AllowedHosts = Annotated[
    list[str] | None,
    typer.Option(
        "--allowed-host",
        help="A Host header value to serve (repeat it; '*' any, '*.example.com' a domain). "
        "Default: the loopback names when --host is a loopback address, else any.",
    ),
]

_HeaderTimeout = Annotated[
    float,
    typer.Option(
        "--header-timeout", min=0.1, max=3600, help="Seconds to send a request's headers."
    ),
]

_KeepAliveTimeout = Annotated[
    float,
    typer.Option(
        "--keep-alive-timeout", min=0.1, max=3600, help="Seconds an idle connection stays."
    ),
]


_IndexOption = Annotated[
    Path | None, typer.Option(help="Also serve this index at POST /v1/search (attnmatch index).")
]


def _load_index(path: Path | None) -> Any:
    """The search index served at /v1/search (`attnmatch.serving.search`), loaded at start."""
    if path is None:
        return None
    from attnmatch.retrieval.search import load_index

    with reading(path):
        return load_index(path)


def serve(
    models: _Models,
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
    device: DeviceOption = "cpu",
    precision: PrecisionOption = Precision.fp32,
    backend: BackendOption = Backend.auto,
    threads: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Intra-op threads for the forward passes: torch's, and an exported model's ONNX "
            "Runtime sessions' (default: one per core, shared among the workers); 1 leaves a core "
            "to the HTTP side on a small machine.",
        ),
    ] = None,
    workers: _Workers = 1,
    max_concurrent_requests: _MaxConcurrent = 512,
    api_key: _ApiKey = None,
    allowed_hosts: _AllowedHosts = None,
    header_timeout: _HeaderTimeout = 10,
    keep_alive_timeout: _KeepAliveTimeout = 5,
    index: _IndexOption = None,
) -> None:
    """Serve models over HTTP: rank, score, classify, explain, TEI /rerank and a web page."""
    _check_installed()
    from attnmatch.serving import ServeSettings
    from attnmatch.serving.limits import HttpLimits
    from attnmatch.serving.server import run

    _check_options(max_wait_ms, api_key)
    specs = _model_specs(models)
    torch_device = _serve_device(specs, device, precision.value)
    settings = ServeSettings(
        max_batch_pairs=max_batch,
        max_wait_ms=max_wait_ms,
        batching=not no_batching,
        threads=threads if threads is not None or workers == 1 else _threads_per_worker(workers),
        max_concurrent_requests=max_concurrent_requests,
        api_key=api_key,
        allowed_hosts=tuple(allowed_hosts) if allowed_hosts else _default_hosts(host),
    )
    limits = HttpLimits(header_timeout_s=header_timeout, keep_alive_s=keep_alive_timeout)
    _check_can_listen(host, port)  # a clear line now rather than uvicorn's log after loading
    loaded = _load_each(specs, torch_device, precision.value, backend.value, settings.threads)
    loaded_index = _load_index(index)
    _announce(list(loaded), host, port, workers, api_key is not None)
    if workers > 1:
        loaded.clear()  # each worker loads its own
        loaded_index = None
    run(
        specs,
        host=host,
        port=port,
        workers=workers,
        device=torch_device,
        precision=precision.value,
        backend=backend.value,
        settings=settings,
        limits=limits,
        loaded=loaded or None,
        index=index,
        loaded_index=loaded_index,
    )


def _serve_device(specs: list[tuple[str, str]], device: str, precision: str) -> Any:
    """--device as the models take it: the name itself when every model is an exported
    directory (no torch imported; `attnmatch.loading` checks it), else the torch device."""
    from attnmatch.loading import exported_only

    if exported_only([spec for _, spec in specs]):
        return device
    return checked_device(device, precision)


def _load_each(
    specs: list[tuple[str, str]], device: Any, precision: str, backend: str, threads: int | None
) -> dict[str, Any]:
    """Every model, each loaded here once (with workers too, which load their own) to fail
    early with a clear line naming it."""
    from attnmatch.serving.server import load_models

    loaded = {}
    for name, spec in specs:
        with reading(spec):
            loaded.update(load_models([(name, spec)], device, precision, backend, threads=threads))
    return loaded


def _check_options(max_wait_ms: float, api_key: str | None) -> None:
    """A clear line for a --max-wait-ms that is not a number or an --api-key that cannot be sent."""
    if not math.isfinite(max_wait_ms):
        raise typer.BadParameter(f"{max_wait_ms} is not a number of ms", param_hint="--max-wait-ms")
    if api_key is None and os.environ.get("ATTNMATCH_API_KEY") == "":  # click reads it as unset
        raise typer.BadParameter(
            "ATTNMATCH_API_KEY is set but empty: give a key, or unset it to serve without one",
            param_hint="--api-key",
        )
    if api_key is not None and (
        not api_key.isascii() or not api_key.isprintable() or " " in api_key
    ):
        raise typer.BadParameter(
            "the key is printable ASCII without spaces", param_hint="--api-key"
        )


def _announce(names: list[str], host: str, port: int, workers: int, keyed: bool) -> None:
    """Where the server listens, on stderr, and a warning when any machine may use it."""
    shown_host = f"[{host}]" if ":" in host else host
    processes = f" ({workers} worker processes)" if workers > 1 else ""
    err.print(
        shown(
            f"serving {', '.join(names)} on http://{shown_host}:{port}{processes} (Ctrl-C stops)"
        ),
        highlight=False,
        soft_wrap=True,
    )
    if host not in _LOOPBACK and not keyed:
        print_warning(f"listening on {host} without --api-key: anyone who reaches it can use it")


_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _default_hosts(host: str) -> tuple[str, ...]:
    """The Host values served by default: the loopback names on a loopback address (a page
    elsewhere cannot reach the server through a DNS name rebound to 127.0.0.1), else any."""
    return ("localhost", "127.0.0.1", "[::1]") if host in _LOOPBACK else ("*",)


def _threads_per_worker(workers: int) -> int:
    """torch's intra-op threads of each of `workers` processes: the cores shared out."""
    return max(1, (os.cpu_count() or 1) // workers)


def _check_installed() -> None:
    """ImportError with the install command when a package of the serve extra is missing."""
    try:
        import fastapi  # noqa: F401
        import orjson  # noqa: F401
        import prometheus_client  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"attnmatch serve needs {e.name or 'fastapi'}: pip install 'attnmatch[serve]' "
            "(an exported model without torch: 'attnmatch[serve-onnx]')"
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
