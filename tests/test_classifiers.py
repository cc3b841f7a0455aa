"""Unit tests of dropnb.classifiers against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dropnb import classifiers


# --- two-layer networks on images (Tables 6-I and 6-II) ------------------------------------------

def _mlp(outputs, runs=2, dim=5, width=7, seed=3):
    return classifiers.mlp_init(runs, dim, width, outputs, torch.Generator().manual_seed(seed))


def test_classifier_logits_match_numpy():
    p = _mlp(3)
    x = torch.rand(2, 4, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    got = classifiers.classifier_logits(p, x, 0.1).numpy()
    for r in range(2):
        pre = x[r].numpy() @ p["W1"][r].numpy().T + p["b1"][r].numpy()
        want = np.maximum(0.1 * pre, pre) @ p["W2"][r].numpy().T + p["b2"][r].numpy()
        np.testing.assert_allclose(got[r], want, rtol=1e-12)


def test_conv_logits_match_one_convolution_per_run_and_train_like_the_mlp():
    p = classifiers.conv_init(3, 8, 2, 4, 5, torch.Generator().manual_seed(1))
    assert p["W2"].shape == (3, 5, 2 * 3 * 3)  # two kernels, (8 − 4)/2 + 1 = 3 positions a side
    x = torch.rand(3, 4, 64, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    got = classifiers.classifier_logits(p, x, 0.2)
    for r in range(3):
        maps = torch.nn.functional.conv2d(x[r].reshape(4, 1, 8, 8), p["K1"][r][:, None], p["b1"][r], stride=2)
        h = maps.reshape(4, -1)
        torch.testing.assert_close(got[r], torch.maximum(0.2 * h, h) @ p["W2"][r].T + p["b2"][r], rtol=1e-12, atol=1e-14)
    y = torch.tensor([0.0, 4.0, 2.0, 1.0])
    q = classifiers.classifier_train(p, x[0], y, 0.2, 0.3, 1, 4, torch.Generator().manual_seed(0))
    params = {k: v.clone().requires_grad_(True) for k, v in p.items()}
    loss = torch.nn.functional.cross_entropy(classifiers.classifier_logits(params, x[:1].expand(3, -1, -1), 0.2)
                                             .reshape(12, 5), y.long().repeat(3), reduction="sum") / 4
    grads = torch.autograd.grad(loss, list(params.values()))
    for (k, v), g in zip(params.items(), grads):
        torch.testing.assert_close(q[k], (v - 0.3 * g).detach(), rtol=1e-12, atol=1e-14)


def test_conv_init_refuses_kernels_that_do_not_tile_the_image():
    with pytest.raises(ValueError, match="side − kernel"):
        classifiers.conv_init(1, 8, 2, 3, 5, torch.Generator())
    with pytest.raises(ValueError, match="dtype"):
        classifiers.conv_init(1, 8, 2, 4, 5, torch.Generator(), dtype=torch.float16)
    p = classifiers.conv_init(1, 8, 2, 4, 5, torch.Generator(), dtype=torch.float32)
    assert p["K1"].dtype == torch.float32
    with pytest.raises(ValueError, match="W2"):
        classifiers.classifier_logits({**p, "W2": p["W2"][:, :, :-1]}, torch.rand(1, 2, 64), 0.1)


def test_fgsm_is_one_clipped_sign_step_and_reflection_changes_no_sign_step():
    p = _mlp(1)
    x = torch.rand(2, 6, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    y = torch.tensor([[1.0, -1, 1, -1, 1, 1], [-1.0, -1, 1, 1, 1, -1]])
    fgsm = classifiers.classifier_attack(p, x, y, 0.1, 0.2, 0.2, 1, "logistic", "sign", "linf")
    xr = x.clone().requires_grad_(True)
    z = y * classifiers.classifier_logits(p, xr, 0.1)[..., 0]
    (g,) = torch.autograd.grad(torch.nn.functional.softplus(-z).sum(), xr)
    assert torch.equal(fgsm, (x + 0.2 * torch.sign(g)).clamp(0, 1))
    for steps in (1, 5):
        a = classifiers.classifier_attack(p, x, y, 0.1, 0.2, 0.05, steps, "logistic", "sign", "linf")
        b = classifiers.classifier_attack(p, x, y, 0.1, 0.2, 0.05, steps, "reflected", "sign", "linf")
        assert torch.equal(a, b)
    raw = [classifiers.classifier_attack(p, x, y, 0.1, 2.0, 0.5, 3, loss, "raw", "l2") for loss in ("logistic", "reflected")]
    assert not torch.equal(*raw)  # raw steps are scaled by σ(−z) and σ(z): they differ


def test_classifier_attack_stays_in_ball_and_box_and_decays():
    p = _mlp(3)
    x = torch.rand(2, 6, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    y = torch.tensor([[0.0, 1, 2, 0, 1, 2], [2.0, 2, 1, 0, 0, 1]])
    for ball, norm in (("l2", 2), ("linf", float("inf"))):
        d = classifiers.classifier_attack(p, x, y, 0.1, 0.3, 1.0, 6, "greedy", "raw", ball, decay_every=2, decay=0.5,
                                   restarts=2, generator=torch.Generator().manual_seed(0))
        assert float((d - x).norm(p=norm, dim=-1).max()) <= 0.3 + 1e-12
        assert float(d.min()) >= 0 and float(d.max()) <= 1
    # two sign steps of 0.05 then 0.025 move each coordinate by at most 0.075
    d = classifiers.classifier_attack(p, x, y, 0.1, 1.0, 0.05, 2, "cross-entropy", "sign", "linf", decay_every=1, decay=0.5,
                               clip=None)
    assert float((d - x).abs().max()) <= 0.075 + 1e-15


def test_greedy_and_cross_entropy_agree_on_two_classes_only():
    x = torch.rand(1, 8, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for k, same in ((2, True), (4, False)):
        p = _mlp(k, runs=1)
        y = torch.randint(0, k, (1, 8), generator=torch.Generator().manual_seed(6)).double()
        a = classifiers.classifier_attack(p, x, y, 0.1, 0.3, 0.05, 4, "cross-entropy", "sign", "linf")
        b = classifiers.classifier_attack(p, x, y, 0.1, 0.3, 0.05, 4, "greedy", "sign", "linf")
        assert torch.equal(a, b) == same


def test_classifier_train_one_full_batch_step_is_gradient_descent():
    p = _mlp(1, runs=2)
    X = torch.rand(4, 5, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0])
    q = classifiers.classifier_train(p, X, y, 0.1, 0.3, 1, 4, torch.Generator().manual_seed(0))
    for r in range(2):
        params = {k: v[r:r + 1].clone().requires_grad_(True) for k, v in p.items()}
        z = y * classifiers.classifier_logits(params, X[None], 0.1)[0, :, 0]
        grads = torch.autograd.grad(torch.nn.functional.softplus(-z).mean(), list(params.values()))
        for (k, v), g in zip(params.items(), grads):
            torch.testing.assert_close(q[k][r], (v - 0.3 * g)[0].detach(), rtol=1e-12, atol=1e-14)
