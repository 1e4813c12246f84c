"""The LLM client and settings against a real loopback HTTP server speaking the OpenAI API,
through the real `openai` package: retries, budgets, cancellation, errors, secrets."""

from __future__ import annotations

import io
import logging
import threading
import time

import pytest
from kernelstitch.agents.llm.client import LlmClient, retry_after_s
from kernelstitch.agents.llm.config import (
    NO_KEY_PLACEHOLDER,
    LlmConfig,
    redact,
    resolve_api_key,
)
from kernelstitch.agents.llm.errors import (
    LlmBudgetExceeded,
    LlmCancelled,
    LlmConfigError,
    LlmError,
    LlmUnavailable,
)
from llm_scripts import KEY_ENV, SECRET
from llm_scripts import stub_client as make_client
from llm_stub_server import StubLLM, closed_port

HELLO = [{"role": "user", "content": "hello"}]
# Bounds for "returned promptly": far below the 30 s the stub would otherwise hold a reply (or
# the endpoint asks to wait), far above what a loaded 2-core CI machine needs.
PROMPT_S = 15.0


@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


def test_429_is_retried_after_the_retry_after_delay(stub):
    stub.error(429, "rate limited", headers={"Retry-After": "0.4"}).reply("done")
    records = []
    client = make_client(stub, records, backoff_s=30.0)  # the header wins over the backoff
    start = time.monotonic()
    reply = client.chat(HELLO, purpose="test", label="t")
    elapsed = time.monotonic() - start
    assert reply.text == "done" and reply.attempts == 2
    assert 0.4 <= elapsed < PROMPT_S
    assert len(stub.chat_requests()) == 2
    assert records[0].status_code == 429 and "HTTP 429" in records[0].error
    assert records[1].reply["text"] == "done" and records[1].attempt == 2


def test_500_then_success_with_exponential_backoff(stub):
    stub.error(500, "boom").error(503, "busy").reply("ok")
    client = make_client(stub, backoff_s=0.1)
    start = time.monotonic()
    reply = client.chat(HELLO, purpose="test", label="t")
    assert reply.text == "ok" and reply.attempts == 3
    assert time.monotonic() - start >= 0.1 + 0.2  # 0.1 s, then doubled


def test_persistent_500_fails_with_a_clear_message(stub):
    for _ in range(3):
        stub.error(500, "internal failure")
    client = make_client(stub, max_retries=2, backoff_s=0.01)
    with pytest.raises(LlmUnavailable) as info:
        client.chat(HELLO, purpose="test", label="t")
    message = str(info.value)
    assert "kept failing (3 attempts)" in message and "HTTP 500" in message
    assert "internal failure" in message and stub.base_url in message


def cancel_when(event: threading.Event, cancel: threading.Event) -> threading.Thread:
    """Set `cancel` shortly after `event` (the request reached the server)."""
    thread = threading.Thread(target=lambda: (event.wait(20), time.sleep(0.2), cancel.set()),
                              daemon=True)
    thread.start()
    return thread


def test_cancel_mid_request_returns_promptly(stub):
    stub.reply("too late", delay_s=30)
    cancel = threading.Event()
    client = make_client(stub)
    client.cancel = cancel
    canceller = cancel_when(stub.request_arrived, cancel)
    start = time.monotonic()
    with pytest.raises(LlmCancelled):
        client.chat(HELLO, purpose="test", label="t")
    assert stub.request_arrived.is_set()  # it really was mid-request
    assert time.monotonic() - start < PROMPT_S  # not the 30 s the reply is held
    canceller.join(5)


def test_cancel_during_backoff_returns_promptly(stub):
    stub.error(429, headers={"Retry-After": "30"})
    cancel = threading.Event()
    client = make_client(stub, max_backoff_s=60)
    client.cancel = cancel
    canceller = cancel_when(stub.request_arrived, cancel)
    start = time.monotonic()
    with pytest.raises(LlmCancelled, match="waiting to retry"):
        client.chat(HELLO, purpose="test", label="t")
    assert time.monotonic() - start < PROMPT_S  # not the 30 s Retry-After
    canceller.join(5)


def test_unreachable_endpoint_says_so():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with LlmClient(LlmConfig(base_url=url, model="m", api_key_env="", max_retries=1,
                             backoff_s=0.01)) as client, pytest.raises(LlmUnavailable) as info:
        client.chat(HELLO, purpose="test", label="t")
    message = str(info.value)
    assert message.startswith(f"cannot reach the LLM endpoint {url}")
    assert "Is the server running" in message and "2 attempts" in message


