"""The op class that dominates a problem: what its kernel is built around.

A problem's kernel design follows its heaviest op: a convolution or a matmul (contractions), a pooling
window, a row normalization (softmax, layer/batch/group norm) or a reduction (sum, mean, max, cumsum,
losses); elementwise ops are glue around those, and dominate only when nothing else is there. Ranking
retrieved kernels by this class keeps a softmax from answering a matmul and a ReLU+bmm from answering a
ReLU, which raw similarity of op sequences and shapes does not.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CLASS_WEIGHT", "EXTRA_WEIGHT", "RELATED_WEIGHT", "class_affinity", "dominant_class", "op_affinity",
           "op_classes"]

# Score added to a hit whose dominant class is the query's / a related one (similarities lie in [0, 1]),
# and taken off per heavy class the hit has and the query lacks (attention answering a plain matmul).
CLASS_WEIGHT = 0.3
RELATED_WEIGHT = 0.15
EXTRA_WEIGHT = 0.1

_PRIORITY = ("conv", "matmul", "pooling", "normalization", "reduction", "elementwise")
_RELATED = {frozenset({"normalization", "reduction"})}  # both are row reductions: one kernel shape

_EXACT = {
    "matmul": {"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot", "einsum",
               "tensordot", "bilinear", "_scaled_dot_product_attention", "scaled_dot_product_attention"},
    "normalization": {"_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax", "native_layer_norm",
                      "layer_norm", "native_batch_norm", "batch_norm", "native_group_norm", "group_norm",
                      "instance_norm", "rms_norm", "normalize", "logsumexp"},
    "reduction": {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var", "std", "norm",
                  "linalg_vector_norm", "cumsum", "cumprod", "logcumsumexp", "nll_loss_forward", "mse_loss",
                  "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy", "var_mean",
                  "std_mean", "all", "any"},
}
_PREFIX = {"conv": ("conv", "convolution"), "pooling": ("max_pool", "avg_pool", "adaptive_avg_pool",
                                                        "adaptive_max_pool", "lp_pool")}
_NOT_COMPUTE = {"view", "reshape", "permute", "transpose", "t", "unsqueeze", "squeeze", "expand", "slice", "select",
                "cat", "stack", "clone", "contiguous", "copy", "empty", "empty_like", "zeros", "zeros_like", "ones",
                "full", "arange", "_unsafe_view", "unbind", "split", "unsafe_split", "flatten", "to", "detach",
                "lift_fresh", "size", "item", "pad"}


def _class_of(op: str) -> str | None:
    name = op.lower().rsplit(".", 1)[-1]
    for cls, prefixes in _PREFIX.items():
        if name.startswith(prefixes):
            return cls
    for cls, names in _EXACT.items():
        if name in names:
            return cls
    return None if name in _NOT_COMPUTE else "elementwise"


def op_classes(ops: Sequence[str]) -> frozenset[str]:
    """The op classes present in ``ops`` (aten names)."""
    return frozenset(c for c in map(_class_of, ops) if c is not None)


def dominant_class(ops: Sequence[str]) -> str | None:
    """The heaviest op class among ``ops`` (aten names), or None when they hold no compute at all."""
    found = op_classes(ops)
    return next((c for c in _PRIORITY if c in found), None)


def op_affinity(query_ops: Sequence[str], ops: Sequence[str]) -> float:
    """The ranking bonus of a record with ``ops`` for a query with ``query_ops`` (0 without query ops)."""
    if not query_ops:
        return 0.0
    query, other = op_classes(query_ops), op_classes(ops)
    extra = len(other - query - {"elementwise"})
    return class_affinity(dominant_class(query_ops), dominant_class(ops)) - EXTRA_WEIGHT * extra


def class_affinity(query: str | None, other: str | None) -> float:
    """:data:`CLASS_WEIGHT` for the same dominant class, :data:`RELATED_WEIGHT` for a related one, else 0."""
    if query is None or other is None:
        return 0.0
    if query == other:
        return CLASS_WEIGHT
    return RELATED_WEIGHT if frozenset({query, other}) in _RELATED else 0.0
