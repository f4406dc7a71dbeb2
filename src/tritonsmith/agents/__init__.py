"""Generators: they write ``ModelNew`` candidates for the refinement loop.

:class:`Generator` is the contract (``generate(GenerationRequest) -> Candidate``); :class:`BuiltinGenerator`
needs no LLM; :class:`LLMGenerator` drives any LangChain chat model, with the tools
:func:`default_toolkit` gives each request. Importing this package loads
nothing heavy: each name is imported on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "Attempt",
    "BuiltinGenerator",
    "Candidate",
    "GenerationRequest",
    "Generator",
    "LLMConfigurationError",
    "LLMGenerator",
    "TokenUsage",
    "default_toolkit",
]

_LAZY = {
    "Attempt": "tritonsmith.agents.base",
    "Candidate": "tritonsmith.agents.base",
    "GenerationRequest": "tritonsmith.agents.base",
    "Generator": "tritonsmith.agents.base",
    "TokenUsage": "tritonsmith.agents.base",
    "BuiltinGenerator": "tritonsmith.agents.builtin",
    "LLMConfigurationError": "tritonsmith.agents.llm",
    "LLMGenerator": "tritonsmith.agents.llm",
    "default_toolkit": "tritonsmith.agents._llm_tools",
}

if TYPE_CHECKING:
    from tritonsmith.agents._llm_tools import default_toolkit
    from tritonsmith.agents.base import Attempt, Candidate, GenerationRequest, Generator, TokenUsage
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.agents.llm import LLMConfigurationError, LLMGenerator


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.agents' has no attribute {name!r}")
