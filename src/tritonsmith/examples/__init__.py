"""Bundled example problems and Triton candidates (``tritonsmith eval`` runs them in the README)."""

from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent


def example_path(name: str) -> Path:
    """Path of a bundled example file, e.g. ``example_path("softmax_reference.py")``."""
    path = EXAMPLES_DIR / name
    if not path.is_file():
        known = ", ".join(sorted(p.name for p in EXAMPLES_DIR.glob("*.py") if not p.name.startswith("_")))
        raise FileNotFoundError(f"no bundled example {name!r}; known: {known}")
    return path
