"""Check the kernel type: a body that `@kernel KIND` names must have that kernel's shape.

`@kernel elementwise` over a loop that carries a value, `@kernel matmul` over a body that
accumulates no products, a `yield` outside a reduce kernel: each is refused with what the
kernel type expects and what the body does instead (a ZynML type error at the annotation).
Runs after `mark_parallel`, whose marks it reads. The kernel passes through unchanged.
"""
from __future__ import annotations

from ...errors import ZynMLTypeError
from .. import cir

# What each kernel type expects of its body; a body of another shape is refused.
EXPECTED = {
    "elementwise": "parallel loops whose every iteration writes out[...] on its own "
                   "(no reduction loops, no yield)",
    "reduce": "loops that `yield` the values to combine",
    "matmul": "parallel loops over the output with an inner loop accumulating products "
              "(sum += A[.., k] * B[k, ..]) stored into out",
    "batched_matmul": "parallel loops over batch and output with an inner loop accumulating "
                      "products stored into out",
    "conv2d": "parallel loops over the output with inner loops accumulating "
              "input * kernel products stored into out",
    "conv2d_depthwise": "parallel loops over the output with inner loops accumulating "
                        "input * kernel products stored into out",
    "attention": "loops that compute scores, a softmax and a weighted sum into out",
    "flash_attention": "loops over query blocks that update a running max, sum and output "
                       "over key blocks and write out",
    "fused": "a body that writes out",
}


def check_kernel_type(kernel: cir.Kernel) -> cir.Kernel:
    """`kernel`, refused where its @kernel type names a shape its body does not have."""
    kind, body = kernel.kernel_type.kind, kernel.body
    if kind not in EXPECTED:
        return kernel
    stores = [n for n in cir.walk(body) if isinstance(n, cir.Store) and n.buffer == "out"]
    loops = [n for n in cir.walk(body) if isinstance(n, cir.Loop)]
    yields = any(isinstance(n, cir.Yield) for n in cir.walk(body))

    def refuse(what):
        raise ZynMLTypeError(f"@kernel {kind} expects {EXPECTED[kind]}; {what}",
                             kernel.kernel_type.span)

    if kind != "reduce" and yields:
        refuse("this body yields, which is what reduce kernels do")
    if kind == "elementwise":
        serial = [lp for lp in loops if not lp.parallel]
        if serial:
            refuse(f"the loop over `{serial[0].var}` (line {serial[0].line}) runs in order "
                   "(it carries a value or writes no part of out of its own)")
    if kind in ("matmul", "batched_matmul", "conv2d", "conv2d_depthwise"):
        accumulates = any(isinstance(n, cir.Loop) and not n.parallel and _accumulates_products(n)
                          for n in loops)
        if not accumulates:
            refuse("this body has no loop accumulating products")
        need = 3 if kind == "batched_matmul" else 2
        parallel = [lp for lp in loops if lp.parallel]
        if len(parallel) < need:
            refuse(f"it has {len(parallel)} parallel loop(s)")
    if kind != "reduce" and not stores:
        refuse("this body never writes out")
    return kernel


def _accumulates_products(loop: cir.Loop) -> bool:
    """Whether the loop's body adds a product in an assignment: `acc += a * b`, also written
    `acc = a * b + acc` or `acc -= a * b`, under the cast of a typed var (`var acc: f16`),
    or adding a `let` that holds the product."""
    lets = {n.name: n.value for n in cir.walk(loop.body) if isinstance(n, cir.Let) and not n.mutable}

    def has_product(e, seen=()):
        for t in cir.walk(e):
            if isinstance(t, cir.Bin) and t.op == "*":
                return True
            if isinstance(t, cir.Var) and t.name in lets and t.name not in seen and \
                    has_product(lets[t.name], seen + (t.name,)):
                return True
        return False

    for m in cir.walk(loop.body):
        if isinstance(m, cir.Assign):
            v = m.value
            while isinstance(v, cir.Cast):
                v = v.operand
            if isinstance(v, cir.Bin) and v.op == "+" and (has_product(v.left) or has_product(v.right)):
                return True
            # acc -= a * b: the products subtracted from the accumulator
            if isinstance(v, cir.Bin) and v.op == "-" and isinstance(v.left, cir.Var) and \
                    v.left.name == m.name and has_product(v.right):
                return True
    return False
