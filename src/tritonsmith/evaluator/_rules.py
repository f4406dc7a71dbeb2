"""The evaluator's rules: the registry lives in :mod:`tritonsmith.core.rules` (the prompt, the feedback, the
reports and the memory read it from the bottom layer); the evaluator's modules keep importing it from here."""

from __future__ import annotations

from tritonsmith.core.rules import RULES, Rule, rule, rules_text

__all__ = ["RULES", "Rule", "rule", "rules_text"]
