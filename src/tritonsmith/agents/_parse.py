"""Pull a candidate's Python source out of a model's answer (fenced block, tool arguments, raw code)."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["extract_code", "source_from_tool_args", "text_of"]

# ```python ... ``` / ~~~py ... ~~~ / ``` ... ```; an unclosed fence (truncated answer) runs to the end.
_FENCE = re.compile(r"(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)(?:\n[ \t]*(?P=fence)[ \t]*(?=\n|$)|\Z)",
                    re.DOTALL)
_CODE_LANGS = {"", "python", "py", "python3", "triton"}
_KEYS = ("source", "candidate_source", "code", "kernel", "kernel_source", "candidate", "python")


def text_of(content: Any) -> str:
    """The text of a message's content (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return ""


def extract_code(text: str) -> str | None:
    """The candidate source in ``text``, or None if it holds no code.

    Preference: the last fenced Python block that defines ``ModelNew``; else the longest Python block
    that imports triton; else the whole text when it is bare code defining ``ModelNew``.
    """
    blocks = [m.group("body").strip("\n") for m in _FENCE.finditer(text)
              if m.group("lang").lower() in _CODE_LANGS]
    blocks = [b for b in blocks if b.strip()]
    with_model = [b for b in blocks if "class ModelNew" in b]
    if with_model:
        return _dedent_ok(with_model[-1])
    with_triton = [b for b in blocks if "triton" in b and ("def " in b or "class " in b)]
    if with_triton:
        return _dedent_ok(max(with_triton, key=len))
    stripped = text.strip()
    if "class ModelNew" in stripped and re.search(r"^(import|from) ", stripped, re.MULTILINE) and "```" not in stripped:
        return _dedent_ok(stripped)
    return None


def source_from_tool_args(args: Any) -> str | None:
    """The source in a ``submit_kernel`` call's arguments (a dict, or a JSON string that may be malformed)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return _source_from_broken_json(args)
    if isinstance(args, dict):
        for key in _KEYS:
            value = args.get(key)
            if isinstance(value, str) and value.strip():
                return extract_code(value) or _dedent_ok(value.strip("\n"))
        strings = [v for v in args.values() if isinstance(v, str) and "class ModelNew" in v]
        if strings:
            return extract_code(strings[0]) or _dedent_ok(strings[0])
    return None


def _source_from_broken_json(raw: str) -> str | None:
    """Recover ``"source": "..."`` from arguments the server did not close properly."""
    m = re.search(r'"(?:%s)"\s*:\s*"(?P<body>.*)' % "|".join(_KEYS), raw, re.DOTALL)
    if not m:
        return extract_code(raw)
    body = re.sub(r'"\s*(,\s*"\w+"\s*:.*)?\}?\s*$', "", m.group("body"), flags=re.DOTALL)
    try:
        return _dedent_ok(json.loads(f'"{body}"'))
    except json.JSONDecodeError:
        return _dedent_ok(body.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\"))


def _dedent_ok(code: str) -> str:
    import textwrap

    return textwrap.dedent(code).strip("\n") + "\n"
