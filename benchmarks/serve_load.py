"""Load test of `attnmatch serve`: throughput and latency of /v1/rank under concurrent clients.

Starts the server (`python -m attnmatch serve MODEL`, a subprocess on 127.0.0.1 and a free port)
once with batching and once with `--no-batching`, and for each concurrency level sends a fixed
number of `/v1/rank` requests (a query and `--candidates` candidates, WikiQA questions and
sentences from `data/wikiqa`, or synthetic text when the data is missing) from `--concurrency`
async clients, stopping early at the time limit. A share of the requests (`--malformed`, exactly
that share rounded up, at random places) is malformed, in 18 kinds taken in turn: 11 sent as HTTP
(invalid JSON, a missing or wrongly typed field, top_k 0, an unknown model, a body over 1 MB, a
lone surrogate in a candidate or the query, an unknown field, a JSON array) and 7 on a socket of
their own (a 200 KB header, a 40 MB endless header, 500 headers, half-sent headers (slowloris), a
half-sent body, a foreign Host, bytes that are not HTTP). Each must be answered 4xx or closed,
never 5xx, 2xx or held open. Every 2xx answer to a good request is checked against
`Matcher.score` of its pairs in this process (the same candidates, best first, scores within
1e-4): `wrong` counts those that differ.
Prints one row per (batching, concurrency): requests answered, 2xx / 4xx / 5xx / transport
failures, malformed requests accepted (should be 0), throughput in requests/s, the p50/p95/p99
latency in ms of the HTTP requests, the CPU time per answered request of the server's processes
and of this load generator (they share the machine's cores, so the generator's own cost bounds
what the server can show), the mean pairs of a forward pass (from /metrics), malformed requests
closed or held, wrong answers, and the server's resident memory (all its processes) before and
at peak. Then the batched/unbatched throughput ratio with the bound the run's costs put on it,
and `Matcher.outputs` timed alone. `--workers N` runs the batched server with N processes (the
unbatched baseline keeps one).

The generator is aiohttp by default (`--client httpx` for the previous one); every body is
encoded before the clock starts, so the generator's CPU goes to HTTP only.

Run: python benchmarks/serve_load.py                       (runs/demo/model, 200 requests a row)
     python benchmarks/serve_load.py --model PATH --requests 20 --concurrency 1,8 --time-limit 10
     python benchmarks/serve_load.py --batching on --malformed 0   (one server, no bad requests)
     python benchmarks/serve_load.py --server-arg=--max-batch=128 --server-arg=--threads=1
     python benchmarks/serve_load.py --requests 2000 --concurrency 64 --batching on --workers 2
                                       (the hostile run: 10% malformed, 64 clients)
     python benchmarks/serve_load.py --requests 1000 --malformed 0 --workers 2   (the ratio)
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
    closed: int = 0  # malformed requests of a raw kind whose connection the server closed
    held: int = 0  # ... that the server still held open after the wait (a failure)
    wrong: int = 0  # answers 2xx to a good request that differ from the model's (a failure)
    kinds: set[str] = field(default_factory=set)  # the malformed kinds sent
    rss_mb: tuple[float, float] = (math.nan, math.nan)  # the server's memory before, at peak

    @property
    def answered(self) -> int:
        return sum(self.status.values())

    def per_request_ms(self, cpu_s: float | None) -> float:
        return 1000 * cpu_s / self.answered if cpu_s is not None and self.answered else math.nan

    def count(self, bad: bool, code: int, latency_s: float | None = None) -> None:
        if latency_s is not None:
            self.latencies_ms.append(1000 * latency_s)
        self.status[f"{code // 100}xx" if 2 <= code // 100 <= 5 else "5xx"] += 1
        if bad and code < 300:
            self.malformed_accepted += 1

    def count_raw(self, outcome: str) -> None:
        """A raw kind's outcome: a status class, "closed" or "held"."""
        if outcome in self.status:
            self.count(True, int(outcome[0]) * 100)
        elif outcome == "closed":
            self.closed += 1
        else:
            self.held += 1

    @property
    def failures(self) -> int:
        return (
            self.status["5xx"] + self.transport_errors + self.malformed_accepted
            + self.held + self.wrong
        )  # fmt: skip


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


