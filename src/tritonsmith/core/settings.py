"""Run settings: argument > run context (LangGraph runtime context) > environment > default.

Two dataclasses:

- :class:`KernelContext`: a *layer* of settings where every field is optional (``None`` = "not given").
  It is the graph's ``context_schema``: ``graph.invoke(state, context=KernelContext(iterations=5))``
  (or a plain dict with the same keys).
- :class:`Settings`: the resolved, concrete values. Build one with :meth:`Settings.resolve`.

Environment variables (all optional)::

    TRITONSMITH_MODEL, TRITONSMITH_BASE_URL (else OPENAI_BASE_URL), TRITONSMITH_API_KEY (else OPENAI_API_KEY),
    TRITONSMITH_GENERATOR (auto|llm|builtin), TRITONSMITH_ITERATIONS, TRITONSMITH_DEVICE, TRITONSMITH_TOLERANCE,
    TRITONSMITH_POLICY (hybrid|strict),
    TRITONSMITH_TRIALS, TRITONSMITH_EVAL_TIMEOUT, TRITONSMITH_LLM_TIMEOUT, TRITONSMITH_MAX_RETRIES,
    TRITONSMITH_MAX_TOOL_ROUNDS, TRITONSMITH_TEMPERATURE, TRITONSMITH_TARGET_SPEEDUP, TRITONSMITH_SCALE,
    TRITONSMITH_MEMORY_DIR, TRITONSMITH_USE_MEMORY, TRITONSMITH_INPUT_COST, TRITONSMITH_OUTPUT_COST,
    TRITONSMITH_LLM_CONTEXT_TOKENS, TRITONSMITH_MAX_DRAFT_EVALUATIONS, TRITONSMITH_RECORD_DIR
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ENV", "GeneratorChoice", "KernelContext", "Settings"]

GeneratorChoice = Literal["auto", "llm", "builtin"]


def _layer(*env: str, show: bool = True) -> Any:
    """A :class:`KernelContext` field: unset (None) by default, read from the first of ``env`` that is set."""
    return field(default=None, repr=show, metadata={"env": env})


@dataclass(frozen=True, kw_only=True)
class KernelContext:
    """One layer of settings; ``None`` means "not set here". See :class:`Settings` for the meaning of each.

    Each field also names its environment variables (``_layer(...)``): this class is the one list of
    settings, and :data:`ENV` is read from it.
    """

    model: str | None = _layer("TRITONSMITH_MODEL")
    base_url: str | None = _layer("TRITONSMITH_BASE_URL", "OPENAI_BASE_URL")
    api_key: str | None = _layer("TRITONSMITH_API_KEY", "OPENAI_API_KEY", show=False)
    generator: GeneratorChoice | None = _layer("TRITONSMITH_GENERATOR")
    iterations: int | None = _layer("TRITONSMITH_ITERATIONS")
    device: str | None = _layer("TRITONSMITH_DEVICE")
    tolerance: str | None = _layer("TRITONSMITH_TOLERANCE")
    policy: str | None = _layer("TRITONSMITH_POLICY")
    trials: int | None = _layer("TRITONSMITH_TRIALS")
    eval_timeout_s: float | None = _layer("TRITONSMITH_EVAL_TIMEOUT")
    llm_timeout_s: float | None = _layer("TRITONSMITH_LLM_TIMEOUT")
    max_retries: int | None = _layer("TRITONSMITH_MAX_RETRIES")
    max_tool_rounds: int | None = _layer("TRITONSMITH_MAX_TOOL_ROUNDS")
    temperature: float | None = _layer("TRITONSMITH_TEMPERATURE")
    target_speedup: float | None = _layer("TRITONSMITH_TARGET_SPEEDUP")
    scale: bool | None = _layer("TRITONSMITH_SCALE")
    memory_dir: str | None = _layer("TRITONSMITH_MEMORY_DIR")
    use_memory: bool | None = _layer("TRITONSMITH_USE_MEMORY")
    profile: bool | None = _layer("TRITONSMITH_PROFILE")
    input_cost_per_mtok: float | None = _layer("TRITONSMITH_INPUT_COST")
    output_cost_per_mtok: float | None = _layer("TRITONSMITH_OUTPUT_COST")
    llm_context_tokens: int | None = _layer("TRITONSMITH_LLM_CONTEXT_TOKENS")
    max_draft_evaluations: int | None = _layer("TRITONSMITH_MAX_DRAFT_EVALUATIONS")
    record_dir: str | None = _layer("TRITONSMITH_RECORD_DIR")


# field -> environment variables, first set wins
ENV: dict[str, tuple[str, ...]] = {f.name: f.metadata["env"] for f in dataclasses.fields(KernelContext)}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Resolved settings of one optimisation run.

    Attributes:
        model: chat model name for the LLM generator.
        base_url: OpenAI-compatible server (vLLM, Ollama, a proxy); None = OpenAI.
        api_key: key for that server (a local server without auth gets a placeholder).
        generator: ``auto`` (the LLM when a key or base URL is configured, else the built-in one),
            ``llm`` or ``builtin``.
        iterations: generated candidates per problem (a user's ``--from`` kernel is extra).
        device: ``auto``, ``cuda`` or ``cpu`` (Triton interpreter: correctness only, no timing).
        tolerance / policy / trials / eval_timeout_s / scale: passed to the evaluator (policy: ``hybrid``
            lets torch keep some ops, reported; ``strict``: all compute in Triton).
        llm_timeout_s / max_retries: always given to the chat client (no network call may hang).
        max_tool_rounds: tool-calling rounds the LLM may use per candidate before it must submit.
        temperature: sampling temperature (None = the server's default).
        target_speedup: stop refining once the best kernel is this much faster than torch.compile
            (None = use every iteration). Without a timing (CPU) the first verified kernel ends the run.
        memory_dir / use_memory: where the kernel memory lives, and whether to use it at all.
        profile: profile each verified attempt that a later iteration refines (GPU only; one profile
            costs 20-40 s on an H200, several evaluations' worth). Off: refinement reads verdicts only.
        input_cost_per_mtok / output_cost_per_mtok: USD per million tokens, to price a run (None = unpriced).
        llm_context_tokens: refinement continues the model's conversation (its earlier code and tool results
            stay in context) while it stays under this many tokens (estimated as characters / 4); past it,
            the next iteration starts a fresh, shorter prompt.
        max_draft_evaluations: ``evaluate_kernel`` calls (one trial each) the model may make per iteration.
        record_dir: record every request to the chat model and its reply in ``record_dir/transcript.json``.
    """

    model: str = "gpt-4.1"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    generator: GeneratorChoice = "auto"
    iterations: int = 3
    device: str = "auto"
    tolerance: str = "kernelbench"
    policy: str = "hybrid"
    trials: int = 5
    eval_timeout_s: float | None = None
    llm_timeout_s: float = 120.0
    max_retries: int = 2
    max_tool_rounds: int = 4
    temperature: float | None = None
    target_speedup: float | None = None
    scale: bool = False
    memory_dir: str | None = None
    use_memory: bool = True
    profile: bool = True
    input_cost_per_mtok: float | None = None
    output_cost_per_mtok: float | None = None
    llm_context_tokens: int = 32000
    max_draft_evaluations: int = 2
    record_dir: str | None = None

    def __post_init__(self) -> None:
        if self.generator not in ("auto", "llm", "builtin"):
            raise ValueError(f"generator must be auto, llm or builtin, not {self.generator!r}")
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"device must be auto, cuda or cpu, not {self.device!r}")
        if self.iterations < 1:
            raise ValueError(f"iterations must be at least 1, got {self.iterations}")
        if self.trials < 1 or self.max_retries < 0 or self.max_tool_rounds < 0 or self.max_draft_evaluations < 0:
            raise ValueError("trials must be >= 1, max_retries, max_tool_rounds and max_draft_evaluations >= 0")
        if self.llm_context_tokens < 1000:
            raise ValueError(f"llm_context_tokens must be at least 1000, got {self.llm_context_tokens}")
        if self.llm_timeout_s <= 0:
            raise ValueError(f"llm_timeout_s must be positive, got {self.llm_timeout_s}")

    @property
    def llm_configured(self) -> bool:
        """True when a key or a server URL says where an LLM is."""
        return bool(self.api_key or self.base_url)

    @classmethod
    def resolve(
        cls,
        arguments: KernelContext | Mapping[str, Any] | None = None,
        context: Any = None,
        *,
        env: Mapping[str, str] | None = None,
    ) -> Settings:
        """Merge the layers: ``arguments`` > ``context`` (run context) > ``env`` > the defaults above.

        ``context`` may be a :class:`KernelContext`, a mapping, or any object: fields it lacks are
        skipped, so a parent graph's own context schema does not break a mounted kernel graph.
        """
        env_layer = _from_env(os.environ if env is None else env)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(KernelContext):
            for layer in (arguments, context, env_layer):
                value = _get(layer, f.name)
                if value is not None:
                    values[f.name] = value
                    break
        return cls(**values)

    @classmethod
    def resolve_cached(cls, arguments: KernelContext | None, context: Any, cache: dict[Any, Settings]) -> Settings:
        """:meth:`resolve`, once per distinct (arguments, run context, environment): every node of a run gets
        the same object instead of merging and validating the layers again. ``cache`` is the caller's (one
        per graph); it keeps the latest 32 entries."""
        try:
            key = (_layer_key(arguments), _layer_key(context), _env_key(os.environ))
            hash(key)
        except TypeError:  # an unhashable value in a context mapping: resolve without caching
            return cls.resolve(arguments, context)
        settings = cache.get(key)
        if settings is None:
            settings = cache[key] = cls.resolve(arguments, context)
            while len(cache) > 32:
                cache.pop(next(iter(cache)))
        return settings

    def public_dict(self) -> dict[str, Any]:
        """The settings with the key masked (for reports and logs)."""
        data = dataclasses.asdict(self)
        data["api_key"] = "***" if self.api_key else None
        return data