def test_request_timeout_is_reported(stub):
    stub.reply("slow", delay_s=30)
    client = make_client(stub, timeout_s=1.0, max_retries=0)
    start = time.monotonic()
    with pytest.raises(LlmUnavailable, match=r"did not answer within 1 s"):
        client.chat(HELLO, purpose="test", label="t")
    assert time.monotonic() - start < PROMPT_S  # the 1 s timeout, not the 30 s reply


def test_time_budget_stops_before_a_long_retry_after(stub):
    stub.error(429, headers={"Retry-After": "20"})
    client = make_client(stub, max_backoff_s=60)
    client.deadline = time.monotonic() + 5.0
    with pytest.raises(LlmBudgetExceeded, match="time budget"):
        client.chat(HELLO, purpose="test", label="t")


def test_token_budget_stops_further_requests(stub):
    stub.reply("one", usage={"prompt_tokens": 900, "completion_tokens": 200,
                             "total_tokens": 1100})
    client = make_client(stub, token_budget=1000)
    client.chat(HELLO, purpose="test", label="t")
    with pytest.raises(LlmBudgetExceeded, match=r"token budget \(1000 tokens\)"):
        client.chat(HELLO, purpose="test", label="t")
    assert len(stub.chat_requests()) == 1


def test_json_mode_is_dropped_when_the_server_refuses_it(stub):
    stub.error(400, "response_format json_object is not supported").reply('{"steps": []}')
    client = make_client(stub)
    reply = client.chat(HELLO, purpose="planner", label="p", json_mode=True)
    first, second = stub.chat_requests()
    assert first.body["response_format"] == {"type": "json_object"}
    assert "response_format" not in second.body and reply.text == '{"steps": []}'


def test_404_names_base_url_and_model(stub):
    with LlmClient(LlmConfig(base_url=stub.base_url.removesuffix("/v1"), model="llama3",
                             api_key_env="")) as client, pytest.raises(LlmConfigError) as info:
        client.chat(HELLO, purpose="test", label="t")
    assert "HTTP 404" in str(info.value) and "/v1" in str(info.value)
    assert "'llama3'" in str(info.value)


def test_malformed_json_body_is_a_clear_error(stub):
    stub.raw(200, b"<html>this is not the API</html>")
    client = make_client(stub, max_retries=0)
    with pytest.raises(LlmError, match=f"malformed response from {stub.base_url}"):
        client.chat(HELLO, purpose="test", label="t")
    stub.raw(200, b"{}")
    with pytest.raises(LlmError, match="returned no choices"):
        client.chat(HELLO, purpose="test", label="t")


def test_missing_key_for_openai_is_a_clear_error_and_sends_nothing():
    config = LlmConfig(model="gpt-4.1", api_key_env="KS_SURELY_UNSET_VAR")
    with pytest.raises(LlmConfigError) as info:
        LlmClient(config, environ={})
    message = str(info.value)
    assert "KS_SURELY_UNSET_VAR" in message and "is not set" in message


