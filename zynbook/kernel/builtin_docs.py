"""Signatures and one-line descriptions of ZynML's builtins, for Shift-Tab in the ZynML kernel.

The texts follow docs/language.md ("Builtins"): a name may be a host builtin (run by the
interpreter between compute blocks), a kernel-body function (inside `compute`), or both; the
entry says which where it matters.
"""
from __future__ import annotations

_MATH1 = "elementwise on a number, tile or tensor; inside a compute body or on the host"

BUILTIN_DOCS: dict[str, tuple[str, str]] = {
    # math, one argument
    "sin": ("sin(x)", "sine, " + _MATH1),
    "cos": ("cos(x)", "cosine, " + _MATH1),
    "tan": ("tan(x)", "tangent, elementwise (compute bodies)"),
    "exp": ("exp(x)", "e to the power x, " + _MATH1),
    "exp2": ("exp2(x)", "2 to the power x, elementwise (compute bodies)"),
    "log": ("log(x)", "natural logarithm, " + _MATH1),
    "log2": ("log2(x)", "base-2 logarithm, elementwise (compute bodies)"),
    "sqrt": ("sqrt(x)", "square root, " + _MATH1),
    "rsqrt": ("rsqrt(x)", "1 / sqrt(x), " + _MATH1),
    "abs": ("abs(x)", "absolute value (keeps the dtype), " + _MATH1),
    "floor": ("floor(x)", "largest integer not above x, " + _MATH1),
    "ceil": ("ceil(x)", "smallest integer not below x, " + _MATH1),
    "round": ("round(x)", "nearest integer, elementwise (compute bodies)"),
    "tanh": ("tanh(x)", "hyperbolic tangent, " + _MATH1),
    "sinh": ("sinh(x)", "hyperbolic sine, elementwise (compute bodies)"),
    "cosh": ("cosh(x)", "hyperbolic cosine, elementwise (compute bodies)"),
    "erf": ("erf(x)", "the error function, elementwise (compute bodies)"),
    "sigmoid": ("sigmoid(x)", "1 / (1 + exp(-x)), " + _MATH1),
    "relu": ("relu(x)", "max(x, 0) (keeps the dtype), " + _MATH1),
    "silu": ("silu(x)", "x * sigmoid(x); on the host a library kernel on the default device"),
    "gelu": ("gelu(x)", "in a kernel the exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))); on the "
                        "host the library kernel's tanh form, x * 0.5 * (1 + tanh(0.79788456 * "
                        "(x + 0.044715 x^3))), on the default device"),
    # math, several arguments
    "pow": ("pow(x, y)", "x to the power y, elementwise (compute bodies)"),
    "clamp": ("clamp(x, lo, hi)", "x limited to [lo, hi] (keeps the dtype), elementwise"),
    "min": ("min(a, b, ...) | min(x, axis=)", "the smallest of its arguments; on the host, "
                                               "min(x, axis=) reduces a tensor"),
    "max": ("max(a, b, ...) | max(x, axis=)", "the largest of its arguments; on the host, "
                                               "max(x, axis=) reduces a tensor"),
    # kernel-body functions
    "dot": ("dot(a, b)", "inner product of two vectors of one length, e.g. "
                         "dot(Q[b, h, i], K[b, h, j]) (compute bodies)"),
    "reduce": ("reduce(op, x, axis=k)", "folds a tile or a whole input with op (+, *, max, "
                                        "min); axis= drops one axis (compute bodies)"),
    "row_max": ("row_max(t)", "a column of each row's maximum of a 2-D tile, broadcasting "
                              "against its rows (compute bodies)"),
    "row_sum": ("row_sum(t)", "a column of each row's sum of a 2-D tile, broadcasting against "
                              "its rows (compute bodies)"),
    "barrier": ("barrier()", "every thread of a workgroup waits here (for `shared var` "
                             "arrays; compute bodies)"),
    "sum": ("sum(x, axis=) | sum(a, b, ...)", "the sum of a tile, input or tensor (an axis on "
                                              "the host), or of numbers"),
    "transpose": ("transpose(x) | transpose(x, [axes])", "the last two axes swapped (a 2-D "
                                                         "tile in a body), or axes permuted"),
    "zeros": ("zeros(shape, dtype=, device=) | zeros(r, c)", "a tensor of zeros (f32 unless "
                                                             "dtype=); in a body a constant "
                                                             "tile"),
    "ones": ("ones(shape, dtype=, device=) | ones(r, c)", "a tensor of ones (f32 unless "
                                                          "dtype=); in a body a constant tile"),
    # host builtins
    "randn": ("randn(shape, dtype=, device=, seed=)", "a tensor of standard normal samples "
                                                      "(seeded with seed=, else config's seed)"),
    "rand": ("rand(shape, dtype=, device=, seed=)", "a tensor of uniform samples in [0, 1)"),
    "arange": ("arange(n) | arange(start, stop[, step], dtype=)", "evenly spaced values: i32 "
                                                                 "for integer arguments, "
                                                                 "else f32"),
    "tensor": ("tensor(nested_lists, dtype=, device=)", "a tensor from nested lists (i32, f32 "
                                                        "or bool by content)"),
    "allocate": ("allocate(shape=, dtype=, device=, pinned=)", "zeroed memory on a device "
                                                               "(pinned=true: page-locked "
                                                               "host memory)"),
    "memory_pool": ("memory_pool(device=, size=)", "a pool of device memory that allocations "
                                                   "can come from"),
    "compute_devices": ("compute_devices()", "the devices ZynBook sees: a list of records with "
                                             "id, type, name"),
    "reshape": ("reshape(x, [d0, ...])", "the same values in another shape (one -1 is "
                                          "inferred)"),
    "split": ("split(x, parts, axis=0)", "a tuple of `parts` equal pieces of x along axis"),
    "concat": ("concat([a, b, ...], axis=0)", "the tensors joined along axis"),
    "len": ("len(x)", "the length of a tensor's first axis, or of a list"),
    "shape": ("shape(x)", "a tensor's shape as a list of ints"),
    "mean": ("mean(x, axis=)", "the mean of a tensor (along an axis)"),
    "argmax": ("argmax(x, axis=)", "the index of the largest value (along an axis)"),
    "argmin": ("argmin(x, axis=)", "the index of the smallest value (along an axis)"),
    "softmax": ("softmax(x, axis=-1)", "exp(x) / sum(exp(x)) along an axis, computed from the "
                                       "maximum for safety"),
    "rmsnorm": ("rmsnorm(x, weight, eps=1e-6)", "x / sqrt(mean(x^2) + eps) * weight over the "
                                                "last axis (a library kernel)"),
    "rope": ("rope(x, base=10000.0)", "rotary position embedding over the last axis (a "
                                      "library kernel)"),
    "sinkhorn": ("sinkhorn(m, iterations=20)", "alternating row and column normalisation of a "
                                               "positive matrix (a library kernel)"),
    "range": ("range(n) | range(start, stop[, step])", "a list of ints"),
    "all": ("all(futures) | all(bools)", "wait for every future (`await all([...])`), or the "
                                         "logical and of a list"),
    "any": ("any(futures) | any(bools)", "wait for the first future to finish, or the logical "
                                         "or of a list"),
    "print": ("print(a, b, ...)", "writes the values separated by spaces"),
}


