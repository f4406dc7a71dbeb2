"""Call one tritonsmith tool on its own, as an agent would: the evaluator, bound to a problem.

    python examples/call_tool.py

The tool returns what the model reads (the evaluator's findings) and, as its artifact, the full
EvalResult as a dict. Any LangChain agent can be given this tool.
"""

from __future__ import annotations

from tritonsmith.examples import example_path
from tritonsmith.tools import make_evaluate_tool


def main() -> None:
    tool = make_evaluate_tool(example_path("softmax_reference.py"), device="auto", trials=2)
    candidate = example_path("softmax_triton.py").read_text()
    broken = candidate.replace("out = num / tl.sum(num, axis=0)", "out = num / (tl.sum(num, axis=0) + 1.0)")

    for label, source in (("bundled kernel", candidate), ("broken kernel", broken)):
        message = tool.invoke({"type": "tool_call", "id": label, "name": tool.name,
                               "args": {"candidate_source": source}})
        print(f"--- {label}: status {message.artifact.get('status')}")
        print(message.content)


if __name__ == "__main__":
    main()
