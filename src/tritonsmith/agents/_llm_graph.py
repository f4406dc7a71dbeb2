"""The LLM generator's conversation as a small LangGraph subgraph: a model node and a ``ToolNode``.

    START -> agent -> tools -> tally -> agent ...        (a tool round: the reply's tool calls, run in order)
             agent -> nudge -> agent                     (no code, or a bad submission: said so, a few times)
             agent -> shorten -> agent                   (the prompt exceeded the context: once, shorter)
             agent -> END                                (a submission, a model error, or no code too often)

Each step is a node, so a parent graph with a checkpointer checkpoints every tool call, streams them
(``stream_mode="updates"``, ``subgraphs=True``) and can stop before one (``interrupt_before=["tools"]``)
and resume from the checkpoint. The state is JSON-able (messages, counters, strings): any checkpointer
holds it. :class:`~tritonsmith.agents.llm.LLMGenerator` builds one per candidate (the tools are bound to
the problem) and reads the outcome from the final state.
"""

from __future__ import annotations

import logging
import operator
import uuid
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, ToolException
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest, ToolInvocationError

from tritonsmith.tools import SUBMIT_TOOL_NAME
from tritonsmith.agents._parse import extract_code, source_from_tool_args, text_of
from tritonsmith.agents.prompts import NO_CODE_FEEDBACK, TOOL_BUDGET_SPENT

__all__ = ["LLM_NODE_NAMES", "LLMState", "ModelCall", "ModelError", "build_llm_subgraph", "conversation_ended",
           "recursion_limit", "submission"]

log = logging.getLogger(__name__)

LLM_NODE_NAMES = ("agent", "tools", "tally", "nudge", "shorten")


class ModelError(TypedDict):
    """A model call that failed (the server, the network, an unparseable reply), as the state keeps it."""

    message: str
    fatal: bool
    context_length: bool


# (messages, offer_tools) -> the model's reply, or why there is none. ``offer_tools`` is False once the
# tool-round budget is spent (only ``submit_kernel`` is bound then).
ModelCall = Callable[[list[BaseMessage], bool], "AIMessage | ModelError"]


def _add_cost(left: float | None, right: float | None) -> float | None:
    return right if left is None else left if right is None else left + right


class LLMState(TypedDict, total=False):
    """One candidate's conversation. Counters and tokens add up over the run (the shortened retry too)."""

    messages: Annotated[list[AnyMessage], add_messages]
    rounds: int  # tool rounds spent
    no_code: int  # answers without usable code so far (each fed back)
    compact: bool  # the prompt was shortened after a context-length error
    input_tokens: Annotated[int, operator.add]
    output_tokens: Annotated[int, operator.add]
    reported_cost: Annotated[float | None, _add_cost]  # what the server said the replies cost, if it did
    source: str | None  # the submitted file
    problem: str | None  # what was wrong with the last reply's submission (or a note on a recovered one)
    error: ModelError | None


def build_llm_subgraph(
    *,
    call_model: ModelCall,
    tools: Sequence[BaseTool],
    max_tool_rounds: int,
    max_no_code_replies: int,
    shortened: Callable[[], list[BaseMessage]] | None = None,
) -> StateGraph:
    """The uncompiled conversation graph for one candidate; its input is ``{"messages": opening}``.

    Args:
        call_model: asks the model (bound to ``tools`` + ``submit_kernel``, or to ``submit_kernel`` alone).
        tools: the tools the model may call (``submit_kernel`` is never run: it ends the conversation).
        max_tool_rounds: tool rounds before only ``submit_kernel`` is offered.
        max_no_code_replies: answers without code fed back before giving up.
        shortened: the opening messages without examples and with a short history, sent once when the
            server refuses the prompt as longer than the model's context; None = no retry.
    """
    graph = StateGraph(LLMState)
    graph.add_node("agent", _agent(call_model, max_tool_rounds))
    tool_node = ToolNode(list(tools), handle_tool_errors=False, wrap_tool_call=_tool_call_wrapper(tools))
    # one call at a time, in the order the model gave them: two timed tools must not share the GPU
    graph.add_node("tools", tool_node.with_config(max_concurrency=1))
    graph.add_node("tally", _tally(max_tool_rounds))
    graph.add_node("nudge", _nudge)
    graph.add_node("shorten", _shorten(shortened))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", _router(max_tool_rounds, max_no_code_replies, retry=shortened is not None),
        {"tools": "tools", "nudge": "nudge", "shorten": "shorten", END: END})
    graph.add_edge("tools", "tally")
    graph.add_edge("tally", "agent")
    graph.add_edge("nudge", "agent")
    graph.add_edge("shorten", "agent")
    return graph


