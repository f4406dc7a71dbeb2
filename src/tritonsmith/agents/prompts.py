"""The LLM generator's prompts: named templates, rendered from a :class:`GenerationRequest`.

What the model sees: the rules of a candidate, the hardware it targets, the problem and its analysis,
kernels retrieved from memory, and on refinement the evaluator's and profiler's findings on earlier
attempts, trimmed to what it can act on (the latest failure in full, older ones in one line each).
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonsmith.agents.base import Attempt, GenerationRequest
from tritonsmith.core.contract import contract_text

__all__ = [
    "HARDWARE_FACTS",
    "EXAMPLES_DROPPED",
    "FOLLOWUP_PROMPT",
    "HISTORY_LINE",
    "LOOP_PROMPT",
    "NO_CODE_FEEDBACK",
    "PROBLEM_PROMPT",
    "REFINE_PROMPT",
    "RETRIEVED_PROMPT",
    "START_FROM_PROMPT",
    "SYSTEM_PROMPT",
    "TOOL_BUDGET_SPENT",
    "hardware_facts",
    "loop_facts",
    "render_followup",
    "render_request",
    "render_system",
    "trim",
]

SYSTEM_PROMPT = """\
You are an expert GPU kernel engineer. You write Triton kernels that reproduce a PyTorch reference \
exactly and run faster than torch.compile.

A candidate is one self-contained Python file that:
- imports torch, torch.nn as nn, triton and triton.language as tl;
- defines `class ModelNew(nn.Module)` taking the same constructor arguments as the reference `Model` \
(and holding the same parameters, under the same names, when `Model` has any);
- computes `forward` with one or more `@triton.jit` kernels launched from `forward`;
- returns outputs with the reference's shapes and dtypes, within tolerance (fp32: 1e-4, half: 1e-2) of the \
reference, or of the reference run in full fp32 where PyTorch used TF32 (cuDNN convolutions on a GPU); torch convolutions/matmuls you call yourself are then re-run in full fp32 too, if your output is already about as close to the exact answer as the reference's.

## What the evaluator accepts
{contract}

Write kernels the Triton way: one program per tile, masks on every load/store at the edges, \
`tl.constexpr` block sizes that are powers of two, fp32 accumulation, `num_warps` chosen for the tile.