def _get(layer: Any, name: str) -> Any:
    if layer is None:
        return None
    if isinstance(layer, Mapping):
        return layer.get(name)
    return getattr(layer, name, None)


def _layer_key(layer: Any) -> tuple[Any, ...]:
    return tuple(_get(layer, f.name) for f in dataclasses.fields(KernelContext))


def _env_key(env: Mapping[str, str]) -> tuple[str | None, ...]:
    return tuple(env.get(k) for keys in ENV.values() for k in keys)


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    hints = {f.name: str(f.type) for f in dataclasses.fields(KernelContext)}
    out: dict[str, Any] = {}
    for name, keys in ENV.items():
        raw = next((env[k] for k in keys if env.get(k, "").strip()), None)
        if raw is None:
            continue
        out[name] = _parse(raw.strip(), hints[name], keys[0])
    return out


def _parse(raw: str, hint: str, var: str) -> Any:
    try:
        if hint.startswith("int"):
            return int(raw)
        if hint.startswith("float"):
            return float(raw)
    except ValueError:
        raise ValueError(f"environment variable {var}={raw!r} is not a number") from None
    if hint.startswith("bool"):
        if raw.lower() in ("1", "true", "yes", "on"):
            return True
        if raw.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"environment variable {var}={raw!r} is not a boolean (use 1/0, true/false)")
    return raw
