"""Load test of `attnmatch serve`: throughput and latency of /v1/rank under concurrent clients.

Starts the server (`python -m attnmatch serve MODEL`, a subprocess on 127.0.0.1 and a free port)
once with batching and once with `--no-batching`, and for each concurrency level sends a fixed
number of `/v1/rank` requests (a query and `--candidates` candidates, WikiQA questions and
sentences from `data/wikiqa`, or synthetic text when the data is missing) from `--concurrency`
async clients, stopping early at the time limit. A share of the requests (`--malformed`, exactly
that share rounded up, at random places) is malformed (invalid JSON, a missing or wrongly typed
field, top_k 0, an unknown model, an oversized body): they must be answered 4xx, never 5xx.
Prints one row per (batching, concurrency): requests answered, 2xx / 4xx / 5xx / transport
failures, malformed requests accepted (should be 0), throughput in requests/s, the p50/p95/p99
latency in ms, the CPU time per answered request of the server process and of this load
generator (they share the machine's cores, so the generator's own cost bounds what the server
can show), and the mean pairs of a forward pass (from /metrics). Then the batched/unbatched
throughput ratio with the bound the run's costs put on it, and `Matcher.outputs` timed alone.

The generator is aiohttp by default (`--client httpx` for the previous one); every body is
encoded before the clock starts, so the generator's CPU goes to HTTP only.

Run: python benchmarks/serve_load.py                       (runs/demo/model, 200 requests a row)
     python benchmarks/serve_load.py --model PATH --requests 20 --concurrency 1,8 --time-limit 10
     python benchmarks/serve_load.py --batching on --malformed 0   (one server, no bad requests)
     python benchmarks/serve_load.py --server-arg=--max-batch=128 --server-arg=--threads=1
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import gzip
import json
import math
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    """The outcome of one (batching, concurrency) run."""

    batching: str
    concurrency: int
    latencies_ms: list[float] = field(default_factory=list)
    status: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("2xx", "4xx", "5xx"), 0))
    transport_errors: int = 0
    malformed_accepted: int = 0  # a malformed request answered 2xx
    wall_s: float = 0.0
    server_cpu_s: float | None = None  # the server process's user + system CPU over the row
    pairs_per_forward: float | None = None  # the mean batch, from the server's /metrics
    client_cpu_s: float = 0.0  # this process's (the load generator's) CPU over the row

    @property
    def answered(self) -> int:
        return sum(self.status.values())

    def per_request_ms(self, cpu_s: float | None) -> float:
        return 1000 * cpu_s / self.answered if cpu_s is not None and self.answered else math.nan

    def count(self, bad: bool, code: int, latency_s: float) -> None:
        self.latencies_ms.append(1000 * latency_s)
        self.status[f"{code // 100}xx" if 2 <= code // 100 <= 5 else "5xx"] += 1
        if bad and code < 300:
            self.malformed_accepted += 1


def read_texts(data_dir: Path, seed: int) -> tuple[list[str], list[str]]:
    """(questions, sentences) of WikiQA's test split, or synthetic ones when it is missing."""
    path = data_dir / "wikiqa" / "WikiQA-test.tsv.gz"
    if path.is_file():
        seen: dict[str, None] = {}  # the questions, in order, once each
        sentences: list[str] = []
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                seen[row["Question"]] = None
                sentences.append(row["Sentence"])
        return list(seen), sentences
    rng = random.Random(seed)
    words = [f"word{i}" for i in range(500)] + "the a of in is how what when where who".split()
    questions = [" ".join(rng.choices(words, k=rng.randint(4, 10))) for _ in range(200)]
    sentences = [" ".join(rng.choices(words, k=rng.randint(8, 40))) for _ in range(2000)]
    return questions, sentences


def encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def malformed_request(rng: random.Random, query: str, candidates: list[str]) -> bytes:
    """The body of one malformed /v1/rank request."""
    kind = rng.randrange(7)
    if kind == 0:
        return b'{"query": "unterminated'
    if kind == 1:
        return encode({"candidates": candidates})  # no query
    if kind == 2:
        return encode({"query": query, "candidates": "not a list"})
    if kind == 3:
        return encode({"query": query, "candidates": candidates, "top_k": 0})
    if kind == 4:
        return encode({"model": "no-such-model", "query": query, "candidates": candidates})
    if kind == 5:
        return encode({"query": query, "candidates": [*candidates[:-1], 7]})
    return encode({"query": query, "candidates": ["x" * 1_100_000]})  # over max_request_bytes