# The malformed requests, by kind: (kind, body) for those sent as HTTP by the generator, and the
# raw-socket kinds below (headers and slow clients, which no HTTP client library sends).
BODY_KINDS = (
    "bad-json",
    "no-query",
    "candidates-not-a-list",
    "top-k-0",
    "unknown-model",
    "number-as-candidate",
    "body-over-1mb",
    "lone-surrogate-candidate",
    "lone-surrogate-query",
    "unknown-field",
    "array-body",
)
RAW_KINDS = (
    "header-200kb",
    "endless-header-40mb",
    "500-headers",
    "slowloris-half-headers",
    "slow-body",
    "foreign-host",
    "not-http",
)
KINDS = BODY_KINDS + RAW_KINDS


def malformed_request(kind: str, query: str, candidates: list[str]) -> bytes:
    """The body of one malformed /v1/rank request of a body kind."""
    bodies: dict[str, Any] = {
        "no-query": {"candidates": candidates},
        "candidates-not-a-list": {"query": query, "candidates": "not a list"},
        "top-k-0": {"query": query, "candidates": candidates, "top_k": 0},
        "unknown-model": {"model": "no-such-model", "query": query, "candidates": candidates},
        "number-as-candidate": {"query": query, "candidates": [*candidates[:-1], 7]},
        "body-over-1mb": {"query": query, "candidates": ["x" * 1_100_000]},  # max_request_bytes
        "unknown-field": {"query": query, "candidate": candidates},
    }
    if kind in bodies:
        return encode(bodies[kind])
    if kind == "bad-json":
        return b'{"query": "unterminated'
    if kind == "array-body":
        return encode([query, candidates])
    # a lone surrogate: json.dumps (ASCII) writes it as JSON's escape, valid JSON but no UTF-8
    if kind == "lone-surrogate-candidate":
        return json.dumps({"query": query, "candidates": [*candidates[:-1], "\ud800"]}).encode()
    return json.dumps({"query": query + "\udfff", "candidates": candidates}).encode()


def _request_head(extra: bytes = b"", length: int = 0) -> bytes:
    return (
        b"POST /v1/rank HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + b"Content-Length: %d\r\n" % length
        + extra
    )


async def raw_request(host: str, port: int, kind: str, body: bytes, wait_s: float) -> str:
    """Sends one malformed request of a raw kind on its own connection: "4xx" (or another
    class) for the status the server answered, "closed" when it closed the connection without
    one, "held" when it kept it open for `wait_s` without either."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        try:
            if kind == "header-200kb":
                writer.write(_request_head(b"X-Big: " + b"a" * 200_000 + b"\r\n"))
            elif kind == "endless-header-40mb":
                writer.write(_request_head(b"X-Endless: "))
                for _ in range(40 * 16):  # 40 MB in 64 KB writes, until the server closes
                    writer.write(b"a" * 65_536)
                    await writer.drain()
            elif kind == "500-headers":
                writer.write(_request_head(b"".join(b"X-%d: 1\r\n" % i for i in range(500))))
            elif kind == "slowloris-half-headers":
                writer.write(b"POST /v1/rank HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            elif kind == "slow-body":
                writer.write(_request_head(b"\r\n", len(body)) + body[: len(body) // 2])
            elif kind == "foreign-host":
                head = _request_head(b"\r\n", len(body)).replace(b"127.0.0.1", b"rebound.example")
                writer.write(head + body)
            else:  # not-http
                writer.write(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not a request\r\n\r\n")
            await writer.drain()
        except (ConnectionError, OSError):
            pass  # the server closed it while we wrote: read what it answered, if anything
        try:
            answer = await asyncio.wait_for(reader.read(64), wait_s)
        except TimeoutError:
            return "held"
        except (ConnectionError, OSError):
            return "closed"
        match = re.match(rb"HTTP/1\.1 (\d)\d\d ", answer)
        return f"{match[1].decode()}xx" if match else "closed"
    finally:
        writer.close()


HEADERS = {"content-type": "application/json"}


@dataclass(frozen=True)
class Item:
    """One request of a plan: a malformed `kind` (None: good), its body, and for a good one its
    candidates and the model's scores for them (`reference`), to check the answer against."""

    kind: str | None
    body: bytes
    candidates: list[str] | None = None
    reference: np.ndarray | None = None


Plan = list[Item]
Post = Callable[[bytes], Awaitable[tuple[int, bytes]]]


