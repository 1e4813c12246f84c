"""Chat completions through the `openai` package, with our own retries, budgets and cancellation.

* Retries (the SDK's own are off): 429, 5xx, timeouts and connection errors, up to
  `max_retries` times with exponential backoff; a `Retry-After` / `retry-after-ms` header wins
  (capped by `max_backoff_s` and by the time budget).  Other 4xx fail at once with a message that
  says what to fix (401: the key variable; 404: the base URL or model).
* Cancellation: each request runs in a daemon thread while the caller polls the cancel event, so
  a cancel returns within ~50 ms even mid-request; the HTTP client is then closed (which drops
  the connection) and `LlmCancelled` is raised.  Backoff waits on the event too.
* Budgets: a deadline (monotonic) caps each request's timeout and every wait; a token budget
  stops further requests once the reported usage reaches it.
* Every attempt (request messages and parameters, then the reply or the error) goes to the
  `recorder` callback for the run store.  No key in there: the messages, the reply and every
  error text pass through `redact`.
* Sizes (limits.py): a request's messages are cut to MAX_PROMPT_CHARS; reading a reply stops
  after MAX_REPLY_BYTES of HTTP body, and a reply over MAX_REPLY_CHARS is not used: `chat`
  returns it as a failed reply (`ChatReply.refused` says why) that the agents treat like a
  malformed one (retried with the reason, then the built-in candidate stays).
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelstitch.agents.llm.config import LlmConfig, redact, resolve_api_key
from kernelstitch.agents.llm.errors import (
    LlmBudgetExceeded,
    LlmCancelled,
    LlmConfigError,
    LlmError,
    LlmUnavailable,
)
from kernelstitch.agents.llm.limits import (
    MAX_ERROR_CHARS,
    MAX_REPLY_BYTES,
    MAX_REPLY_CHARS,
    bound_messages,
    clip,
)

POLL_S = 0.05
MIN_REQUEST_S = 1.0  # below this much time left, a request is not started


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    requests: int = 0

    def add(self, other: dict[str, int]) -> None:
        self.prompt_tokens += other.get("prompt_tokens", 0)
        self.completion_tokens += other.get("completion_tokens", 0)
        self.total_tokens += other.get("total_tokens", 0)


@dataclass(frozen=True)
class ChatReply:
    text: str
    finish_reason: str | None
    usage: dict[str, int]
    model: str | None
    attempts: int
    elapsed_s: float
    refused: str | None = None  # why the reply cannot be used (too long); `text` is a stub


@dataclass
class Exchange:
    """One HTTP attempt, as stored in the run store (kind "prompt")."""

    purpose: str  # planner / coder
    label: str  # e.g. "planner-1", "coder-3"
    attempt: int
    request: dict[str, Any]
    reply: dict[str, Any] | None = None
    error: str | None = None
    status_code: int | None = None
    elapsed_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


Recorder = Callable[[Exchange], None]


class LlmClient:
    """See the module docstring.  One instance per LLM session (planner + coder)."""

    def __init__(
        self,
        config: LlmConfig,
        *,
        cancel: threading.Event | None = None,
        deadline: float | None = None,
        recorder: Recorder | None = None,
        environ: dict[str, str] | None = None,
        meta: dict[str, Any] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        config.validate()
        self.on_retry = on_retry  # told before each backoff wait (the CLI was silent for 15-40 s)
        api_key, self.key_note = resolve_api_key(config, environ)
        self.config = config
        self.cancel = cancel or threading.Event()
        self.deadline = deadline
        self.recorder = recorder
        self.meta = dict(meta or {})
        self.usage = Usage()
        self._secret = api_key
        self._json_mode = config.json_mode
        self._closed = False
        try:
            import openai
        except ImportError:
            raise LlmConfigError("the LLM coder needs the openai package: pip install "
                                 "'kernelstitch[llm]' (or pip install openai)") from None
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=api_key, base_url=config.endpoint, timeout=config.timeout_s,
            max_retries=0, http_client=openai.DefaultHttpxClient(
                event_hooks={"response": [_cap_body(MAX_REPLY_BYTES)]}),
        )

    def __repr__(self) -> str:  # never the key
        return f"LlmClient({self.config.describe()})"

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- public -----------------------------------------------------------------------------

    def chat(self, messages: list[dict[str, str]], *, purpose: str, label: str,
             json_mode: bool = False) -> ChatReply:
        """One completion, retried as the module docstring says.  Raises LlmCancelled,
        LlmBudgetExceeded, LlmUnavailable or LlmError with a message for the user."""
        cfg = self.config
        started = time.monotonic()
        failures: list[str] = []
        attempt = 0
        while True:
            attempt += 1
            self._check_cancel()
            timeout = self._request_timeout()
            self._check_tokens()
            kwargs = self._request_kwargs(messages, json_mode and self._json_mode)
            exchange = Exchange(purpose, label, attempt, self._request_record(kwargs, timeout),
                                meta=self.meta)
            t0 = time.monotonic()
            try:
                response = self._call(kwargs, timeout)
            except LlmCancelled:
                exchange.error = "cancelled while waiting for the reply"
                exchange.elapsed_s = time.monotonic() - t0
                self._record(exchange)
                raise
            except Exception as exc:  # noqa: BLE001 - classified below
                exchange.elapsed_s = time.monotonic() - t0
                too_large = _too_large(exc)
                if too_large is not None:  # a failed reply, not a failed request
                    exchange.error = too_large.message
                    self._record(exchange)
                    return self._refused(too_large.message, too_large.size // 4, attempt,
                                         time.monotonic() - started)
                status = getattr(exc, "status_code", None)
                message = self._describe(exc)
                exchange.error, exchange.status_code = message, status
                self._record(exchange)
                if (status == 400 and kwargs.get("response_format") is not None):
                    # Servers without JSON mode: ask again without it (not counted as a retry).
                    self._json_mode = False
                    attempt -= 1
                    continue
                if not self._retryable(exc) or attempt > cfg.max_retries:
                    raise self._final_error(exc, message, attempt, failures) from None
                failures.append(message)
                self._backoff(exc, attempt)
                continue
            exchange.elapsed_s = time.monotonic() - t0
            try:
                reply, text = self._reply(response, attempt, time.monotonic() - started)
            except LlmError as exc:
                exchange.error = str(exc)
                self._record(exchange)
                raise
            exchange.reply = {"text": clip(text, MAX_REPLY_CHARS),
                              "finish_reason": reply.finish_reason, "usage": reply.usage,
                              "model": reply.model}
            exchange.error = reply.refused
            self._record(exchange)
            return reply

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):  # closing is best effort
                self._client.close()

    def redact(self, text: str) -> str:
        return redact(text, self._secret)

    def remaining_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    # ---- one attempt ------------------------------------------------------------------------

    def _request_kwargs(self, messages: list[dict[str, str]], json_mode: bool) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.config.model,
                                  "messages": bound_messages(messages)}
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if self.config.max_tokens is not None:
            kwargs["max_tokens"] = self.config.max_tokens
        if json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def _request_record(self, kwargs: dict[str, Any], timeout: float) -> dict[str, Any]:
        params = {k: v for k, v in kwargs.items() if k != "messages"}
        return {"endpoint": self.config.endpoint, "params": params, "timeout_s": timeout,
                "messages": [{"role": m["role"], "content": self.redact(m["content"])}
                             for m in kwargs["messages"]]}

    def _call(self, kwargs: dict[str, Any], timeout: float) -> Any:
        box: dict[str, Any] = {}
        done = threading.Event()
        client = self._client.with_options(timeout=timeout)

        def run() -> None:
            try:
                box["response"] = client.chat.completions.create(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        thread = threading.Thread(target=run, name="kernelstitch-llm-request", daemon=True)
        thread.start()
        self.usage.requests += 1
        while not done.wait(POLL_S):
            if self.cancel.is_set():
                self.close()  # drops the connection; the thread ends on its own
                raise LlmCancelled("cancelled while waiting for the LLM's reply")
        if "error" in box:
            raise box["error"]
        return box["response"]

    def _reply(self, response: Any, attempt: int, elapsed: float) -> tuple[ChatReply, str]:
        """(the reply, its full redacted text: the reply's own is a stub when refused)."""
        choices = getattr(response, "choices", None)
        if not choices:
            raise LlmError(f"the LLM endpoint {self.config.endpoint} returned no choices "
                           "(an empty or malformed chat-completions response)")
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        if not isinstance(text, str):
            text = str(text)
        text = self.redact(text)  # a server echoing the key must not put it in a file
        usage_obj = getattr(response, "usage", None)
        usage = {}
        if usage_obj is not None:
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                value = getattr(usage_obj, key, None)
                if isinstance(value, int):
                    usage[key] = value
        if "total_tokens" not in usage:  # servers that report nothing: estimate (4 chars/token)
            usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get(
                "completion_tokens", max(1, len(text) // 4))
            usage["estimated"] = 1
        self.usage.add(usage)
        refused, used = None, text
        if len(text) > MAX_REPLY_CHARS:
            refused = (f"the reply was too long ({len(text):,} chars; the limit is "
                       f"{MAX_REPLY_CHARS:,}) and was not used: answer again, much shorter")
            used = f"[reply not used: {len(text):,} chars, over the {MAX_REPLY_CHARS:,} limit]"
        return ChatReply(text=used, finish_reason=getattr(choice, "finish_reason", None),
                         usage=usage, model=getattr(response, "model", None), attempts=attempt,
                         elapsed_s=elapsed, refused=refused), text

    def _refused(self, why: str, tokens: int, attempt: int, elapsed: float) -> ChatReply:
        """A reply whose body was too large to read: a failed reply (its tokens are counted,
        estimated from the body's size)."""
        usage = {"completion_tokens": tokens, "total_tokens": tokens, "estimated": 1}
        self.usage.add(usage)
        return ChatReply(text=f"[reply not used: {why}]", finish_reason="too_long", usage=usage,
                         model=None, attempts=attempt, elapsed_s=elapsed, refused=why)

    # ---- budgets, cancellation, retries ----------------------------------------------------

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise LlmCancelled("cancelled")

    def _request_timeout(self) -> float:
        timeout = self.config.timeout_s
        remaining = self.remaining_s()
        if remaining is not None:
            if remaining < MIN_REQUEST_S:
                raise LlmBudgetExceeded(
                    f"the LLM time budget ({self.config.time_budget_s:.0f} s) is spent")
            timeout = min(timeout, remaining)
        return timeout

    def _check_tokens(self) -> None:
        budget = self.config.token_budget
        if budget and self.usage.total_tokens >= budget:
            raise LlmBudgetExceeded(f"the LLM token budget ({budget} tokens) is spent "
                                    f"({self.usage.total_tokens} used)")

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, (o.APITimeoutError, o.APIConnectionError)):
            return not self._closed
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status == 429 or status >= 500 or status == 408)

    def _backoff(self, exc: Exception, attempt: int) -> None:
        cfg = self.config
        delay = retry_after_s(getattr(exc, "response", None))
        if delay is None:
            delay = cfg.backoff_s * (2 ** (attempt - 1))
        delay = min(max(delay, 0.0), cfg.max_backoff_s)
        remaining = self.remaining_s()
        if remaining is not None and delay > remaining - MIN_REQUEST_S:
            raise LlmBudgetExceeded(
                f"the LLM time budget ({cfg.time_budget_s:.0f} s) ends before the endpoint "
                f"asks to be retried ({delay:.1f} s)")
        if self.on_retry is not None:
            self.on_retry(f"LLM: {self._describe(exc)}; retry {attempt} of {cfg.max_retries} in {delay:.1f} s")
        if self.cancel.wait(delay):
            raise LlmCancelled("cancelled while waiting to retry the LLM request")

    def _describe(self, exc: Exception) -> str:
        """A one-line, key-free description of a failed attempt."""
        o = self._openai
        url = self.config.endpoint
        if isinstance(exc, o.APITimeoutError):
            return f"no reply from {url} within the request timeout"
        if isinstance(exc, o.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f": {cause}" if cause else ""
            return self.redact(f"cannot connect to {url}{detail}")
        status = getattr(exc, "status_code", None)
        if status is not None:
            body = _error_text(exc)
            return self.redact(f"HTTP {status} from {url}" + (f": {body}" if body else ""))
        return clip(self.redact(f"{type(exc).__name__}: {exc}"), MAX_ERROR_CHARS)

    def _final_error(self, exc: Exception, message: str, attempts: int,
                     failures: list[str]) -> LlmError:
        o = self._openai
        cfg = self.config
        status = getattr(exc, "status_code", None)
        tries = f" ({attempts} attempt{'s' if attempts > 1 else ''})"
        if isinstance(exc, o.APIConnectionError) and not isinstance(exc, o.APITimeoutError):
            return LlmUnavailable(
                f"cannot reach the LLM endpoint {cfg.endpoint}{tries}: {message}. Is the server "
                "running and is the base URL right (--llm-base-url / kernelstitch.llm.baseUrl; "
                "OpenAI-compatible servers usually end in /v1)?")
        if isinstance(exc, o.APITimeoutError):
            return LlmUnavailable(f"the LLM endpoint {cfg.endpoint} did not answer within "
                                  f"{cfg.timeout_s:.0f} s{tries} (raise --llm-timeout / "
                                  "llm.timeout_s for slow local models)")
        if status in (401, 403):
            where = (f"the key in ${cfg.api_key_env}" if cfg.api_key_env
                     else "no key (llm.api_key_env is empty)")
            return LlmConfigError(f"the LLM endpoint refused {where}: {message}")
        if status == 404:
            return LlmConfigError(
                f"{message}. Check the base URL ({cfg.endpoint}; OpenAI-compatible servers "
                f"usually end in /v1) and that the server serves the model {cfg.model!r}")
        if status == 429:
            return LlmUnavailable(f"rate-limited by {cfg.endpoint}{tries}: {message}")
        if isinstance(status, int) and status >= 500:
            return LlmUnavailable(f"the LLM endpoint kept failing{tries}: {message}")
        if status is not None:
            return LlmError(f"the LLM endpoint refused the request: {message}")
        if isinstance(exc, (o.APIResponseValidationError, ValueError)):
            return LlmError(f"malformed response from {cfg.endpoint} (not an OpenAI "
                            f"chat-completions reply; is the base URL right?): {message}")
        return LlmError(f"LLM request failed: {message}")

    def _record(self, exchange: Exchange) -> None:
        if self.recorder is not None:
            with contextlib.suppress(Exception):  # storing must never break a request
                self.recorder(exchange)


class ReplyTooLarge(Exception):
    """Raised while reading an HTTP body larger than the limit (see `_cap_body`)."""

    def __init__(self, size: int, limit: int, *, known: bool) -> None:
        self.size = size
        amount = f"{size:,} bytes" if known else f"more than {limit:,} bytes"
        self.message = (f"the reply was too long ({amount} of HTTP body; the limit is "
                        f"{limit:,}) and was not read: answer again, much shorter")
        super().__init__(self.message)


def _cap_body(limit: int) -> Callable[[Any], None]:
    """An httpx response hook: refuse a body announced larger than `limit`, and stop reading
    one that turns out larger (the hook runs before the body is read)."""
    def hook(response: Any) -> None:
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            raise ReplyTooLarge(int(length), limit, known=True)
        base = getattr(sys.modules[type(response).__module__.partition(".")[0]],
                       "SyncByteStream", None)  # httpx or httpx2, whichever openai uses
        if base is not None and isinstance(response.stream, base):
            response.stream = _capped_stream_type(base)(response.stream, limit)
    return hook


@functools.cache
def _capped_stream_type(base: type) -> type:
    class CappedStream(base):  # type: ignore[misc, valid-type]
        def __init__(self, inner: Any, limit: int) -> None:
            self._inner, self._limit = inner, limit

        def __iter__(self) -> Iterator[bytes]:
            read = 0
            for chunk in self._inner:
                read += len(chunk)
                if read > self._limit:
                    raise ReplyTooLarge(read, self._limit, known=False)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    return CappedStream


def _too_large(exc: BaseException | None) -> ReplyTooLarge | None:
    """The ReplyTooLarge behind `exc` (the SDK may wrap it in a connection error)."""
    for _ in range(5):
        if exc is None or isinstance(exc, ReplyTooLarge):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def retry_after_s(response: Any) -> float | None:
    """Seconds from `retry-after-ms` / `Retry-After` (seconds or an HTTP date), else None."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            seconds = float(ms) / 1000.0
            return seconds if math.isfinite(seconds) else None
        value = headers.get("retry-after")
    except Exception:  # noqa: BLE001 - odd header containers
        return None
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_text(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        return str(inner)[:500]
    if isinstance(body, str):
        return body[:500]
    message = getattr(exc, "message", None) or str(exc)
    return str(message)[:500]