HEADERS = {"content-type": "application/json"}
Plan = list[tuple[bool, bytes]]  # (malformed?, body) per request


async def _drive(
    row: Row,
    plan: Plan,
    concurrency: int,
    deadline: float,
    post: Callable[[bytes], Awaitable[int]],
    transport_errors: tuple[type[BaseException], ...],
) -> None:
    """`concurrency` workers send the plan's bodies with `post` (which returns the status code)
    until the plan is spent or the deadline passes, counting each answer into `row`."""
    queue = iter(plan)

    async def worker() -> None:
        for bad, body in queue:
            if time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            try:
                code = await post(body)
            except transport_errors:
                row.transport_errors += 1
                continue
            row.count(bad, code, time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _aiohttp_load(row: Row, url: str, plan: Plan, concurrency: int, deadline: float) -> None:
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def post(body: bytes) -> int:
            async with session.post("/v1/rank", data=body, headers=HEADERS) as response:
                await response.read()
                return response.status

        errors = (aiohttp.ClientError, TimeoutError)
        await _drive(row, plan, concurrency, deadline, post, errors)


async def _httpx_load(row: Row, url: str, plan: Plan, concurrency: int, deadline: float) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def post(body: bytes) -> int:
            response = await client.post("/v1/rank", content=body, headers=HEADERS)
            return response.status_code

        await _drive(row, plan, concurrency, deadline, post, (httpx.HTTPError,))


CLIENTS = {"aiohttp": _aiohttp_load, "httpx": _httpx_load}


def forward_totals(url: str) -> tuple[float, float]:
    """(pairs, forward passes) so far, summed over the server's models, from /metrics."""
    text = httpx.get(url + "/metrics", timeout=10).text
    total = {"sum": 0.0, "count": 0.0}
    for match in re.finditer(r"^attnmatch_batch_pairs_(sum|count)\{[^}]*\} (\S+)$", text, re.M):
        total[match[1]] += float(match[2])
    return total["sum"], total["count"]


def forward_costs(
    model: str, questions: list[str], sentences: list[str], candidates: int, seed: int
) -> list[tuple[int, float, float]]:
    """`Matcher.outputs` alone, no HTTP: (requests a forward, CPU ms a request on 1 torch
    thread, wall ms a request on torch's default threads) for 1, 4, 8 and 12 requests of
    `candidates` pairs a forward pass (the batches the server forms under load)."""
    import torch

    from attnmatch.matcher import load_matcher

    matcher = load_matcher(model)
    rng = random.Random(seed)
    default_threads = torch.get_num_threads()
    cpu_ms: dict[int, list[float]] = {}
    wall_ms: dict[int, list[float]] = {}
    sizes = (1, 4, 8, 12)
    for round_ in range(11):  # the first round warms up; sizes interleaved against drift
        for k in sizes:
            pairs = []
            for _ in range(k):
                query = rng.choice(questions)
                pairs += [(query, text) for text in rng.sample(sentences, candidates)]
            torch.set_num_threads(1)
            start = time.thread_time()
            matcher.outputs(pairs)
            cpu = 1000 * (time.thread_time() - start) / k
            torch.set_num_threads(default_threads)
            start = time.perf_counter()
            matcher.outputs(pairs)
            wall = 1000 * (time.perf_counter() - start) / k
            if round_:
                cpu_ms.setdefault(k, []).append(cpu)
                wall_ms.setdefault(k, []).append(wall)
    return [(k, float(np.median(cpu_ms[k])), float(np.median(wall_ms[k]))) for k in sizes]


def cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU seconds of this process, or of process `pid` (Linux /proc; else None)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


async def run_load(
    url: str,
    *,
    client: str = "aiohttp",
    server_pid: int | None = None,
    batching: str,
    concurrency: int,
    requests: int,
    time_limit: float,
    questions: list[str],
    sentences: list[str],
    candidates: int,
    malformed: float,
    seed: int,
) -> Row:
    """Sends `requests` /v1/rank requests from `concurrency` clients (fewer at the time limit)."""
    row = Row(batching=batching, concurrency=concurrency)
    rng = random.Random(seed)
    plan: Plan = []
    bad = set(rng.sample(range(requests), math.ceil(malformed * requests)))  # at least the share
    for i in range(requests):
        query = rng.choice(questions)
        texts = rng.sample(sentences, candidates)
        if i in bad:
            plan.append((True, malformed_request(rng, query, texts)))
        else:
            plan.append((False, encode({"query": query, "candidates": texts})))
    server_before, client_before = cpu_seconds(server_pid), cpu_seconds()
    start = time.perf_counter()
    await CLIENTS[client](row, url, plan, concurrency, start + time_limit)
    row.wall_s = time.perf_counter() - start
    server_after, client_after = cpu_seconds(server_pid), cpu_seconds()
    assert client_before is not None and client_after is not None
    row.client_cpu_s = client_after - client_before
    if server_before is not None and server_after is not None:
        row.server_cpu_s = server_after - server_before
    return row


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`attnmatch serve MODEL` in a subprocess; its log goes to a temporary file."""

    def __init__(
        self,
        model: str,
        *,
        batching: bool,
        startup_s: float,
        extra: tuple[str, ...] = (),
        src: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="serve_load-", suffix=".log", delete=False)
        command = [sys.executable, "-m", "attnmatch", "serve", model, "--port", str(self.port)]
        command += [*extra, "--no-batching"] if not batching else extra
        env = dict(os.environ)
        if src is not None:  # another checkout's server, e.g. to compare before and after
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(src), env.get("PYTHONPATH"))))
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + startup_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}): {self.tail()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"the server was not ready within {startup_s:.0f}s: {self.tail()}"
                )
            time.sleep(0.2)

    def tail(self, lines: int = 5) -> str:
        text = Path(self.log.name).read_text(encoding="utf-8", errors="replace")
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        os.unlink(self.log.name)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'batching':>8} {'conc':>4} {'answered':>8} {'2xx':>5} {'4xx':>5} {'5xx':>5} "
        f"{'failed':>6} {'bad ok':>6} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'srv cpu':>8} {'gen cpu':>8} {'pairs/fwd':>9}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        rate = r.answered / r.wall_s if r.wall_s else float("nan")
        print(
            f"{r.batching:>8} {r.concurrency:>4} {r.answered:>8} {r.status['2xx']:>5} "
            f"{r.status['4xx']:>5} {r.status['5xx']:>5} {r.transport_errors:>6} "
            f"{r.malformed_accepted:>6} {rate:>8.1f} {percentile(r.latencies_ms, 50):>8.1f} "
            f"{percentile(r.latencies_ms, 95):>8.1f} {percentile(r.latencies_ms, 99):>8.1f} "
            f"{r.per_request_ms(r.server_cpu_s):>8.2f} {r.per_request_ms(r.client_cpu_s):>8.2f} "
            f"{r.pairs_per_forward or math.nan:>9.1f}"
        )
    print(
        "srv cpu, gen cpu: CPU ms per answered request of the server and of the load generator; "
        "pairs/fwd: the mean pairs of a forward pass"
    )


def print_bound(rows: list[Row], cores: int) -> None:
    """The batched top concurrency vs one unbatched client, and what bounds that ratio here."""
    base = next((r for r in rows if r.batching == "off" and r.concurrency == 1), None)
    batched = [r for r in rows if r.batching == "on"]
    if base is None or not batched or not base.answered:
        return
    top = max(batched, key=lambda r: r.concurrency)
    if top.server_cpu_s is None or not top.answered:
        return
    wait_ms = 1000 * base.wall_s / base.answered  # one client: a request at a time
    cost_ms = top.per_request_ms(top.server_cpu_s) + top.per_request_ms(top.client_cpu_s)
    ratio = (top.answered / top.wall_s) / (base.answered / base.wall_s)
    print(
        f"batched at {top.concurrency} clients vs 1 client unbatched: {ratio:.2f}x. Bound on "
        f"{cores} cores: 1 unbatched client takes {wait_ms:.2f} ms a request; a batched request "
        f"at {top.concurrency} clients costs {cost_ms:.2f} ms CPU (server + generator), so at "
        f"most {cores} x {wait_ms:.2f} / {cost_ms:.2f} = {cores * wait_ms / cost_ms:.2f}x; "
        f"5x needs <= {cores * wait_ms / 5:.2f} ms CPU a request"
    )


def print_forward_costs(costs: list[tuple[int, float, float]], candidates: int) -> None:
    print(f"Matcher.outputs alone (no HTTP), per request of {candidates} pairs:")
    for k, cpu, wall in costs:
        print(
            f"  {k:>2} request(s) a forward ({k * candidates:>4} pairs): {cpu:6.2f} ms CPU "
            f"(1 torch thread), {wall:6.2f} ms wall (torch's default threads)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(ROOT / "runs" / "demo" / "model"))
    parser.add_argument("--requests", type=int, default=200, help="requests per row")
    parser.add_argument("--time-limit", type=float, default=60, help="seconds per row at most")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated client counts")
    parser.add_argument("--candidates", type=int, default=20, help="candidates per request")
    parser.add_argument("--malformed", type=float, default=0.1, help="share of bad requests")
    parser.add_argument("--batching", choices=("both", "on", "off"), default="both")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "data")
    parser.add_argument("--startup", type=float, default=180, help="seconds to wait for /readyz")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    parser.add_argument("--client", choices=tuple(CLIENTS), default="aiohttp")
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an option for `attnmatch serve` (repeatable), e.g. --server-arg=--max-batch=128",
    )
    parser.add_argument(
        "--no-forward",
        action="store_true",
        help="skip timing Matcher.outputs alone before the servers start",
    )
    parser.add_argument(
        "--server-src",
        type=Path,
        help="run the server from this source folder (put first on PYTHONPATH)",
    )
    args = parser.parse_args()
    if args.requests < 1 or args.candidates < 1 or args.time_limit <= 0:
        parser.error("--requests, --candidates and --time-limit must be positive")
    if not 0 <= args.malformed <= 1:
        parser.error(f"--malformed is a share between 0 and 1, got {args.malformed}")
    try:
        levels = [int(c) for c in args.concurrency.split(",")]
    except ValueError:
        parser.error(f"--concurrency takes integers like 1,8,32, got {args.concurrency!r}")
    if not levels or min(levels) < 1:
        parser.error("--concurrency levels must be >= 1")
    model = args.model
    if not Path(model).exists() and "/" in model:
        parser.error(f"--model {model}: no such folder (train one with `make demo`, or pass one)")
    questions, sentences = read_texts(args.data_dir, args.seed)
    if len(sentences) < args.candidates:
        parser.error(f"--candidates {args.candidates}: only {len(sentences)} texts to draw from")

    costs = None
    if not args.no_forward and Path(model).is_dir():
        costs = forward_costs(model, questions, sentences, args.candidates, args.seed)
    modes = {"both": ("on", "off"), "on": ("on",), "off": ("off",)}[args.batching]
    rows: list[Row] = []
    for mode in modes:
        server = Server(
            model,
            batching=mode == "on",
            startup_s=args.startup,
            extra=tuple(args.server_arg),
            src=args.server_src,
        )
        try:
            warm = {"query": questions[0], "candidates": sentences[: args.candidates]}
            httpx.post(server.url + "/v1/rank", json=warm, timeout=60)  # first-call costs
            for i, concurrency in enumerate(levels):
                pairs_before, forwards_before = forward_totals(server.url)
                row = asyncio.run(
                    run_load(
                        server.url,
                        client=args.client,
                        server_pid=server.process.pid,
                        batching=mode,
                        concurrency=concurrency,
                        requests=args.requests,
                        time_limit=args.time_limit,
                        questions=questions,
                        sentences=sentences,
                        candidates=args.candidates,
                        malformed=args.malformed,
                        seed=args.seed + i,
                    )
                )
                pairs_after, forwards_after = forward_totals(server.url)
                if forwards_after > forwards_before:
                    row.pairs_per_forward = (pairs_after - pairs_before) / (
                        forwards_after - forwards_before
                    )
                rows.append(row)
                print(f"# batching {mode}, {concurrency} clients: done", file=sys.stderr)
        finally:
            server.stop()
    print(
        f"model {model}; {args.candidates} candidates a request; {args.malformed:.0%} malformed; "
        f"{args.client} generator; server options {' '.join(args.server_arg) or '(defaults)'}"
        + (f" from {args.server_src}" if args.server_src else "")
    )
    print_table(rows)
    print_bound(rows, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    if costs is not None:
        print_forward_costs(costs, args.candidates)
    if args.json:
        summary = [
            {
                "batching": r.batching,
                "concurrency": r.concurrency,
                "answered": r.answered,
                **r.status,
                "transport_errors": r.transport_errors,
                "malformed_accepted": r.malformed_accepted,
                "req_per_s": r.answered / r.wall_s if r.wall_s else None,
                **{f"p{q}_ms": percentile(r.latencies_ms, q) for q in (50, 95, 99)},
                "server_cpu_ms_per_request": r.per_request_ms(r.server_cpu_s),
                "client_cpu_ms_per_request": r.per_request_ms(r.client_cpu_s),
                "pairs_per_forward": r.pairs_per_forward,
            }
            for r in rows
        ]
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if any(r.status["5xx"] or r.transport_errors or r.malformed_accepted for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
