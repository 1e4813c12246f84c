"""Getting code and JSON out of model replies, with a message that says what was wrong.

Every failure raises `LlmReplyError` whose text is written for the model (it is sent back as
feedback) and for the user (it lands in the report).
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from kernelstitch.agents.llm.errors import LlmReplyError

CANDIDATE_CLASS = "ModelNew"
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*$", re.MULTILINE)
_TRUNCATION_HINTS = ("was never closed", "unexpected EOF", "EOF while scanning",
                     "unterminated triple-quoted string", "expected an indented block")


def fenced_blocks(text: str) -> tuple[list[tuple[str, str]], bool]:
    """([(language, body)], an opening fence was left unclosed)."""
    blocks: list[tuple[str, str]] = []
    fences = list(_FENCE.finditer(text))
    k = 0
    while k < len(fences):
        opening = fences[k]
        if k + 1 >= len(fences):
            return blocks, True
        closing = fences[k + 1]
        blocks.append((opening.group(1).lower(), text[opening.end() + 1:closing.start()]))
        k += 2
    return blocks, False


def truncation_message(finish_reason: str | None, completion_tokens: int | None = None) -> str:
    tokens = f" after {completion_tokens} tokens" if completion_tokens else ""
    return (f"the reply was cut off{tokens} (finish_reason={finish_reason or 'unknown'}): the "
            "file is incomplete. Send the complete file again, shorter: drop comments, unused "
            "helpers and anything the plan does not need")


def extract_python(text: str, finish_reason: str | None = None,
                   completion_tokens: int | None = None) -> str:
    """The candidate file in a reply: the ```python block defining ModelNew (else the only
    python block).  Raises LlmReplyError for truncated replies, missing blocks, syntax errors
    that look like truncation, and files without class ModelNew."""
    if finish_reason == "length":
        raise LlmReplyError(truncation_message(finish_reason, completion_tokens))
    blocks, unclosed = fenced_blocks(text)
    python = [body for lang, body in blocks if lang in ("python", "py", "python3", "")]
    if not python:
        if unclosed:
            raise LlmReplyError(truncation_message(finish_reason or "unclosed code block",
                                                   completion_tokens))
        stripped = text.strip()
        if stripped and _parses(stripped) and _defines_model_new(stripped):
            return stripped + "\n"  # a bare file without fences: usable as is
        raise LlmReplyError(
            "the reply has no ```python code block: answer with the complete file in exactly "
            "one ```python block")
    with_class = [b for b in python if re.search(rf"\bclass\s+{CANDIDATE_CLASS}\b", b)]
    code = max(with_class or python, key=len)
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        if unclosed or (any(h in str(exc.msg) for h in _TRUNCATION_HINTS)
                         and _ends_abruptly(code)):
            raise LlmReplyError(truncation_message(finish_reason or "unbalanced code",
                                                   completion_tokens)) from None
        raise LlmReplyError(
            f"the file does not parse: line {exc.lineno}: {exc.msg}"
            + (f"\n    {exc.text.rstrip()}" if exc.text else "")) from None
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    if CANDIDATE_CLASS not in classes:
        found = ", ".join(classes) if classes else "no class at all"
        raise LlmReplyError(
            f"the file defines {found} but no class {CANDIDATE_CLASS}: the Verifier loads "
            f"`{CANDIDATE_CLASS}` by that exact name (keep it at module level)")
    model_new = next(n for n in tree.body if isinstance(n, ast.ClassDef)
                     and n.name == CANDIDATE_CLASS)
    if not any(isinstance(n, ast.FunctionDef) and n.name == "forward" for n in model_new.body):
        raise LlmReplyError(f"class {CANDIDATE_CLASS} (line {model_new.lineno}) has no forward "
                            "method")
    if unclosed:  # the last block was cut, even if an earlier one is complete
        raise LlmReplyError(truncation_message(finish_reason or "unclosed code block",
                                               completion_tokens))
    return code if code.endswith("\n") else code + "\n"


def extract_json(text: str, finish_reason: str | None = None) -> Any:
    """The JSON object of a reply (a ```json block, the whole text, or its outermost {...})."""
    if finish_reason == "length":
        raise LlmReplyError("the reply was cut off (finish_reason=length) before the JSON ended: "
                            "answer with a shorter plan (shorter descriptions, no extra keys)")
    blocks, _ = fenced_blocks(text)
    candidates = [body for lang, body in blocks if lang in ("json", "")] + [text.strip()]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    first_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
    if first_error is None or start < 0:
        raise LlmReplyError("the reply contains no JSON object: answer with one JSON object")
    raise LlmReplyError(f"the reply is not valid JSON: {first_error.msg} at line "
                        f"{first_error.lineno} column {first_error.colno}")


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def _defines_model_new(code: str) -> bool:
    return re.search(rf"^class\s+{CANDIDATE_CLASS}\b", code, re.MULTILINE) is not None


def _ends_abruptly(code: str) -> bool:
    """Unbalanced brackets/quotes at the end: the model ran out of room."""
    depth = 0
    for char in code:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
    return depth > 0 or code.count('"""') % 2 == 1 or code.count("'''") % 2 == 1 or (
        not code.rstrip().endswith((")", "]", "}", '"', "'")) and code.rstrip().endswith(
            (",", "(", "[", "{", ":", "+", "-", "*", "/", "=")))
