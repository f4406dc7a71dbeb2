"""The LLM generator: any LangChain chat model writes candidates, calling tools on the way.

One :meth:`LLMGenerator.generate` call is a short conversation: the model sees the problem (and, on
refinement, the findings on earlier attempts), may call kernel search / profiler / web search for a
bounded number of rounds, and submits a candidate through the ``submit_kernel`` tool or a fenced
```python block. An answer without code is fed back as such, a few times at most.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool

from tritonsmith.agents._llm_graph import (
    LLM_NODE_NAMES,
    ModelError,
    build_llm_subgraph,
    conversation_ended,
    recursion_limit,
)
from tritonsmith.tools import EVALUATE_TOOL_NAME, SUBMIT_TOOL_NAME, submit_kernel
from tritonsmith.agents._parse import text_of
from tritonsmith.agents.base import Candidate, GenerationRequest, TokenUsage
from tritonsmith.agents.prompts import (
    EXAMPLES_DROPPED,
    SYSTEM_PROMPT,
    render_followup,
    render_request,
    render_system,
)

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langgraph.graph import StateGraph

    from tritonsmith.core.settings import Settings

__all__ = ["LLMConfigurationError", "LLMGenerator", "ModelUnavailableError", "Pricing", "chat_model_from_settings",
           "pricing_from"]

log = logging.getLogger(__name__)

Toolkit = Callable[[GenerationRequest], Sequence[BaseTool]]
LOCAL_SERVER_KEY = "not-needed"  # OpenAI-compatible local servers (vLLM, Ollama) ignore the key


class LLMConfigurationError(ValueError):
    """No model is configured (no key, no server URL) or the configuration is invalid."""


class ModelUnavailableError(RuntimeError):
    """The model server could not be reached, or refused the request (key, model name, rate limit).

    ``fatal``: retrying cannot help (bad key, unknown model, unreachable server); ``context_length``: the
    prompt was too long for the model (a shorter prompt may pass).
    """

    def __init__(self, message: str, *, fatal: bool = False, context_length: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.context_length = context_length


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """USD per million input / output tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def pricing_from(settings: Settings) -> Pricing | None:
    """Prices from the settings, when both are given."""
    if settings.input_cost_per_mtok is None or settings.output_cost_per_mtok is None:
        return None
    return Pricing(input_per_mtok=settings.input_cost_per_mtok, output_per_mtok=settings.output_cost_per_mtok)


def chat_model_from_settings(settings: Settings) -> BaseChatModel:
    """A ``ChatOpenAI`` for ``settings`` (model, base_url, key), with its timeout and retry limit set; with
    ``record_dir``, every exchange with the server is recorded there (``transcript.json``).

    Raises :class:`LLMConfigurationError` when neither a key nor a server URL is configured.
    """
    if not settings.llm_configured:
        raise LLMConfigurationError(
            "no model configured: set OPENAI_API_KEY (or TRITONSMITH_API_KEY) for OpenAI, or a base URL "
            "(--base-url / TRITONSMITH_BASE_URL / OPENAI_BASE_URL) for a local OpenAI-compatible server "
            "such as vLLM or Ollama")
    from langchain_openai import ChatOpenAI

    kwargs: dict[str, Any] = {"model": settings.model, "timeout": settings.llm_timeout_s,
                              "max_retries": settings.max_retries,
                              "api_key": settings.api_key or LOCAL_SERVER_KEY}
    if settings.base_url:
        kwargs["base_url"] = settings.base_url
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.record_dir:
        from tritonsmith.agents._record import recording_client

        kwargs["http_client"] = recording_client(settings.record_dir, timeout_s=settings.llm_timeout_s)
    return ChatOpenAI(**kwargs)


