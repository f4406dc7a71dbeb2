"""The suite's evaluation pool on a Ray cluster (optional extra: ``pip install tritonsmith[ray]``).

Each task asks Ray for one whole GPU (``num_gpus=1``), so Ray runs at most one task per GPU at a
time and sets ``CUDA_VISIBLE_DEVICES`` for it: a timing never shares its GPU. On the CPU each task
takes one core. Pass ``RayPool()`` to :func:`tritonsmith.suite.run_suite` as ``pool``; results are
appended by the driver exactly as with the local pool, so runs stay resumable.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from tritonsmith.suite._task import SuiteTask, execute_task
from tritonsmith.suite.results import ERROR, ProblemRecord

__all__ = ["RayPool"]

log = logging.getLogger(__name__)


def _run_on_ray(task_data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    import ray

    record = execute_task(SuiteTask.from_dict(task_data))
    gpus = ray.get_gpu_ids()
    node = ray.get_runtime_context().get_node_id()[:8]
    return record.to_dict(), f"ray:{node}" + (f":gpu{','.join(map(str, gpus))}" if gpus else "")


class RayPool:
    """Runs suite tasks as Ray tasks; ``address=None`` joins a running cluster or starts a local one."""

    def __init__(self, *, device: str, address: str | None = None, max_in_flight: int | None = None,
                 init_kwargs: dict[str, Any] | None = None) -> None:
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
        self.device = device
        self.address = address
        self.max_in_flight = max_in_flight
        self.init_kwargs = init_kwargs or {}

    def run(self, tasks: Sequence[SuiteTask], *, on_start: Callable[[Any, str], None],
            on_done: Callable[[ProblemRecord], None], may_start: Callable[[], bool] = lambda: True) -> None:
        ray = _import_ray()
        if not ray.is_initialized():
            ray.init(address=self.address, **self.init_kwargs)
        resources = {"num_gpus": 1} if self.device == "cuda" else {"num_cpus": 1}
        remote = ray.remote(max_retries=0, **resources)(_run_on_ray)
        limit = self.max_in_flight or self._capacity(ray)
        pending = deque(tasks)
        running: dict[Any, tuple[SuiteTask, float]] = {}
        try:
            while pending or running:
                while pending and len(running) < limit and may_start():
                    task = pending.popleft()
                    running[remote.remote(task.to_dict())] = (task, time.perf_counter())
                    on_start(task, "ray")
                if not running:
                    break
                ready, _ = ray.wait(list(running), num_returns=1)
                for ref in ready:
                    task, start = running.pop(ref)
                    on_done(self._collect(ray, ref, task, time.perf_counter() - start))
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=True)
            raise

    def _capacity(self, ray: Any) -> int:
        total = ray.cluster_resources().get("GPU" if self.device == "cuda" else "CPU", 0)
        if total < 1:
            raise ValueError(f"the Ray cluster offers no {'GPU' if self.device == 'cuda' else 'CPU'}")
        return int(total)

    @staticmethod
    def _collect(ray: Any, ref: Any, task: SuiteTask, wall_s: float) -> ProblemRecord:
        try:
            data, worker = ray.get(ref)
        except ray.exceptions.RayError as exc:  # the Ray worker died or was cancelled: retried on resume
            log.error("ray task for %s failed: %s", task.key, exc)
            return ProblemRecord(key=task.key, problem=task.problem_path.rsplit("/", 1)[-1].removesuffix(".py"),
                                 level=task.level, status=ERROR, message=f"ray task failed: {type(exc).__name__}",
                                 error=str(exc)[-3000:], mode=task.mode, device=task.device, wall_s=wall_s,
                                 worker="ray")
        return ProblemRecord.from_dict(data).with_timing(wall_s=wall_s, worker=worker)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("the Ray pool needs Ray: pip install 'tritonsmith[ray]'") from None
    return ray
