"""Generators: they write ``ModelNew`` candidates for the refinement loop.

:class:`Generator` is the contract (``generate(GenerationRequest) -> Candidate``); :class:`BuiltinGenerator`
needs no LLM; :class:`LLMGenerator` drives any LangChain chat model as a small subgraph (an agent node and a
``ToolNode``, whose node names are :data:`LLM_NODE_NAMES`), with the tools :func:`default_toolkit` gives each
request: the public tools of :mod:`tritonsmith.tools`, bound to the problem. Importing this package loads
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
    "LLM_NODE_NAMES",
    "ModelUnavailableError",
    "Pricing",
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
    "LLM_NODE_NAMES": "tritonsmith.agents._llm_graph",
    "ModelUnavailableError": "tritonsmith.agents.llm",
    "Pricing": "tritonsmith.agents.llm",
    "default_toolkit": "tritonsmith.agents._llm_tools",
}

if TYPE_CHECKING:
    from tritonsmith.agents._llm_tools import default_toolkit
    from tritonsmith.agents.base import Attempt, Candidate, GenerationRequest, Generator, TokenUsage
    from tritonsmith.agents.builtin import BuiltinGenerator
    from tritonsmith.agents._llm_graph import LLM_NODE_NAMES
    from tritonsmith.agents.llm import LLMConfigurationError, LLMGenerator, ModelUnavailableError, Pricing


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tritonsmith.agents' has no attribute {name!r}")
