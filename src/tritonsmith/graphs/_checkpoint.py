"""A checkpointer that keeps LangGraph's in-memory checkpoints in one file, so a run can be resumed.

``tritonsmith optimize`` saves every step of its thread in ``OUT/.tritonsmith/checkpoints.pkl``;
``--resume`` reopens that file and continues the thread where it stopped (an interrupted run, a crash,
or a run the model server ended). The file holds only what the graph wrote (JSON-able state, already
serialised by LangGraph's own serde), and is rewritten atomically after every write.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
import uuid
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

__all__ = ["FileCheckpointer", "RunFiles"]


class FileCheckpointer(InMemorySaver):
    """:class:`InMemorySaver` whose storage is loaded from, and saved to, ``path``."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._save_lock = threading.Lock()  # LangGraph writes from its worker threads
        if self.path.is_file():
            data = pickle.loads(self.path.read_bytes())  # noqa: S301 - our own file, written below
            for thread, namespaces in data["storage"].items():
                for ns, checkpoints in namespaces.items():
                    self.storage[thread][ns].update(checkpoints)
            self.writes.update(data["writes"])
            self.blobs.update(data["blobs"])

    def put(self, *args: Any, **kwargs: Any) -> Any:
        config = super().put(*args, **kwargs)
        self._save()
        return config

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        super().put_writes(*args, **kwargs)
        self._save()

    def _save(self) -> None:
        with self._save_lock:
            data = {"storage": {t: {ns: dict(c) for ns, c in n.items()} for t, n in self.storage.items()},
                    "writes": dict(self.writes), "blobs": dict(self.blobs)}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps(data))
            os.replace(tmp, self.path)


class RunFiles:
    """Where a CLI run keeps its checkpoints and thread id: ``OUT/.tritonsmith/``."""

    def __init__(self, out: Path) -> None:
        self.dir = out / ".tritonsmith"
        self.checkpoints = self.dir / "checkpoints.pkl"
        self.run = self.dir / "run.json"

    def new_thread(self, problem: str) -> str:
        """A fresh thread for a new run (an earlier run's checkpoints in this folder are replaced)."""
        self.checkpoints.unlink(missing_ok=True)
        thread = uuid.uuid4().hex
        self.dir.mkdir(parents=True, exist_ok=True)
        self.run.write_text(json.dumps({"thread_id": thread, "problem": problem}))
        return thread

    def thread(self) -> str:
        """The thread of the run saved here; a clear error when there is none."""
        if not self.run.is_file() or not self.checkpoints.is_file():
            raise FileNotFoundError(f"no run to resume in {self.dir.parent} (no {self.dir.name}/run.json with "
                                    "checkpoints): start one without --resume, with the same --out")
        return str(json.loads(self.run.read_text())["thread_id"])