def test_local_endpoint_without_key_uses_a_placeholder_and_says_so(stub):
    stub.reply("hi")
    client = make_client(stub, environ={})
    assert client.key_note and KEY_ENV in client.key_note
    client.chat(HELLO, purpose="test", label="t")
    assert stub.chat_requests()[0].headers["authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"
    assert resolve_api_key(LlmConfig(api_key_env=""), {}) == (NO_KEY_PLACEHOLDER, None)


def test_api_key_is_sent_but_never_recorded_logged_or_shown(stub):
    stub.error(401, f"Incorrect API key provided: {SECRET}")
    records = []
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        client = make_client(stub, records)
        with pytest.raises(LlmConfigError) as info:
            client.chat([{"role": "user", "content": "hi"}], purpose="test", label="t")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    assert stub.chat_requests()[0].headers["authorization"] == f"Bearer {SECRET}"
    assert f"${KEY_ENV}" in str(info.value)  # the variable's name, never its value
    for text in (str(info.value), repr(client), stream.getvalue(),
                 repr([r.to_json() for r in records]), repr(client.config)):
        assert SECRET not in text
    assert "<redacted>" in records[0].error


def test_retry_after_parsing():
    class R:
        def __init__(self, headers):
            self.headers = headers

    assert retry_after_s(R({"retry-after": "2"})) == 2.0
    assert retry_after_s(R({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(R({})) is None
    assert retry_after_s(None) is None
    assert retry_after_s(R({"retry-after": "nan"})) is None  # then the own backoff applies
    assert retry_after_s(R({"retry-after-ms": "inf"})) is None
    assert 0 <= retry_after_s(R({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) < 1


def test_settings_merge_and_validation():
    config = LlmConfig.from_settings(
        {"base_url": "http://localhost:11434/v1", "model": "qwen2.5-coder", "api_key_env": "",
         "timeout_s": "30"}, {"iterations": 6, "time_s": 120, "tokens": 50000})
    assert (config.max_iterations, config.time_budget_s, config.token_budget) == (6, 120, 50000)
    assert config.timeout_s == 30.0 and config.is_local
    config.validate()
    assert LlmConfig.from_settings({}, {}).max_iterations == 4
    with pytest.raises(LlmConfigError, match="--llm-model"):
        LlmConfig.from_settings({"base_url": "http://x:1/v1"}, {}).validate()
    with pytest.raises(LlmConfigError, match="environment variable"):
        LlmConfig.from_settings({"model": "m", "api_key": SECRET}, {})
    with pytest.raises(LlmConfigError, match=r"budget\.iterations"):
        LlmConfig.from_settings({"model": "m"}, {"iterations": 0})
    with pytest.raises(LlmConfigError, match="not an http"):
        LlmConfig(model="m", base_url="localhost:8000").validate()
    with pytest.raises(LlmConfigError, match="NAME"):
        LlmConfig(model="m", api_key_env="sk-abc def").validate()


@pytest.mark.parametrize("llm, budget, expected", [
    ({"model": "m", "max_retries": "inf"}, {}, "llm.max_retries: must be a finite number"),
    ({"model": "m"}, {"iterations": float("inf")}, "budget.iterations: must be a finite number"),
    ({"model": "m", "timeout_s": [30]}, {}, "llm.timeout_s: expected a number"),
    ({"model": "m", "planner": "yes"}, {}, "llm.planner: expected true or false"),
    ({"model": 4}, {}, "llm.model: expected a string"),
    ("gpt-4.1", {}, "the llm settings must be an object"),
    ({"model": "m"}, [("iterations", 2)], "the budget settings must be an object"),
])
def test_bad_settings_are_clear_errors_not_crashes(llm, budget, expected):
    with pytest.raises(LlmConfigError) as info:
        LlmConfig.from_settings(llm, budget)
    assert expected in str(info.value)


@pytest.mark.parametrize("key", [
    "sk-test-SECRET123",  # the key: short, and no variable name at all
    "sk_test_SECRET123",  # a valid variable name shaped like a key, still short
    "gsk_" + "a1B2c3D4e5F6g7H8i9J0" * 2,  # a Groq key: also a valid variable name
    "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",  # any long random token
    "0123456789abcdef" * 3,  # a hex key
    "my key",
])
def test_a_key_given_as_the_variable_name_is_refused_without_being_repeated(key):
    from kernelstitch.agents.pipeline import PipelineConfig, _stored_config

    configs = [LlmConfig.from_settings({"model": "m", "api_key_env": key}),
               LlmConfig(model="m", api_key_env=key)]
    for config in configs:  # the value is gone the moment the settings are parsed
        assert config.api_key_env.startswith("<refused: ")
        assert key not in repr(config) and key not in config.describe()
        with pytest.raises(LlmConfigError, match="NAME of an environment variable") as info:
            config.validate()
        assert key not in str(info.value) and "refused" in str(info.value)
    pipeline = PipelineConfig(coder="llm", llm={"model": "m", "api_key_env": key,
                                                "api_key": key})
    assert key not in repr(pipeline)
    stored = _stored_config(pipeline)
    assert key not in repr(stored) and stored["llm"] == {"model": "m"}


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "KS_TEST_LLM_KEY", "hf_token",
                                  "GROQ_API_KEY", "HF_TOKEN", "AZURE_OPENAI_API_KEY_FOR_PROD_2",
                                  "VLLM_API_KEY", ""])
def test_variable_names_are_accepted(name):
    config = LlmConfig.from_settings({"model": "m", "api_key_env": name})
    config.validate()
    assert config.api_key_env == name


def test_editor_settings_never_hold_a_pasted_key():
    from kernelstitch.server.config import ServerConfig

    server = ServerConfig.from_settings({"llm": {"apiKeyEnv": "sk-test-SECRET123"}})
    assert "SECRET123" not in repr(server) and "SECRET123" not in repr(server.job_config())
    assert server.llm_api_key_env == "<refused: not a variable name>"


def test_redact_removes_the_key_and_key_shaped_text_but_not_code():
    text = redact(f"got {SECRET}; Authorization: Bearer abcDEF123456789; sk-proj-Ab12cd34Ef"
                  "; hf_AbCdEfGhIjKlMnOpQrSt12345", SECRET)
    assert text == ("got <redacted>; Authorization: Bearer <redacted>; <redacted>; "
                    "<redacted>")
    code = "float hf_weights_buffer_for_layer_1 = task_sk(x); // bearer of news; disk-1234567"
    assert redact(code) == code