def conversation_ended(state: LLMState, *, max_tool_rounds: int, max_no_code_replies: int) -> bool:
    """Whether ``state`` is where the conversation ends (not a stop before a node: an interrupt)."""
    messages = state.get("messages") or []
    if not messages or (not isinstance(messages[-1], AIMessage) and state.get("error") is None):
        return False
    return _router(max_tool_rounds, max_no_code_replies, retry=True)(state) == END


def recursion_limit(max_tool_rounds: int, max_no_code_replies: int) -> int:
    """Steps a conversation can take at most (twice: the shortened retry), with room to spare."""
    once = 3 * max_tool_rounds + 2 * (max_no_code_replies + 1) + 2
    return 2 * once + 10


# -- nodes ------------------------------------------------------------------------------------------
def _agent(call_model: ModelCall, max_tool_rounds: int) -> Callable[[LLMState], dict[str, Any]]:
    def agent(state: LLMState) -> dict[str, Any]:
        """Ask the model (tools while the budget lasts, then ``submit_kernel`` only); read its submission."""
        messages = list(state["messages"])
        reply = call_model(messages, state.get("rounds", 0) < max_tool_rounds)
        if not isinstance(reply, AIMessage):
            return {"error": reply}
        if reply.id is None or any(m.id == reply.id for m in messages):  # an id is what add_messages merges on
            reply = reply.model_copy(update={"id": f"reply-{uuid.uuid4().hex}"})
        source, problem = submission(reply)
        return {"messages": [reply], "source": source, "problem": problem, **_usage(reply)}

    return agent


def _tally(max_tool_rounds: int) -> Callable[[LLMState], dict[str, Any]]:
    def tally(state: LLMState) -> dict[str, Any]:
        """Count the round; the last result says how many are left, and a spent budget is said plainly."""
        rounds = state.get("rounds", 0) + 1
        last = state["messages"][-1]
        left = max_tool_rounds - rounds
        noted = last.model_copy(update={
            "content": f"{text_of(last.content)}\n\n({left} tool round(s) left before you must submit)"})
        out: list[BaseMessage] = [noted]  # same id: replaces the result in place
        if rounds == max_tool_rounds:
            out.append(HumanMessage(TOOL_BUDGET_SPENT))
        return {"rounds": rounds, "messages": out}

    return tally


def _nudge(state: LLMState) -> dict[str, Any]:
    """An answer without usable code: answer its tool calls unrun, say what is missing."""
    reply = state["messages"][-1]
    problem = state.get("problem")
    ids = [c.get("id") for c in [*getattr(reply, "tool_calls", []), *getattr(reply, "invalid_tool_calls", [])]]
    declined = [ToolMessage("not run: submit your kernel now", tool_call_id=i, status="error") for i in ids if i]
    feedback = HumanMessage(f"{problem}\n\n{NO_CODE_FEEDBACK}" if problem else NO_CODE_FEEDBACK)
    return {"messages": [*declined, feedback], "no_code": state.get("no_code", 0) + 1, "problem": None}


def _shorten(shortened: Callable[[], list[BaseMessage]] | None) -> Callable[[LLMState], dict[str, Any]]:
    def shorten(state: LLMState) -> dict[str, Any]:
        """Start over once with the shortened prompt (the tokens spent so far still count)."""
        if shortened is None:  # the router never comes here without it
            raise RuntimeError("shorten ran without a shortened prompt (graph wiring error)")
        log.warning("the prompt exceeded the model's context length: retrying once with a shorter prompt")
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *shortened()], "compact": True, "rounds": 0,
                "no_code": 0, "error": None, "problem": None, "source": None}

    return shorten


