"""The run store's size bounds: texts, strings inside JSON, whole JSON artifacts and a run's
config and summary are cut with a marker, so one runaway text cannot grow the store."""

from __future__ import annotations

from kernelstitch.core.runstore import (
    MAX_JSON_CHARS,
    MAX_JSON_STRING_CHARS,
    MAX_RUN_STRING_CHARS,
    MAX_TEXT_CHARS,
    RunStore,
    clip_text,
)

FIVE_MB = 5_000_000


def _marker(size: int, kept: int) -> str:
    return f" [truncated: {size:,} chars, kept the first {kept:,}]"


def test_every_stored_text_is_bounded_and_says_so(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    run = store.start_run("generate", "a.py", "M", {"llm": {"note": "c" * FIVE_MB}, "seeds": 3})
    store.add_artifact(run, "report", "report.md", "r" * FIVE_MB)
    store.add_artifact(run, "prompt", "p.json", {"reply": {"text": "t" * FIVE_MB}, "n": [1, 2]})
    store.add_artifact(run, "log", "many.json", ["x" * 1_000] * 5_000)  # 5 MB in small parts
    store.add_artifact(run, "candidate", "small.py", "print(1)\n")
    store.finish_run(run, "succeeded", {"message": "s" * FIVE_MB})

    record = store.get_run(run)
    assert record.config["seeds"] == 3
    assert record.config["llm"]["note"] == "c" * MAX_RUN_STRING_CHARS + _marker(
        FIVE_MB, MAX_RUN_STRING_CHARS)
    assert record.summary["message"].endswith(_marker(FIVE_MB, MAX_RUN_STRING_CHARS))
    found = {a.name: a.content for a in store.artifacts(run)}
    assert found["report.md"] == "r" * MAX_TEXT_CHARS + _marker(FIVE_MB, MAX_TEXT_CHARS)
    assert found["p.json"]["n"] == [1, 2]  # still JSON, only the long string was cut
    assert found["p.json"]["reply"]["text"].endswith(_marker(FIVE_MB, MAX_JSON_STRING_CHARS))
    many = found["many.json"]
    assert many["truncated"].startswith("[truncated: ") and len(many["head"]) == MAX_JSON_CHARS
    assert found["small.py"] == "print(1)\n"
    size = sum(p.stat().st_size for p in tmp_path.glob("runs.sqlite*"))
    assert size < 8_000_000, size  # 25 MB unbounded


def test_clip_text_leaves_short_texts_alone():
    assert clip_text("abc", 3) == "abc"
    assert clip_text("abcd", 3) == "abc" + _marker(4, 3)
