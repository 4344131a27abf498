"""Training on every device, at the edges the other training tests leave: the device
interface's losses, gradients and AdamW steps, checked against torch's autograd and
torch.optim.AdamW written here (f64 on the CPU unless said)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import zynbook
from compute_testing import wanted_devices

DEVICES = [d for d in wanted_devices() if not d.startswith("browser")]
RNG = np.random.default_rng(20261129)


def _f32(*shape, scale=1.0, offset=0.0):
    return (RNG.standard_normal(shape) * scale + offset).astype(np.float32)


def _leaf(a):
    return torch.tensor(np.asarray(a, np.float64), requires_grad=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("offset", [3e4, -1e6])
def test_cross_entropy_loss_of_large_logits_keeps_the_log_sum(offset, device):
    # the loss of a row is (max - logit[target]) + log(sum): max + log(sum) first rounded
    # log(sum) away where the logits are large (torch's f32 loss keeps it)
    n, v = 7, 13
    logits = _f32(n, v, scale=2.0, offset=offset)
    targets = RNG.integers(0, v, n).astype(np.uint32)
    targets[2] = 99
    lt = _leaf(logits)
    keep = torch.tensor(targets.astype(np.int64)) != 99
    want = torch.nn.functional.cross_entropy(lt[keep], torch.tensor(targets[keep.numpy()]
                                                                   .astype(np.int64)))
    want.backward()
    dev = zynbook.device(device)
    loss, grad = dev.cross_entropy_forward_backward(dev.upload(logits), dev.upload_u32(targets),
                                                    n, v, 99)
    assert abs(loss - want.item()) <= 1e-5 * abs(want.item())
    np.testing.assert_allclose(dev.download(grad).reshape(n, v), lt.grad.numpy(), rtol=1e-4,
                               atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_elementwise_power_of_signed_zero_and_negative_bases_equals_numpy(device):
    # 1 / x written x ** -1 (a gradient of log |x|): -0 to an odd negative power is -inf,
    # as numpy's (C's) pow; WebGPU gave +inf
    from zynbook.nn import expr as E
    x = np.array([-0.0, 0.0, -0.0, -2.0, -0.5, 3.0, -0.0], np.float32)
    b = np.array([-1.0, -1.0, -2.0, -3.0, 3.0, -1.0, 3.0], np.float32)
    dev = zynbook.device(device)
    got = dev.download(dev.elementwise([dev.upload(x), dev.upload(b)], len(x),
                                       lambda v: E.pow(v[0], v[1])))
    with np.errstate(divide="ignore"):
        want = np.power(x, b)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (np.signbit(got) == np.signbit(want)).all(), (got, want)
