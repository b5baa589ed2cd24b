"""Running the app on uvicorn: one process, or `workers` processes behind one port.

With `workers > 1`, uvicorn starts that many processes on one listening socket (the kernel
spreads the connections); each loads its own copy of the models (`worker_app`, from the plan in
the `ATTNMATCH_SERVE_PLAN` environment variable) and batches its own requests. The Prometheus
metrics are written by every worker into one folder (prometheus_client's multiprocess mode,
`PROMETHEUS_MULTIPROC_DIR`, a temporary folder made here) and `/metrics` sums them, whichever
worker answers. Why processes: the model's Python and the event loop share one interpreter lock,
so one process uses little more than one core (docs/serving.md, "More than one core").
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnmatch.loading import load_served
from attnmatch.serving.app import ServeSettings, create_app
from attnmatch.serving.limits import HttpLimits, protocol_options, use_limits

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Matcher
    from attnmatch.retrieval.search import SearchIndex
    from attnmatch.runtime import ExportedMatcher

PLAN_ENV = "ATTNMATCH_SERVE_PLAN"


def load_models(
    specs: list[tuple[str, str]],
    device: Any,
    precision: str,
    backend: str = "auto",
    *,
    threads: int | None = None,
) -> dict[str, Matcher | ExportedMatcher]:
    """name -> the model of each (name, spec), on `device` in `precision`, run by `backend`
    (`attnmatch.loading.load_served`: an exported directory on `attnmatch.runtime`, with
    `threads` ONNX Runtime threads; anything else by `Matcher.load`: torch, onnx or auto)."""
    return {
        name: load_served(spec, device, precision, backend, threads=threads) for name, spec in specs
    }


def run(
    specs: list[tuple[str, str]],
    *,
    host: str,
    port: int,
    workers: int,
    device: Any,
    precision: str,
    settings: ServeSettings,
    backend: str = "auto",
    limits: HttpLimits,
    loaded: dict[str, Matcher | ExportedMatcher] | None = None,
    index: Path | None = None,
    loaded_index: SearchIndex | None = None,
) -> None:
    """Serves the models `specs` (name, spec) on host:port until stopped (Ctrl-C, SIGTERM).

    `loaded`: the models already loaded (one process serves them; with `workers > 1` each worker
    loads its own). `index`: a search index folder served at /v1/search (`loaded_index`: the same,
    already loaded, for one process).
    """
    import uvicorn

    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "access_log": False,  # the attnmatch.serve logger writes one JSON line per request
        "timeout_graceful_shutdown": 10,
        "log_level": "warning",
        **protocol_options(limits),
    }
    log_requests()
    if workers == 1:
        models = loaded or load_models(specs, device, precision, backend, threads=settings.threads)
        if loaded_index is None and index is not None:
            from attnmatch.retrieval.search import load_index

            loaded_index = load_index(index)
        app = create_app(models, settings=settings, index=loaded_index)
        uvicorn.Server(uvicorn.Config(app, **common)).run()
        return
    plan = {
        "models": specs,
        "device": "cpu" if device is None else str(device),
        "precision": precision,
        "backend": backend,
        "settings": dataclasses.asdict(settings),
        "limits": dataclasses.asdict(limits),
        "index": None if index is None else str(index),
    }
    with tempfile.TemporaryDirectory(prefix="attnmatch-metrics-") as metrics_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
        os.environ[PLAN_ENV] = json.dumps(plan)
        try:
            uvicorn.run(
                "attnmatch.serving.server:worker_app", factory=True, workers=workers, **common
            )
        finally:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"], os.environ[PLAN_ENV]


def worker_app() -> Any:
    """The app of one worker process, built from the plan `run` left in the environment."""
    plan = json.loads(os.environ[PLAN_ENV])
    use_limits(HttpLimits(**plan["limits"]))
    settings = plan["settings"]
    settings["allowed_hosts"] = tuple(settings["allowed_hosts"])
    specs = [(name, spec) for name, spec in plan["models"]]
    log_requests()
    threads = settings["threads"]
    models = load_models(specs, plan["device"], plan["precision"], plan["backend"], threads=threads)
    index = None
    if plan["index"] is not None:
        from attnmatch.retrieval.search import load_index

        index = load_index(Path(plan["index"]))
    return create_app(models, settings=ServeSettings(**settings), index=index)


def log_requests() -> None:
    """The `attnmatch.serve` logger writes one JSON line per request on stderr."""
    access = logging.getLogger("attnmatch.serve")
    if not access.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        access.addHandler(handler)
        access.setLevel(logging.INFO)
        access.propagate = False