# -- routing ----------------------------------------------------------------------------------------
Route = Literal["tools", "nudge", "shorten", "__end__"]


def _router(max_tool_rounds: int, max_no_code_replies: int, *, retry: bool) -> Callable[[LLMState], Route]:
    def route_after_agent(state: LLMState) -> Route:
        """Submission or model error: end (a context-length error first retries shorter, once). Tool calls
        within the budget: run them. Anything else is an answer without code: nudge, or give up."""
        error = state.get("error")
        if error is not None:
            return "shorten" if error["context_length"] and retry and not state.get("compact") else END
        if state.get("source") is not None:
            return END
        reply = state["messages"][-1]
        calls = [c for c in getattr(reply, "tool_calls", []) if c["name"] != SUBMIT_TOOL_NAME]
        if calls and state.get("rounds", 0) < max_tool_rounds and state.get("problem") is None:
            return "tools"
        return "nudge" if state.get("no_code", 0) + 1 <= max_no_code_replies else END

    return route_after_agent


# -- the tools node's per-call handling ------------------------------------------------------------
def _tool_call_wrapper(tools: Sequence[BaseTool]) -> Callable[[ToolCallRequest, Callable[..., Any]], Any]:
    """Unknown tools and bad arguments go back to the model as error results; anything else raises."""
    known = ", ".join(sorted([*(t.name for t in tools), SUBMIT_TOOL_NAME]))

    def one_call(request: ToolCallRequest, execute: Callable[[ToolCallRequest], Any]) -> Any:
        call = request.tool_call
        if request.tool is None:
            return ToolMessage(f"unknown tool {call['name']!r}; available: {known}", tool_call_id=call["id"],
                               name=call["name"], status="error")
        try:
            result = execute(request)
        except ToolInvocationError as exc:  # arguments the tool's schema rejects
            result = ToolMessage(f"{call['name']} failed: {exc.source}", tool_call_id=call["id"],
                                 name=call["name"], status="error")
        except ToolException as exc:  # the tool's own "cannot do that" for these arguments
            result = ToolMessage(f"{call['name']} failed: {exc}", tool_call_id=call["id"], name=call["name"],
                                 status="error")
        log.info("tool %s called by the model", call["name"])
        return result

    return one_call


# -- reading a reply --------------------------------------------------------------------------------
def submission(reply: AIMessage) -> tuple[str | None, str | None]:
    """(source, problem): the submitted code, or what was wrong with the submission."""
    for call in reply.tool_calls:
        if call["name"] == SUBMIT_TOOL_NAME:
            source = source_from_tool_args(call["args"])
            if source:
                notes = call["args"].get("notes") if isinstance(call["args"], dict) else None
                return source, (notes or None)
            return None, "Your submit_kernel call had no `source` argument with the file in it (or it was empty)."
    for bad in reply.invalid_tool_calls:
        if bad.get("name") == SUBMIT_TOOL_NAME:
            source = source_from_tool_args(bad.get("args") or "")
            if source:
                return source, "recovered from malformed submit_kernel arguments"
            return None, f"Your submit_kernel call had malformed arguments ({bad.get('error') or 'invalid JSON'})."
    source = extract_code(text_of(reply.content))
    return source, None


def _usage(reply: AIMessage) -> dict[str, Any]:
    """The reply's tokens, and the cost the server reported for it (if it did)."""
    usage = reply.usage_metadata or {}
    token_usage = (reply.response_metadata or {}).get("token_usage") or {}
    cost = token_usage.get("cost") if isinstance(token_usage, dict) else None
    return {"input_tokens": int(usage.get("input_tokens", 0) or 0),
            "output_tokens": int(usage.get("output_tokens", 0) or 0),
            "reported_cost": float(cost) if isinstance(cost, (int, float)) else None}
