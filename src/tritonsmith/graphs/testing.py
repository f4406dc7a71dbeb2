"""A scripted, tool-calling chat model: test graphs and agents offline, with no key and no server.

    model = ScriptedChatModel(script=[call_tool("search_kernels", query="softmax"), submit(source)])
    graph = compile_kernel_graph(model=model, memory=False)

Each model call pops the next script entry: an ``AIMessage``, a callable ``(messages) -> AIMessage``
(to answer depending on what the model was shown), or an exception to raise (a simulated outage).
Every call's messages are kept in ``model.seen`` for assertions.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["ScriptExhausted", "ScriptedChatModel", "call_tool", "reply", "scripted_generator", "submit"]

_ids = itertools.count(1)


class ScriptExhausted(AssertionError):
    """The model was called more often than its script allows."""


def _usage(text: str) -> dict[str, int]:
    out = max(1, len(text) // 4)
    return {"input_tokens": 100, "output_tokens": out, "total_tokens": 100 + out}


def submit(source: str, notes: str = "") -> AIMessage:
    """An answer submitting ``source`` through the ``submit_kernel`` tool."""
    call = {"name": "submit_kernel", "args": {"source": source, "notes": notes}, "id": f"call_{next(_ids)}",
            "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call], usage_metadata=_usage(source))  # type: ignore[arg-type]


def call_tool(name: str, **args: Any) -> AIMessage:
    """An answer calling tool ``name`` with ``args``."""
    call = {"name": name, "args": args, "id": f"call_{next(_ids)}", "type": "tool_call"}
    return AIMessage(content="", tool_calls=[call], usage_metadata=_usage(str(args)))  # type: ignore[arg-type]


def reply(text: str) -> AIMessage:
    """A plain text answer (e.g. a fenced code block, or prose with no code)."""
    return AIMessage(content=text, usage_metadata=_usage(text))  # type: ignore[arg-type]


ScriptEntry = AIMessage | BaseException | Callable[[Sequence[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Replays ``script`` one entry per call; supports ``bind_tools`` (tools are recorded, not enforced)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[list[str]] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _next: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def remaining(self) -> int:
        return len(self.script) - self._next

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, BaseMessage]:
        names = [getattr(t, "name", None) or getattr(t, "__name__", str(t)) for t in tools]
        self.bound_tools.append(names)
        return self.bind(tools=names, **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        with self._lock:
            if self._next >= len(self.script):
                raise ScriptExhausted(f"the script has {len(self.script)} entries; call {self._next + 1} has none")
            entry = self.script[self._next]
            self._next += 1
            self.seen.append(list(messages))
        if isinstance(entry, BaseException):
            raise entry
        message = entry(messages) if callable(entry) and not isinstance(entry, AIMessage) else entry
        if not isinstance(message, AIMessage):
            raise TypeError(f"script entries must give AIMessages, got {type(message).__name__}")
        return ChatResult(generations=[ChatGeneration(message=message.model_copy())])


def scripted_generator(script: Sequence[Any]) -> Any:
    """The LLM generator driving a :class:`ScriptedChatModel` (offline), named ``scripted`` so that its
    events and reports never claim that a language model wrote the kernels."""
    from tritonsmith.agents.llm import LLMGenerator

    generator = LLMGenerator(ScriptedChatModel(script=list(script)), server="scripted (offline)")
    generator.name = "scripted"  # type: ignore[misc]
    return generator
