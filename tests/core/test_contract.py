"""One contract: the prompt, the feedback, the reward and the memory state the evaluator's rules and policy.

The rule list is read from the evaluator's own sources (every ``reject("rule", ...)``, ``report.add("rule",
...)``, ``rule="..."`` and ``(rule, message)`` pair), so a rule added to the evaluator without an entry in
the evaluator's registry (core/rules.py) fails here, and so does a prompt that leaves a rule out.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import tritonsmith.evaluator as evaluator_pkg
from tritonsmith.agents.base import GenerationRequest
from tritonsmith.agents.prompts import SYSTEM_PROMPT, render_system
from tritonsmith.core.contract import (
    HYBRID_REWARD_FACTOR,
    POLICIES,
    POLICY_ALLOWS,
    RULES,
    contract_text,
    torch_computes,
)
from tritonsmith.graphs.reward import reward_for
from tritonsmith.core.problem import Problem
from tritonsmith.core.results import ChecksReport, EvalResult, EvalStatus, TorchOpUse

_RULE = re.compile(r"^[a-z][a-z0-9_]+$")
# Rules of the evaluator's #17 work (memoised results are caught as benchmark_output_wrong).
ANNOUNCED = {"side_stream", "decorative_kernel", "faster_than_light", "output_reused", "benchmark_output_wrong"}


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _rule_pair(node: ast.AST | None) -> str | None:
    """``("rule", "a message with spaces")``: how the checks' tables and ``policy_findings`` name a rule."""
    if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
        return None
    rule, why = _str(node.elts[0]), node.elts[1]
    message = isinstance(why, ast.JoinedStr) or " " in (_str(why) or "")
    return rule if rule and _RULE.match(rule) and message else None


def evaluator_rules(path: Path) -> set[str]:
    """Every rule name an evaluator module can reject with (``reject``/``report.add`` calls, ``rule=``, the
    checks' (rule, why) tables and what ``*_findings`` functions return)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            owner = getattr(f.value, "id", "") if isinstance(f, ast.Attribute) else ""
            first = _str(node.args[0]) if node.args else None
            if first and (name == "reject" or (name == "add" and owner == "report")):
                found.add(first)
            found |= {r for kw in node.keywords if kw.arg == "rule" and (r := _str(kw.value))}
        elif isinstance(node, ast.Dict):
            found |= {r for v in node.values if (r := _rule_pair(v))}
        elif isinstance(node, ast.DictComp) and (r := _rule_pair(node.value)):
            found.add(r)
        elif isinstance(node, ast.FunctionDef) and node.name.endswith("findings"):  # policy_findings' returns
            found |= {r for n in ast.walk(node) if isinstance(n, ast.Return) and (r := _rule_pair(n.value))}
    return found


def _evaluator_files() -> list[Path]:
    return sorted(Path(evaluator_pkg.__file__).parent.rglob("*.py"))


def test_every_rule_of_the_evaluator_is_in_the_contract():
    found: dict[str, str] = {}
    for path in _evaluator_files():
        for rule in evaluator_rules(path):
            found.setdefault(rule, path.name)
    assert {"pytorch_fallback", "evaluator_access", "torch_does_the_work", "hidden_work", "input_mutated"} <= set(found)
    missing = {r: f for r, f in found.items() if r not in RULES}
    assert not missing, f"rules the evaluator rejects with but the contract does not state: {missing}"
    assert ANNOUNCED <= set(RULES)
    assert set(POLICY_ALLOWS) == set(POLICIES)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_prompt_names_the_policy_and_every_rejecting_rule(policy, softmax_reference):
    request = GenerationRequest(problem=Problem.from_file(softmax_reference), iteration=1, policy=policy)
    system = render_system(request, SYSTEM_PROMPT)
    assert f"Policy in force: `{policy}`" in system and "{contract}" not in system
    for rule in RULES:
        assert f"`{rule}`" in system, rule
    rule_names = set()
    for path in _evaluator_files():
        rule_names |= evaluator_rules(path)
    assert all(f"`{r}`" in system for r in rule_names)
    other = next(p for p in POLICIES if p != policy)
    assert f"Policy in force: `{other}`" not in system
    with pytest.raises(ValueError, match="policy"):
        contract_text("lenient")


def _correct(ops: tuple[TorchOpUse, ...], policy: str = "hybrid") -> EvalResult:
    return EvalResult(status=EvalStatus.CORRECT, message="correct on 1 trials", problem="p", device="cpu",
                      device_name="CPU", tolerance="kernelbench", checks=ChecksReport(policy=policy, torch_ops=ops))


def test_a_hybrid_kernel_says_what_torch_computed_and_earns_less():
    ops = (TorchOpUse(op="torch.logsumexp", line=12, origin="static"),
           TorchOpUse(op="logsumexp", count=1, origin="runtime"))
    hybrid, pure = _correct(ops), _correct(())
    assert torch_computes(hybrid.checks) == ("logsumexp",)  # what ran wins over what the source shows
    assert torch_computes(hybrid.checks.__dict__ | {"torch_ops": [o.__dict__ for o in ops]}) == ("logsumexp",)
    r_h, r_p = reward_for(hybrid), reward_for(pure)
    assert r_p.value == 0.5 and r_h.value == pytest.approx(0.5 * HYBRID_REWARD_FACTOR)
    assert "torch computes: logsumexp" in r_h.note and "torch computes" not in r_p.note
    feedback = hybrid.feedback()
    assert "torch computes: logsumexp (hybrid policy" in feedback
    assert "torch computes" not in pure.feedback()


def test_rejection_feedback_carries_the_rules_fix():
    result = EvalResult(status=EvalStatus.REJECTED, message="rejected (evaluator_access): line 3: uses os.environ",
                        problem="p", device="cpu", device_name="CPU", tolerance="kernelbench",
                        rule="evaluator_access")
    text = result.feedback()
    assert "rule broken: evaluator_access (file, environment" in text and "Fix: remove file and environment" in text