class LLMGenerator:
    """Writes candidates with a chat model. Implements the :class:`~tritonsmith.agents.base.Generator` protocol.

    Args:
        model: any LangChain chat model; tool calling is used when it supports ``bind_tools``.
        tools: tools offered on every request (besides ``submit_kernel``).
        toolkit: a factory giving request-specific tools (e.g. a profiler bound to the problem).
        max_tool_rounds: tool-calling rounds per candidate before the model must submit.
        max_no_code_replies: answers without code tolerated (each fed back) before giving up on a candidate.
        pricing: prices per million tokens; without it, a cost the server reports is used, else None.
        server: where the model lives, for error messages.
        context_tokens: refinement continues the model's own conversation (the evaluator's verdict answers
            its ``submit_kernel`` call) while the conversation stays under this many tokens (estimated as
            characters / 4); past it, a fresh prompt with the findings so far starts a new one.
        interrupt_before: nodes of the conversation subgraph to stop before (e.g. ``("tools",)``: before
            every tool call), for a parent graph with a checkpointer that resumes it.
    """

    name = "llm"

    def __init__(self, model: BaseChatModel, *, tools: Sequence[BaseTool] = (), toolkit: Toolkit | None = None,
                 max_tool_rounds: int = 4, max_no_code_replies: int = 2, pricing: Pricing | None = None,
                 system_prompt: str = SYSTEM_PROMPT, server: str | None = None, context_tokens: int = 32000,
                 interrupt_before: Sequence[str] = ()) -> None:
        if max_tool_rounds < 0 or max_no_code_replies < 0:
            raise ValueError("max_tool_rounds and max_no_code_replies must be >= 0")
        if unknown := [n for n in interrupt_before if n not in LLM_NODE_NAMES]:
            raise ValueError(f"interrupt_before: no node named {', '.join(map(repr, unknown))} in the LLM "
                             f"conversation; its nodes are {', '.join(LLM_NODE_NAMES)}")
        self.interrupt_before = tuple(interrupt_before)
        self.model = model
        self.tools = tuple(tools)
        self.toolkit = toolkit
        self.max_tool_rounds = max_tool_rounds
        self.max_no_code_replies = max_no_code_replies
        self.pricing = pricing
        self.system_prompt = system_prompt
        self.server = server or getattr(model, "openai_api_base", None) or _model_label(model)
        self.context_tokens = context_tokens
        self._conversations: dict[str, _Conversation] = {}  # per problem: what the model said up to its submission
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> LLMGenerator:
        kwargs.setdefault("max_tool_rounds", settings.max_tool_rounds)
        kwargs.setdefault("pricing", pricing_from(settings))
        kwargs.setdefault("server", settings.base_url or "api.openai.com")
        kwargs.setdefault("context_tokens", settings.llm_context_tokens)
        return cls(chat_model_from_settings(settings), **kwargs)

    def generate(self, request: GenerationRequest) -> Candidate:
        """One candidate. A failing chat model gives a candidate without code whose ``model_error`` says why;
        a prompt over the model's context length is shortened (no examples, short history) and sent once more.

        The conversation runs as a LangGraph subgraph (:meth:`conversation_graph`): called from a node of a
        graph with a checkpointer, each model reply and tool call is a checkpointed, streamed step of it."""
        tools = [*self.tools, *(self.toolkit(request) if self.toolkit else ())]
        evaluate_tool = any(t.name == EVALUATE_TOOL_NAME for t in tools)
        graph = self.conversation_graph(request, tools).compile(interrupt_before=list(self.interrupt_before),
                                                                name="llm")
        limit = recursion_limit(self.max_tool_rounds, self.max_no_code_replies)
        final = graph.invoke({"messages": self._opening(request, compact=False, evaluate_tool=evaluate_tool)},
                             config={"recursion_limit": limit})
        return self._candidate(request, final)

    def conversation_graph(self, request: GenerationRequest, tools: Sequence[BaseTool] | None = None) -> StateGraph:
        """The uncompiled conversation subgraph for ``request`` (an agent node and a ``ToolNode`` over the
        tools); its input is ``{"messages": opening}``. ``tools`` default: this generator's for ``request``."""
        if tools is None:
            tools = [*self.tools, *(self.toolkit(request) if self.toolkit else ())]
        with_tools, submit_only = self._bind([*tools, submit_kernel]), self._bind([submit_kernel])
        evaluate_tool = any(t.name == EVALUATE_TOOL_NAME for t in tools)

        def call_model(messages: list[BaseMessage], offer_tools: bool) -> AIMessage | ModelError:
            try:
                return self._invoke(with_tools if offer_tools else submit_only, messages)
            except ModelUnavailableError as exc:
                return ModelError(message=str(exc), fatal=exc.fatal, context_length=exc.context_length)

        return build_llm_subgraph(
            call_model=call_model, tools=tools, max_tool_rounds=self.max_tool_rounds,
            max_no_code_replies=self.max_no_code_replies,
            shortened=lambda: self._opening(request, compact=True, evaluate_tool=evaluate_tool))

    def _candidate(self, request: GenerationRequest, final: dict[str, Any]) -> Candidate:
        """The candidate the finished conversation gave: a submission, a model error, or no code."""
        if not conversation_ended(final, max_tool_rounds=self.max_tool_rounds,  # type: ignore[arg-type]
                                  max_no_code_replies=self.max_no_code_replies):
            raise RuntimeError("the LLM conversation stopped before its end (interrupt_before needs a parent graph "
                               "compiled with a checkpointer: run generate() from one of its nodes, then resume it)")
        cost = (self.pricing.cost(final.get("input_tokens", 0), final.get("output_tokens", 0)) if self.pricing
                else final.get("reported_cost"))
        usage = TokenUsage(input_tokens=final.get("input_tokens", 0), output_tokens=final.get("output_tokens", 0),
                           cost_usd=cost)
        if (error := final.get("error")) is not None:
            after = ""
            if final.get("compact"):
                after = ("a shortened prompt (no examples, short history) was also too long; "
                         if error["context_length"] else "after shortening the prompt: ")
            log.warning("model error: %s%s", after, error["message"])
            return Candidate(source=None, note=f"model error: {after}{error['message']}", usage=usage,
                             model_error=f"{after}{error['message']}", model_error_fatal=error["fatal"])
        messages = list(final["messages"])
        reply = messages[-1]
        if (source := final.get("source")) is not None:
            self._keep(request, messages, source)
            problem = final.get("problem")
            note = f"submitted after {final.get('rounds', 0)} tool round(s)" + (f"; {problem}" if problem else "")
            return Candidate(source=source, note=note, usage=usage)
        return Candidate(source=None, usage=usage,
                         note=f"the model gave no code in {final.get('no_code', 0) + 1} answers: {_gist(reply)}")

    # -- the conversation ---------------------------------------------------------------------
    def _opening(self, request: GenerationRequest, *, compact: bool, evaluate_tool: bool) -> list[BaseMessage]:
        """The model's own conversation with the verdict on its last submission, or a fresh prompt."""
        facts = {"tool_rounds": self.max_tool_rounds, "evaluate_tool": evaluate_tool}
        previous = None if compact else self._conversation(request)
        if previous is not None:
            messages = [*previous.messages, *previous.answer(render_followup(request, **facts))]
            if _estimate_tokens(messages) <= self.context_tokens:
                return messages
            log.info("the conversation is over %d tokens: starting a fresh prompt", self.context_tokens)
        return [SystemMessage(render_system(request, self.system_prompt)),
                HumanMessage(render_request(request, compact=compact, **facts))]

    def _conversation(self, request: GenerationRequest) -> _Conversation | None:
        """The conversation that produced the last attempt of ``request``'s history, if this model had it."""
        last = request.history[-1] if request.history else None
        with self._lock:
            conv = self._conversations.get(_problem_key(request))
        if conv is None or last is None or last.source is None or last.source.strip() != conv.source.strip():
            return None
        return conv

    def _keep(self, request: GenerationRequest, messages: list[BaseMessage], source: str) -> None:
        """Keep the conversation for the next iteration, lighter: the retrieved examples leave the opening
        message (sent once) and long tool results shrink to their head (the model can call again)."""
        kept: list[BaseMessage] = list(messages)
        if request.examples and not request.history and len(kept) > 1 and isinstance(kept[1], HumanMessage):
            lighter = dataclasses.replace(request, examples=())
            kept[1] = HumanMessage(render_request(lighter, tool_rounds=self.max_tool_rounds,
                                                  evaluate_tool=EVALUATE_TOOL_NAME in text_of(kept[1].content))
                                   + "\n\n" + EXAMPLES_DROPPED)
        kept = [_shrunk(m) if isinstance(m, ToolMessage) else m for m in kept]
        with self._lock:
            self._conversations[_problem_key(request)] = _Conversation(messages=kept, source=source)

    # -- helpers ------------------------------------------------------------------------------
    def _bind(self, tools: Sequence[BaseTool]) -> Any:
        try:
            return self.model.bind_tools(list(tools))
        except NotImplementedError:
            log.info("%s does not support tool calling; relying on fenced code blocks", _model_label(self.model))
            return self.model

    def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> AIMessage:
        from pydantic import ValidationError

        errors = _provider_errors()
        try:
            reply = runnable.invoke(messages)
        except errors as exc:  # the client's network/auth/status errors: a clear, actionable message
            raise ModelUnavailableError(_explain(exc, self.server, _model_label(self.model)), fatal=_fatal(exc),
                                        context_length=_context_length(exc)) from exc
        except (ValueError, KeyError, TypeError, ValidationError) as exc:  # a reply the client could not parse
            raise ModelUnavailableError(f"the model server {self.server} sent a malformed reply: "
                                        f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        if not isinstance(reply, AIMessage):
            raise ModelUnavailableError(f"the chat model returned {type(reply).__name__}, not an AIMessage")
        return reply



@dataclass(frozen=True)
class _Conversation:
    """A conversation up to the model's submission of ``source``."""

    messages: list[BaseMessage]
    source: str

    def answer(self, verdict: str) -> list[BaseMessage]:
        """The verdict as the answer to the submitting reply: its tool calls' results, or a user message."""
        reply = self.messages[-1]
        calls = [*getattr(reply, "tool_calls", []), *getattr(reply, "invalid_tool_calls", [])]
        ids = [(c.get("id"), c.get("name")) for c in calls if c.get("id")]
        if not ids:
            return [HumanMessage(verdict)]
        return [ToolMessage(verdict if name == SUBMIT_TOOL_NAME else "not run: you submitted in the same answer",
                            tool_call_id=i) for i, name in ids]


_KEPT_TOOL_CHARS = 800  # a tool result kept for later iterations: its head, enough to recall what it said


def _shrunk(message: ToolMessage) -> ToolMessage:
    text = text_of(message.content)
    if len(text) <= _KEPT_TOOL_CHARS:
        return message
    head = text[:_KEPT_TOOL_CHARS].rsplit("\n", 1)[0]
    return message.model_copy(update={"content": f"{head}\n... ({len(text) - len(head)} characters dropped from the "
                                                 "conversation: call the tool again to see them)"})


def _problem_key(request: GenerationRequest) -> str:
    return hashlib.sha256(f"{request.problem.name}\0{request.problem.source}".encode()).hexdigest()[:16]


def _estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Characters / 4 over contents and tool-call arguments (no tokenizer offline; close for code and English)."""
    chars = 0
    for m in messages:
        chars += len(text_of(m.content)) + sum(len(str(c.get("args", ""))) for c in getattr(m, "tool_calls", []))
    return chars // 4


def _gist(reply: AIMessage) -> str:
    text = " ".join(text_of(reply.content).split())
    if not text and reply.tool_calls:
        text = "only tool calls: " + ", ".join(c["name"] for c in reply.tool_calls)
    return (text[:160] + "...") if len(text) > 160 else (text or "(empty answer)")


def _provider_errors() -> tuple[type[BaseException], ...]:
    """Every error of the OpenAI client: HTTP 4xx/5xx, timeouts, unreachable servers, unparseable replies."""
    try:
        import openai
    except ImportError:  # pragma: no cover - langchain-openai depends on it
        return ()
    return (openai.APIError,)


_CONTEXT_MARKERS = ("context_length_exceeded", "context length", "context window", "maximum context",
                    "too many tokens", "prompt is too long", "reduce the length")


def _context_length(exc: BaseException) -> bool:
    """Whether the server refused the request because the prompt is longer than the model's context."""
    import openai

    if not isinstance(exc, (openai.BadRequestError, openai.UnprocessableEntityError)):
        return False
    text = f"{getattr(exc, 'code', '') or ''} {exc}".lower()
    return any(m in text for m in _CONTEXT_MARKERS)


def _fatal(exc: BaseException) -> bool:
    """Errors another request cannot fix: bad key, no permission, unknown model, unreachable server."""
    import openai

    unreachable = isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError)
    return unreachable or isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError,
                                           openai.NotFoundError))


def _explain(exc: BaseException, server: str, model: str) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        what = "timed out (after the configured retries)"
    elif isinstance(exc, openai.APIConnectionError):
        what = "could not be reached (after the configured retries)"
    elif isinstance(exc, openai.AuthenticationError):
        what = "rejected the API key (check OPENAI_API_KEY / TRITONSMITH_API_KEY)"
    elif isinstance(exc, openai.NotFoundError):
        what = f"does not know the model {model!r} (check --model)"
    elif isinstance(exc, openai.RateLimitError):
        what = "rate-limited the request (after the configured retries)"
    elif _context_length(exc):
        what = "refused the prompt as longer than the model's context length"
    elif isinstance(exc, openai.InternalServerError):
        what = f"failed with HTTP {exc.status_code} (after the configured retries)"
    elif isinstance(exc, openai.APIStatusError):
        what = f"refused the request (HTTP {exc.status_code})"
    elif isinstance(exc, openai.APIResponseValidationError):
        what = "sent a reply that is not a valid chat completion"
    else:
        what = "refused the request"
    code = getattr(exc, "code", None)
    return f"the model server {server} {what}: {type(exc).__name__}{f' [{code}]' if code else ''}: {exc}"


def _model_label(model: Any) -> str:
    return str(getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__)