def answer_is_right(content: bytes, item: Item) -> bool:
    """Whether a /v1/rank answer holds every candidate once, its own text, the model's score
    (within float noise of batching) and best first."""
    assert item.candidates is not None and item.reference is not None
    try:
        results = json.loads(content)["results"]
        order = [r["index"] for r in results]
        scores = np.array([r["score"] for r in results], dtype=np.float64)
        texts = [r["text"] for r in results]
    except (ValueError, KeyError, TypeError):
        return False
    if sorted(order) != list(range(len(item.candidates))):
        return False
    reference = item.reference[order]
    return (
        texts == [item.candidates[i] for i in order]
        and bool(np.all(np.abs(scores - reference) <= 1e-4 + 1e-4 * np.abs(reference)))
        and bool(np.all(np.diff(scores) <= 1e-6))
    )


async def _drive(
    row: Row,
    plan: Plan,
    concurrency: int,
    deadline: float,
    post: Post,
    transport_errors: tuple[type[BaseException], ...],
    address: tuple[str, int],
    raw_wait_s: float,
) -> None:
    """`concurrency` workers send the plan's requests (with `post`, which returns the status
    and body, or on a socket of their own for the raw kinds) until the plan is spent or the
    deadline passes, counting each answer into `row`."""
    queue = iter(plan)

    async def worker() -> None:
        for item in queue:
            if time.perf_counter() > deadline:
                return
            if item.kind in RAW_KINDS:
                row.kinds.add(item.kind)
                row.count_raw(await raw_request(*address, item.kind, item.body, raw_wait_s))
                continue
            start = time.perf_counter()
            try:
                code, content = await post(item.body)
            except transport_errors:
                row.transport_errors += 1
                continue
            row.count(item.kind is not None, code, time.perf_counter() - start)
            if item.kind is not None:
                row.kinds.add(item.kind)
            elif code < 300 and item.reference is not None and not answer_is_right(content, item):
                row.wrong += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _aiohttp_load(
    row: Row, url: str, plan: Plan, concurrency: int, deadline: float, raw_wait_s: float
) -> None:
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(url, connector=connector, timeout=timeout) as session:

        async def post(body: bytes) -> tuple[int, bytes]:
            async with session.post("/v1/rank", data=body, headers=HEADERS) as response:
                return response.status, await response.read()

        errors = (aiohttp.ClientError, TimeoutError)
        await _drive(row, plan, concurrency, deadline, post, errors, _address(url), raw_wait_s)


async def _httpx_load(
    row: Row, url: str, plan: Plan, concurrency: int, deadline: float, raw_wait_s: float
) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def post(body: bytes) -> tuple[int, bytes]:
            response = await client.post("/v1/rank", content=body, headers=HEADERS)
            return response.status_code, response.content

        errors = (httpx.HTTPError,)
        await _drive(row, plan, concurrency, deadline, post, errors, _address(url), raw_wait_s)


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


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


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (the worker processes of `serve --workers N`), from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += parents.get(tree[-1], [])
    return tree


def cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU seconds of this process, or of process `pid` and its descendants
    (Linux /proc; else None)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    total = 0.0
    for member in process_tree(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None if member == pid else total
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    return total


def rss_mb(pid: int) -> float:
    """The resident memory of process `pid` and its descendants, in MB (/proc; NaN elsewhere)."""
    total = 0
    for member in process_tree(pid):
        try:
            status = Path(f"/proc/{member}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(match[1]) if match else 0
    return total / 1024 if total else math.nan


async def _peak_rss(pid: int, peak: list[float], stop: asyncio.Event) -> None:
    """Samples `rss_mb(pid)` every 0.25 s into `peak[0]` until `stop` is set."""
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(rss_mb, pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.25)
        except TimeoutError:
            pass


Pool = list[tuple[str, list[str], np.ndarray | None]]  # (query, candidates, reference scores)


def request_pool(
    questions: list[str], sentences: list[str], candidates: int, size: int, seed: int
) -> Pool:
    """`size` distinct good requests, without their reference scores yet."""
    rng = random.Random(seed)
    return [(rng.choice(questions), rng.sample(sentences, candidates), None) for _ in range(size)]


def with_references(pool: Pool, model: str) -> Pool:
    """The pool with each request's scores from `Matcher.score` in this process (one request
    a call, as an unbatched server computes them)."""
    from attnmatch.matcher import load_matcher

    matcher = load_matcher(model)
    return [(q, texts, matcher.score([(q, t) for t in texts])) for q, texts, _ in pool]


def make_plan(pool: Pool, requests: int, malformed: float, seed: int) -> Plan:
    """`requests` requests drawn from `pool`; exactly ceil(malformed x requests) of them
    malformed, at random places, their kinds in turn (every kind once before any twice)."""
    rng = random.Random(seed)
    bad = rng.sample(range(requests), math.ceil(malformed * requests))
    kinds = dict(zip(bad, [KINDS[i % len(KINDS)] for i in range(len(bad))], strict=True))
    plan: Plan = []
    for i in range(requests):
        query, texts, reference = rng.choice(pool)
        kind = kinds.get(i)
        if kind is None:
            body = encode({"query": query, "candidates": texts})
            plan.append(Item(None, body, texts, reference))
        elif kind in BODY_KINDS:
            plan.append(Item(kind, malformed_request(kind, query, texts)))
        else:
            plan.append(Item(kind, encode({"query": query, "candidates": texts})))
    return plan


async def run_load(
    url: str,
    *,
    client: str = "aiohttp",
    server_pid: int | None = None,
    batching: str,
    concurrency: int,
    plan: Plan,
    time_limit: float,
    raw_wait_s: float,
) -> Row:
    """Sends the plan's /v1/rank requests from `concurrency` clients (fewer at the time limit)."""
    row = Row(batching=batching, concurrency=concurrency)
    server_before, client_before = cpu_seconds(server_pid), cpu_seconds()
    peak = [rss_mb(server_pid) if server_pid else math.nan]
    stop = asyncio.Event()
    sampler = asyncio.create_task(_peak_rss(server_pid, peak, stop)) if server_pid else None
    before = peak[0]
    start = time.perf_counter()
    await CLIENTS[client](row, url, plan, concurrency, start + time_limit, raw_wait_s)
    row.wall_s = time.perf_counter() - start
    server_after, client_after = cpu_seconds(server_pid), cpu_seconds()
    stop.set()
    if sampler is not None:
        await sampler
    row.rss_mb = (before, peak[0])
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
        f"{'srv cpu':>8} {'gen cpu':>8} {'pairs/fwd':>9} {'closed':>6} {'held':>4} {'wrong':>5} "
        f"{'kinds':>5} {'MB before':>9} {'MB peak':>8}"
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
            f"{r.pairs_per_forward or math.nan:>9.1f} {r.closed:>6} {r.held:>4} {r.wrong:>5} "
            f"{len(r.kinds):>5} {r.rss_mb[0]:>9.0f} {r.rss_mb[1]:>8.0f}"
        )
    print(
        "srv cpu, gen cpu: CPU ms per answered request of the server and of the load generator; "
        "pairs/fwd: the mean pairs of a forward pass; closed: malformed requests whose "
        "connection the server closed without an answer; held: ... it kept open (a failure); "
        "wrong: good requests answered with another ranking or score; kinds: malformed kinds "
        "sent; MB: the server's resident memory (all its processes) before the row and at peak"
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
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes of the batched server"
    )
    parser.add_argument(
        "--raw-wait",
        type=float,
        default=50,
        help="seconds a raw malformed request waits for an answer or a close (the server's "
        "header and body timeouts are 10 s and 30 s)",
    )
    parser.add_argument("--pool", type=int, default=200, help="distinct good requests")
    parser.add_argument(
        "--no-check", action="store_true", help="do not check answers against Matcher.score"
    )
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
    pool = request_pool(questions, sentences, args.candidates, args.pool, args.seed)
    if not args.no_check:
        pool = with_references(pool, model)
    modes = {"both": ("on", "off"), "on": ("on",), "off": ("off",)}[args.batching]
    rows: list[Row] = []
    for mode in modes:
        server = Server(
            model,
            batching=mode == "on",
            startup_s=args.startup,
            extra=(*args.server_arg, *(["--workers", str(args.workers)] if mode == "on" else [])),
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
                        plan=make_plan(pool, args.requests, args.malformed, args.seed + i),
                        time_limit=args.time_limit,
                        raw_wait_s=args.raw_wait,
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
        f"{args.client} generator; server options {' '.join(args.server_arg) or '(defaults)'}; "
        f"batched server: {args.workers} worker process(es); answers checked: {not args.no_check}; "
        f"{len(KINDS)} malformed kinds" + (f" from {args.server_src}" if args.server_src else "")
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
                "closed": r.closed,
                "held": r.held,
                "wrong": r.wrong,
                "kinds": sorted(r.kinds),
                "rss_mb_before": r.rss_mb[0],
                "rss_mb_peak": r.rss_mb[1],
            }
            for r in rows
        ]
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if any(r.failures for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