# the device interface (zynbook/runtime/device_ops.py gives the signatures)
_DEVICE_DOCS = {
    "upload": "a device buffer holding a list or tensor of floats",
    "upload_u32": "a device buffer of 32-bit unsigned integers (token ids)",
    "alloc": "a zeroed device buffer of `len` floats",
    "download": "a device buffer's values, back on the host",
    "elementwise": "one fused kernel: the pipeline `f` applied to the traced inputs",
    "matmul": "(m x k) @ (k x n) of two device buffers",
    "softmax": "row softmax of a device buffer (on a tensor: the host softmax)",
    "rms_norm": "RMS normalisation of each group of `dim` values, times `weight`",
    "embedding": "rows `ids` of the table `weight`",
    "reduce_sum": "the sum of a device buffer of `shape` along `axis`",
    "causal_attention": "causal attention with grouped-query heads (n_kv_heads divides n_heads)",
    "kv_attention": "attention of new queries over a KV cache from `cache_start`",
    "transpose_2d": "the transpose of a (rows x cols) device buffer",
    "softmax_backward": "the gradient of softmax at its output",
    "rms_norm_backward": "the gradients of rms_norm (input and weight)",
    "embedding_backward": "the gradient of the embedding table (scatter-add)",
    "causal_attention_backward": "the gradients of causal_attention (scores recomputed)",
    "cross_entropy_forward_backward": "loss and logit gradient; `pad_id` targets are left out",
    "sync": "waits for the device's queued work",
    "copy_buffer": "a copy of a device buffer, made on the device",
    "bias_add": "adds `bias` to every row of `matrix`, in place",
    "add_assign": "dst += src, in place on the device",
    "zero_buffer": "sets a device buffer to zero",
    "adamw_step": "one AdamW update (decoupled weight decay, bias correction by `step_t`)",
}


def _device_docs() -> dict:
    from ..runtime.device_ops import usage
    return {name: (usage(name), text + " (device interface)") for name, text in _DEVICE_DOCS.items()}


BUILTIN_DOCS.update(_device_docs())
BUILTIN_DOCS.update({
    "memory_stats": ("memory_stats(device=, reset=false)", "live and peak bytes of the device "
                                                           "interface's buffers on a device"),
    "where": ("where(cond, a, b)", "a where cond is true, else b, elementwise with numpy's "
                                   "broadcasting; on the host, inside a compute body, and in "
                                   "`elementwise`'s function"),
})


def builtin_doc(name: str) -> str:
    """`sqrt(x): square root, ...` for a builtin, '' for any other name."""
    entry = BUILTIN_DOCS.get(name)
    if entry is None:
        return ""
    signature, text = entry
    return f"{signature}\n    {text}"
