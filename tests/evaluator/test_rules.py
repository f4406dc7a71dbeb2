"""The rule registry is the one list: the README's table shows exactly its rules, and an unknown rule
name is refused where a rejection is made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tritonsmith.evaluator._guards import reject
from tritonsmith.evaluator._rules import RULES, rule, rules_text

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_lists_every_rule_and_nothing_else():
    text = README.read_text()
    table = text[text.index("<!-- rules-table -->"):]
    table = table[: table.index("\n\n", table.index("|---"))]
    names = re.findall(r"^\| `([a-z_]+)` \| (static|runtime|timing) \|", table, flags=re.M)
    assert [n for n, _ in names] == list(RULES)
    assert all(RULES[n].layer == layer for n, layer in names)


def test_unknown_rule_names_are_our_bug():
    with pytest.raises(KeyError, match="unknown evaluator rule"):
        rule("made_up_rule")
    with pytest.raises(KeyError):
        reject("made_up_rule", "trial 1", "x")
    assert reject("side_stream", "benchmark", "seen").rule == "side_stream"


def test_rules_text_gives_each_rule_its_fix():
    text = rules_text(layers=("timing",))
    assert text.count("\n") == sum(r.layer == "timing" for r in RULES.values()) - 1
    assert "faster_than_light" in text and "(fix:" in text and "no_triton_kernel" not in text
