"""FLOPs and bytes of a launch from its loop nest (zynbook/kernel/costs.py), and the peaks
its rates are compared with, checked against counts worked out by hand."""
from __future__ import annotations

import pytest

import zynbook
from zynbook.kernel.costs import (Cost, device_peak, format_share, kernel_cost, rates)


def _kernels(source, **env):
    s = zynbook.Session("cpu")
    s.run(source, **env)
    return {k.name.split("_l")[0]: k for k in s.last_kernels}


def test_matmul_counts_two_flops_per_multiply_add():
    ks = _kernels("""let A = randn([37, 53], seed=1)
let B = randn([53, 29], seed=2)
let C = compute(A, B) {
    @kernel matmul
    for i in 0..M, j in 0..N:
        var sum = 0.0
        for k in 0..K:
            sum += A[i, k] * B[k, j]
        out[i, j] = sum
}
""")
    k = ks["matmul"]
    cost = kernel_cost(k.kernel, k.sizes)
    assert cost.flops == 2 * 37 * 53 * 29
    assert cost.bytes == 4 * (37 * 53 + 53 * 29 + 37 * 29)
    assert cost.exact


def test_elementwise_reduce_and_math_functions():
    ks = _kernels("""let x = randn([1000], seed=1)
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        out[i] = exp(x[i]) * 2.0 + 1.0
}
let t = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i] * x[i]
}
let r = compute(x) {
    @kernel reduce(+, axis=1)
    for i in 0..rows, j in 0..cols:
        yield x[i * 10 + j]
}
""", rows=100, cols=10)
    e = kernel_cost(ks["elementwise"].kernel, ks["elementwise"].sizes)
    assert e.flops == 3 * 1000                      # exp, *, +
    assert e.bytes == 2 * 4 * 1000
    red = [k for name, k in ks.items() if name == "reduce"]
    assert red
    total = kernel_cost(_kernels("""let x = randn([1000], seed=1)
let t = compute(x) {
    @kernel reduce(+)
    for i in 0..n:
        yield x[i] * x[i]
}
""")["reduce"].kernel, {"n": 1000, "x_d0": 1000})
    assert total.flops == 2 * 1000                  # the product and the combine
    assert total.bytes == 4 * 1000 + 4
    # integer index arithmetic (i * 10 + j) is not a floating-point operation


def test_a_branch_counts_its_larger_side_and_is_not_exact():
    ks = _kernels("""let x = randn([64], seed=1)
let y = compute(x) {
    @kernel elementwise
    for i in 0..n:
        var v = 0.0
        if x[i] > 0.0:
            v = x[i] * x[i] * x[i]
        else:
            v = x[i] + 1.0
        out[i] = v
}
""")
    cost = kernel_cost(ks["elementwise"].kernel, ks["elementwise"].sizes)
    assert cost.flops == 2 * 64
    assert not cost.exact


def test_flash_attention_is_at_least_its_two_matrix_products():
    ks = _kernels("""let Q = randn([2, 3, 128, 16], seed=1)
let K = randn([2, 3, 128, 16], seed=2)
let V = randn([2, 3, 128, 16], seed=3)
let seq_len = 128
let head_dim = 16
let o = compute(Q, K, V) {
    @kernel flash_attention
    @tile(block_q=64, block_kv=64)
    for b in 0..batch, h in 0..heads:
        for q_block in 0..seq_len step 64:
            var m = -inf
            var l = 0.0
            var acc = zeros(64, head_dim)
            for kv_block in 0..seq_len step 64:
                let K_block = K[b, h, kv_block:kv_block+64]
                let V_block = V[b, h, kv_block:kv_block+64]
                let S = Q[b, h, q_block:q_block+64] @ transpose(K_block) / sqrt(head_dim)
                let m_new = max(m, row_max(S))
                let l_new = exp(m - m_new) * l + row_sum(exp(S - m_new))
                acc = exp(m - m_new) * acc + exp(S - m_new) @ V_block
                m = m_new
                l = l_new
            out[b, h, q_block:q_block+64] = acc / l
}
""")
    k = ks["flash_attention"]
    cost = kernel_cost(k.kernel, k.sizes)
    products = 2 * (2 * 2 * 3 * 128 * 128 * 16)     # S = Q K^T and acc += P V
    # the softmax adds a few operations per score (64 x 64 per block pair): under 2x more
    assert products <= cost.flops <= 1.5 * products
    assert cost.bytes == 4 * 4 * (2 * 3 * 128 * 16)


def test_known_devices_have_table_peaks_and_the_cpu_is_measured():
    flops, bw, source = device_peak({"id": "cuda:0", "type": "gpu",
                                     "name": "NVIDIA H100 80GB HBM3"})
    assert (flops, bw) == (67e12, 3.35e12) and source.startswith("table")
    assert device_peak({"id": "cuda:0", "type": "gpu", "name": "NVIDIA H200"})[1] == 4.8e12
    assert device_peak({"id": "cuda:0", "type": "gpu", "name": "NVIDIA GH200 480GB"})[1] == 4.0e12
    assert device_peak({"id": "cuda:0", "type": "gpu", "name": "NVIDIA H100 PCIe"})[1] == 2.0e12
    assert device_peak({"id": "cuda:0", "type": "gpu", "name": "NVIDIA A100-SXM4-80GB"})[1] \
        == 2.039e12
    flops, bw, source = device_peak({"id": "cpu", "type": "cpu", "name": "x86_64"})
    assert flops > 1e8 and bw > 1e8 and source == "measured (numpy)"
    assert device_peak({"id": "vulkan:0", "type": "gpu", "name": "Some Future GPU"}) == \
        (None, None, "unknown")


def test_rates_are_the_share_of_the_bound_resource():
    info = {"id": "cuda:0", "type": "gpu", "name": "NVIDIA H100 80GB HBM3"}
    # 1 GFLOP and 1 GB in 1 ms: 1 TFLOP/s (1.5% of 67) and 1 TB/s (29.9% of 3.35): memory
    r = rates(Cost(1e9, 1e9), 1e-3, info)
    assert r.gflops == pytest.approx(1000) and r.gbytes == pytest.approx(1000)
    assert r.bound == "memory" and r.peak_share == pytest.approx(1e12 / 3.35e12)
    r = rates(Cost(50e9, 1e6), 1e-3, info)
    assert r.bound == "compute" and r.peak_share == pytest.approx(50e12 / 67e12)
    assert rates(Cost(1, 1), None, info).gflops is None
    assert format_share(0.2991) == "29.9%" and format_share(None) == "-"
