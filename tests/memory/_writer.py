"""Child process for the multi-process tests: add records to a store, printing each id once stored.

usage: python _writer.py STORE TAG COUNT
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from memhelp import make_record  # noqa: E402

from tritonsmith.memory import ChromaKernelMemory  # noqa: E402


def main() -> None:
    store, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mem = ChromaKernelMemory(path=store)
    names = ["softmax", "conv_relu", "gemm_gelu"]
    for i in range(count):
        rec = make_record(names[i % 3], variant=hash(tag) % 100_000 * 100_000 + i, generator=tag)
        mem.add(rec)
        print(rec.id, flush=True)


if __name__ == "__main__":
    main()
