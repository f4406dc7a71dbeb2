"""Pulling candidate code out of model answers."""

from __future__ import annotations

from tritonsmith.agents._parse import extract_code, source_from_tool_args, text_of

CODE = "import triton\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def test_fenced_blocks_prefer_the_last_one_defining_modelnew():
    text = f"Old:\n```python\n{CODE}```\nusage:\n```bash\npython run.py\n```\nNew:\n```py\n{CODE.replace('pass', 'x = 1')}```"
    assert extract_code(text) == CODE.replace("pass", "x = 1")


def test_unclosed_fence_tilde_fence_and_bare_code():
    assert extract_code(f"```python\n{CODE}") == CODE  # answer cut off by the token limit
    assert extract_code(f"~~~\n{CODE}~~~") == CODE
    assert extract_code(CODE) == CODE
    assert extract_code("Use one program per row and tl.max.") is None
    assert extract_code("```text\nclass ModelNew: nothing\n```") is None


def test_tool_arguments_in_every_shape():
    assert source_from_tool_args({"source": CODE}) == CODE
    assert source_from_tool_args({"code": f"```python\n{CODE}```"}) == CODE
    assert source_from_tool_args('{"source": "' + CODE.replace("\n", "\\n") + '"}') == CODE
    assert source_from_tool_args({"notes": "nothing"}) is None
    # evaluate_kernel's argument name carried over to submit_kernel (a slip a model makes), even cut short
    assert source_from_tool_args({"candidate_source": CODE}) == CODE
    assert source_from_tool_args('{"candidate_source": "' + CODE.replace("\n", "\\n")) == CODE
    assert text_of([{"type": "text", "text": "a"}, "b"]) == "a\nb"
