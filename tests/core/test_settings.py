"""Settings: one list of fields (the context names their environment variables), resolved once per run."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tritonsmith.core.settings import ENV, KernelContext, Settings


def test_context_settings_and_environment_name_the_same_fields():
    names = [f.name for f in dataclasses.fields(KernelContext)]
    assert names == [f.name for f in dataclasses.fields(Settings)] == list(ENV)
    assert ENV["api_key"] == ("TRITONSMITH_API_KEY", "OPENAI_API_KEY")
    assert "sk-secret" not in repr(KernelContext(api_key="sk-secret"))


def test_resolve_cached_resolves_once_per_context_and_environment(monkeypatch: pytest.MonkeyPatch):
    calls: list[Any] = []
    real = Settings.resolve.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Settings], arguments: Any = None, context: Any = None, **kwargs: Any) -> Settings:
        calls.append(context)
        return real(cls, arguments, context, **kwargs)

    monkeypatch.setattr(Settings, "resolve", classmethod(counting))
    monkeypatch.delenv("TRITONSMITH_TRIALS", raising=False)
    cache: dict[Any, Settings] = {}
    arguments = KernelContext(iterations=2)
    first = Settings.resolve_cached(arguments, {"device": "cpu"}, cache)
    again = Settings.resolve_cached(arguments, {"device": "cpu"}, cache)  # the next node of the same run
    assert again is first and len(calls) == 1 and first.iterations == 2 and first.device == "cpu"
    monkeypatch.setenv("TRITONSMITH_TRIALS", "2")  # another run, another environment: resolved anew
    later = Settings.resolve_cached(arguments, {"device": "cpu"}, cache)
    assert later is not first and later.trials == 2 and len(calls) == 2
    odd = Settings.resolve_cached(arguments, {"device": "cpu", "model": ["m"]}, cache)  # unhashable: not cached
    assert odd.device == "cpu" and len(calls) == 3