Submit your candidate by calling the `submit_kernel` tool with the complete file, or, if you cannot \
call tools, answer with the complete file in a single ```python fenced block. Always submit the whole \
file, never a diff. You may call the other tools first (kernel search, web search, profiler), but only \
a few rounds: then submit."""

HARDWARE_FACTS: dict[str, str] = {
    "cuda": """\
Target: an NVIDIA data-centre GPU (H100/H200 class, sm_90): 132 SMs, 50 MB L2, up to 228 KB shared \
memory per SM, ~3.3-4.8 TB/s HBM, ~67 TFLOP/s fp32 on CUDA cores, ~990 TFLOP/s bf16/fp16 and ~495 \
TFLOP/s tf32 on tensor cores (tl.dot; on float32 operands it runs one-pass tf32 unless told otherwise, \
~1e-3 off, which fails a float32 problem as `wrong_output` or `precision_lowered`: input_precision="tf32x3", \
three passes, or "ieee" keep fp32 accuracy). Memory-bound ops win by reading \
each byte once (fuse, keep rows in registers, vectorised contiguous loads); compute-bound ops win with \
tl.dot tiles of 64-256, software pipelining (num_stages 3-4) and grouped tile ordering for L2 reuse.""",
    "cpu": """\
Target: the Triton CPU interpreter (no GPU here). Only correctness is checked, never speed. The \
interpreter runs the kernel with numpy: keep grids modest and block sizes <= 4096; bf16 arithmetic is \
wrong in the interpreter, so compute in fp32. tl.dot here computes what a GPU's tensor cores do: on \
float32 operands one-pass tf32 unless told otherwise, ~1e-3 off, which fails a float32 problem as \
`wrong_output` or `precision_lowered` (input_precision="tf32x3" or "ieee" keep fp32 accuracy). Write the kernel as you would for a GPU (it \
will run on one later).""",
}

PROBLEM_PROMPT = """\
## The reference to reproduce ({name})
```python
{source}
```

## Analysis
{analysis}"""

RETRIEVED_PROMPT = """\
## Verified kernels for similar problems (from memory; adapt, do not copy blindly)
{kernels}"""

START_FROM_PROMPT = """\
## The user's kernel to start from
Fix it if it is wrong, speed it up if it is right. Keep what works.
```python
{source}
```"""

REFINE_PROMPT = """\
## {who} (iteration {iteration}, {status})
```python
{source}
```

## What the evaluator (and profiler) found
{feedback}
{best}
Write the next candidate: fix the failure above first; if it was correct, make it faster."""

HISTORY_LINE = "- iteration {iteration} ({generator}): {status}: {message}"

EXAMPLES_DROPPED = ("(The verified kernels retrieved from memory were shown in your first request; "
                    "`kernel_search` finds them again.)")

LOOP_PROMPT = """\
## This run
- iterations left after this one: {left}{last}
- tools: up to {rounds} round(s) of tool calls before you must submit{evaluate}
- device: {device}"""

LOOP_DEVICE = {
    "cpu": ("the Triton CPU interpreter: correctness is checked, speed is not measured, and the first correct "
            "kernel ends the run, so make it correct first"),
    "cuda": ("a CUDA GPU: every correct kernel is timed against torch.compile (reward = s / (1 + s) for a speedup "
             "s); the run keeps the fastest correct kernel"),
}

FOLLOWUP_PROMPT = """\
## The evaluator's verdict on your iteration {iteration} ({status})
{feedback}
{best}
{loop}

Write the next candidate: fix the failure above first; if it was correct, make it faster. Submit the complete \
file."""

NO_CODE_FEEDBACK = """\
Your answer contained no code. Submit the complete candidate file now: call `submit_kernel` with it, \
or reply with a single ```python fenced block holding the whole file (with `class ModelNew`)."""

TOOL_BUDGET_SPENT = """\
You have used all your tool rounds. Submit the complete candidate now through `submit_kernel` (or one \
```python fenced block)."""

_LIMITS = {"source": 12000, "feedback": 3000, "example": 4000, "examples": 6000, "message": 200}
# After a context-length refusal: no retrieved examples, the last attempt only, shorter texts.
_COMPACT_LIMITS = {"source": 6000, "feedback": 1200, "example": 0, "examples": 0, "message": 120}


def trim(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and tail (errors often end a trace)."""
    text = text.strip()
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head - 40
    return f"{text[:head]}\n... ({len(text) - head - tail} characters trimmed) ...\n{text[-tail:]}"


def render_system(request: GenerationRequest, template: str = SYSTEM_PROMPT) -> str:
    """The system message: ``template`` with the contract of the policy in force filled in."""
    return template.replace("{contract}", contract_text(request.policy))


def hardware_facts(device: str) -> str:
    return HARDWARE_FACTS["cpu" if device == "cpu" else "cuda"]


def render_request(request: GenerationRequest, *, compact: bool = False, tool_rounds: int | None = None,
                   evaluate_tool: bool = False) -> str:
    """The user message of a fresh conversation: problem, hardware, memory, user kernel, findings so far,
    and where the run stands (iterations left, tool rounds, device).

    Retrieved examples are sent once, in the first iteration, within ``_LIMITS["examples"]`` characters.
    ``compact`` (after the model refused a prompt as too long): no examples, only the last attempt,
    shorter code and feedback.
    """
    limits = _COMPACT_LIMITS if compact else _LIMITS
    p = request.problem
    parts = [PROBLEM_PROMPT.format(name=p.name, source=trim(p.source, limits["source"]),
                                   analysis=request.analysis.strip() or "(no analysis available)"),
             "## Hardware\n" + hardware_facts(request.device)]
    if request.examples and not request.history and limits["examples"]:
        parts.append(RETRIEVED_PROMPT.format(kernels=_examples(request.examples, limits)))
    if request.start_from and not request.history:
        parts.append(START_FROM_PROMPT.format(source=trim(request.start_from, limits["source"])))
    if request.history:
        parts.append(_render_history(request.history[-1:] if compact else request.history, limits))
    parts.append(loop_facts(request, tool_rounds=tool_rounds, evaluate_tool=evaluate_tool))
    return "\n\n".join(parts)


def render_followup(request: GenerationRequest, *, tool_rounds: int | None = None, evaluate_tool: bool = False) -> str:
    """What continues the model's own conversation: the verdict on the candidate it submitted last, the best
    so far, and where the run stands (its code and earlier tool results are already in the conversation)."""
    last = request.history[-1]
    best = _best_line(request.history)
    return FOLLOWUP_PROMPT.format(iteration=last.iteration, status=_status(last),
                                  feedback=trim(last.feedback, _LIMITS["feedback"]), best=best,
                                  loop=loop_facts(request, tool_rounds=tool_rounds, evaluate_tool=evaluate_tool))


def loop_facts(request: GenerationRequest, *, tool_rounds: int | None = None, evaluate_tool: bool = False) -> str:
    """Where the run stands: iterations left, the tool budget, the device and whether speed is measured."""
    left = request.iterations_left
    return LOOP_PROMPT.format(
        left="unknown" if left is None else left, last=" (this is the last one: submit your best)" if left == 0 else "",
        rounds="several" if tool_rounds is None else tool_rounds,
        evaluate="; `evaluate_kernel` checks a draft on one trial (it spends a round)" if evaluate_tool else "",
        device=LOOP_DEVICE["cpu" if request.device == "cpu" else "cuda"])


def _examples(examples: Sequence[str], limits: dict[str, int]) -> str:
    """The retrieved kernels, best first, each within ``example`` and all within ``examples`` characters."""
    out: list[str] = []
    room = limits["examples"]
    for e in examples[:3]:
        if room < 400:
            break
        text = trim(e, min(limits["example"], room))
        out.append(f"```python\n{text}\n```")
        room -= len(text)
    return "\n\n".join(out)


def _render_history(history: Sequence[Attempt], limits: dict[str, int] = _LIMITS) -> str:
    last = history[-1]
    earlier = [HISTORY_LINE.format(iteration=a.iteration, generator=a.generator or "?", status=_status(a),
                                   message=trim(_message(a), limits["message"])) for a in history[:-1]]
    best = _best_line(history)
    text = ""
    if earlier:
        text = "## Earlier attempts\n" + "\n".join(earlier) + "\n\n"
    if last.source is None:
        return text + f"## Your previous answer (iteration {last.iteration})\n{trim(last.feedback, limits['feedback'])}"
    who = "The user's kernel" if last.generator == "user" else "Your previous attempt"
    return text + REFINE_PROMPT.format(
        who=who, iteration=last.iteration, status=_status(last), source=trim(last.source, limits["source"]),
        feedback=trim(last.feedback, limits["feedback"]),
        best=f"\n{best}\n" if best else "")


def _status(a: Attempt) -> str:
    return a.result.status.value if a.result is not None else "no code"


def _message(a: Attempt) -> str:
    if a.result is not None:
        return a.result.message
    return a.feedback.splitlines()[0] if a.feedback else "no code"


def _best_line(history: Sequence[Attempt]) -> str:
    verified = [a for a in history if a.result is not None and a.result.ok]
    if not verified or verified[-1] is history[-1]:
        return ""
    b = max(verified, key=lambda a: a.reward)
    return (f"Best verified so far: iteration {b.iteration} (reward {b.reward:.2f}). "
            "Keep its approach if your new idea fails.")
