"""The built-in generator's tests in this folder share the interpreter helper of ``tests/agents``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ``_builtin_check``
