"""What the HTTP side of `attnmatch serve` bounds before a request reaches the app.

uvicorn bounds the body only through the app, and with httptools it bounds neither the size nor
the number of request headers, nor how long a client may take to send them: a never-ending
header grows the server's memory, and half-sent requests hold connections open (slowloris).
`LimitedHttpTools` is uvicorn's httptools protocol with these bounds added:

- the request line and headers together at most `max_header_bytes` (counted as they arrive, so an
  endless header costs at most this plus one read), at most `max_headers` headers: 431 and close;
- the request line and headers within `header_timeout_s` of the connection's first byte or of a
  keep-alive request's first byte: 408 and close (a connection that sent nothing is closed).

The keep-alive timeout is uvicorn's own (`timeout_keep_alive`), the body's is the app's
(`ServeSettings.body_timeout_s`). Without httptools, uvicorn's h11 protocol bounds the headers'
size (`h11_max_incomplete_event_size`) but not their time; `protocol_options` picks.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("attnmatch.serve")


@dataclass(frozen=True, kw_only=True)
class HttpLimits:
    """The bounds of the HTTP layer (docs/serving.md, "Limits").

    Args:
        max_header_bytes: the request line and headers of one request, in bytes.
        max_headers: the number of headers of one request.
        header_timeout_s: seconds from a request's first byte to the end of its headers.
        keep_alive_s: seconds an idle keep-alive connection stays open (uvicorn's).
    """

    max_header_bytes: int = 16_384
    max_headers: int = 100
    header_timeout_s: float = 10.0
    keep_alive_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("max_header_bytes", "max_headers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("header_timeout_s", "keep_alive_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
                raise ValueError(f"{name} must be a number of seconds > 0, got {value!r}")


_limits = HttpLimits()


def use_limits(limits: HttpLimits) -> None:
    """Sets the bounds of the connections this process accepts from now on (each worker process
    sets them as it builds its app)."""
    global _limits
    _limits = limits


def protocol_options(limits: HttpLimits) -> dict[str, Any]:
    """The `uvicorn.Config` options that apply `limits`: the bounded httptools protocol, or h11
    with its header-size bound when httptools is not installed."""
    use_limits(limits)
    options: dict[str, Any] = {"timeout_keep_alive": limits.keep_alive_s}
    try:
        import httptools  # noqa: F401
    except ImportError:
        log.warning("httptools is not installed: request headers have no time limit")
        return {**options, "http": "h11", "h11_max_incomplete_event_size": limits.max_header_bytes}
    return {**options, "http": "attnmatch.serving.limits:LimitedHttpTools"}


class _HeaderLimit(Exception):
    """Raised from the parser's header callback: 431 with this message."""


try:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - the serve extra installs both
    HttpToolsProtocol = object  # type: ignore[misc, assignment]


class LimitedHttpTools(HttpToolsProtocol):  # type: ignore[misc, valid-type]
    """uvicorn's httptools protocol with bounded headers and a header timeout (module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = _limits
        self._in_headers = True  # until the current request's headers are complete
        self._header_bytes = 0  # bytes received while in the headers
        self._header_count = 0
        self._header_size = 0  # the request's headers so far, as parsed
        self._header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_headers:
            self._header_bytes += len(data)
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as error:
            cause = error.__context__
            if isinstance(cause, _HeaderLimit):
                self._refuse(431, str(cause))
            else:
                self._refuse(400, "Invalid HTTP request received.")
            return
        if self._in_headers and self._header_bytes > self.limits.max_header_bytes:
            self._refuse(431, self._too_large())

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_header_bytes:
            raise _HeaderLimit(self._too_large())

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            raise _HeaderLimit(f"more than {self.limits.max_headers} request headers")
        self._header_size += len(name) + len(value) + 4  # ": " and CRLF
        if len(self.url) + self._header_size > self.limits.max_header_bytes:
            raise _HeaderLimit(self._too_large())
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers, self._header_bytes = True, 0
        self._header_count = self._header_size = 0

    # ----------------------------------------------------------------- internals

    def _too_large(self) -> str:
        return f"the request headers are larger than {self.limits.max_header_bytes} bytes"

    def _arm_header_timer(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(
                self.limits.header_timeout_s, self._header_timeout
            )

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or not self._in_headers:
            return
        if self._header_bytes:  # a request begun and not finished: say why
            self._refuse(408, "the request headers took too long")
        else:  # nothing sent: a connection held open for nothing
            self.transport.close()

    def _refuse(self, status: int, message: str) -> None:
        """Answers `status` with `message` as plain text and closes the connection."""
        self._disarm_header_timer()
        if self.transport.is_closing():
            return
        reason = {400: b"Bad Request", 408: b"Request Timeout"}.get(
            status, b"Request Header Fields Too Large"
        )
        body = message.encode("ascii", "replace")
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (status, reason, len(body), body)
        )
        self.transport.close()
