"""Unit tests of dropnb.adversarial against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dropnb import adversarial, relu_lazy


def _net(seed=0, runs=1, m=6, d=3):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn((runs, m, d), generator=g, dtype=torch.float64)
    a = torch.where(torch.rand((runs, m), generator=g, dtype=torch.float64) < 0.5, -1.0, 1.0) / math.sqrt(m)
    return W, a


def test_losses_against_formulas_and_finite_differences():
    z = np.linspace(-5, 5, 101)
    assert np.allclose(adversarial.reflected_logistic(z), -np.log1p(np.exp(z)), rtol=1e-14)
    assert np.allclose(relu_lazy.logistic_slope(z, base=np.e), 1 / (1 + np.exp(z)), rtol=1e-14)
    h = 1e-6  # −ℓ' is the slope of ℓ(z) = ln(1 + e^{−z})
    fd = -(np.log1p(np.exp(-(z + h))) - np.log1p(np.exp(-(z - h)))) / (2 * h)
    assert np.allclose(relu_lazy.logistic_slope(z, base=np.e), fd, atol=1e-8)
    assert adversarial.leaky_relu(-2.0, 0.25) == -0.5 and adversarial.leaky_relu(3.0, 0.25) == 3.0


def test_network_matches_a_loop():
    rng = np.random.default_rng(1)
    W, a, X = rng.standard_normal((4, 3)), rng.standard_normal(4), rng.standard_normal((5, 3))
    expected = [sum(a[r] * max(0.3 * (W[r] @ x), W[r] @ x) for r in range(4)) for x in X]
    assert np.allclose(adversarial.network(W, a, X, 0.3), expected)


def test_worst_margin_plane_against_brute_force():
    rng = np.random.default_rng(2)
    for _ in range(20):
        m = int(rng.integers(2, 8))
        W, a = rng.standard_normal((m, 2)), rng.standard_normal(m)
        x, nu, alpha = rng.standard_normal(2), float(rng.uniform(0.2, 1.5)), float(rng.uniform(0.1, 1))
        value, point = adversarial.worst_margin_plane(W, a, x, -1.0, alpha, nu)
        assert np.linalg.norm(point - x) <= nu * (1 + 1e-12)
        assert value == pytest.approx(-adversarial.network(W, a, point[None], alpha)[0])
        r, p = np.linspace(0, nu, 201), np.linspace(0, 2 * np.pi, 2001)
        P = x + np.stack([np.outer(r, np.cos(p)).ravel(), np.outer(r, np.sin(p)).ravel()], 1)
        brute = float(np.min(-adversarial.network(W, a, P, alpha)))
        assert value <= brute + 1e-12
        assert brute - value <= np.abs(a) @ np.linalg.norm(W, axis=1) * (nu / 200 + nu * np.pi / 2000) + 1e-12


def test_linear_worst_margin_is_attained_on_the_sphere():
    rng = np.random.default_rng(3)
    w, X, y = rng.standard_normal(4), rng.standard_normal((6, 4)), np.sign(rng.standard_normal(6))
    worst = adversarial.linear_worst_margin(w, X, y, 0.5)
    U = rng.standard_normal((20000, 4))
    U = 0.5 * U / np.linalg.norm(U, axis=1, keepdims=True)
    sampled = (y[:, None] * ((X[:, None, :] + U[None]) @ w)).min(1)
    assert np.all(worst <= sampled + 1e-12) and np.all(sampled - worst < 0.05)


def _numpy_pgd(W, a, x, y, alpha, nu, eta, steps, loss):
    """A plain numpy re-implementation of Algorithm 5 (raw steps, ℓ2 ball)."""
    delta, best, best_z = x.copy(), x.copy(), np.inf
    for _ in range(steps):
        pre = W @ delta
        slope = np.where(pre >= 0, 1.0, alpha)
        z = y * (a * slope) @ pre
        if z < best_z:
            best, best_z = delta.copy(), z
        factor = -1 / (1 + np.exp(-z)) if loss == "reflected" else -1 / (1 + np.exp(z))
        moved = delta + eta * factor * y * (W.T @ (a * slope)) - x
        if np.linalg.norm(moved) > nu:
            moved *= nu / np.linalg.norm(moved)
        delta = x + moved
    return best, best_z


@pytest.mark.parametrize("loss", ["reflected", "logistic"])
def test_pgd_attack_against_numpy(loss):
    W, a = _net(4, runs=2)
    g = torch.Generator().manual_seed(5)
    x = torch.randn((2, 3, 3), generator=g, dtype=torch.float64)
    y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]])
    att = adversarial.pgd_attack(W, a, x, y, 0.4, 0.7, 0.3, 7, loss=loss)
    for r in range(2):
        for i in range(3):
            best, z = _numpy_pgd(W[r].numpy(), a[r].numpy(), x[r, i].numpy(), float(y[r, i]), 0.4, 0.7, 0.3, 7, loss)
            assert np.allclose(att.point[r, i].numpy(), best, atol=1e-13)
            assert float(att.margin[r, i]) == pytest.approx(z, abs=1e-13)


def test_pgd_per_run_steps_and_reflection_invariance():
    W, a = _net(6, runs=2)
    x = torch.randn((2, 4, 3), generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    y = torch.ones((2, 4))
    one = adversarial.pgd_attack(W, a, x, y, 0.5, 0.5, 0.1, torch.tensor([2.0, 5.0]), keep=True)
    alone = adversarial.pgd_attack(W[:1], a[:1], x[:1], y[:1], 0.5, 0.5, 0.1, 2)
    assert torch.equal(one.point[0], alone.point[0])
    paths = [adversarial.pgd_attack(W, a, x, y, 0.5, 0.2, 0.05, 6, loss=loss, rule="sign", ball="linf", keep=True).path
             for loss in adversarial.LOSSES]
    assert torch.equal(paths[0], paths[1])
    assert float((paths[0] - x).abs().max()) <= 0.2 + 1e-15


def test_adversarial_training_step_against_numpy():
    g = torch.Generator().manual_seed(8)
    W1, a = _net(9, runs=2, m=5, d=4)
    xs = torch.nn.functional.normalize(torch.randn((3, 2, 4), generator=g, dtype=torch.float64), dim=-1)
    ys = torch.sign(xs[..., 0])
    calls = iter(range(3))

    def sample(n):
        t = next(calls)
        return xs[t:t + 1], ys[t:t + 1]

    run = adversarial.adversarial_training(sample, W1, a, 0.5, 0.2, 0.3, 3, torch.Generator(), attack_steps=4,
                                           progress=False)
    for r in range(2):
        W, an = W1[r].numpy().copy(), a[r].numpy()
        kappa = np.abs(an).max()
        for t in range(3):
            x, y = xs[t, r].numpy(), float(ys[t, r])
            eta_atk = 1 / (kappa**2 * 5 * np.sum(W**2))
            delta, _ = _numpy_pgd(W, an, x, y, 0.5, 0.2, eta_atk, 4, "reflected")
            pre = W @ delta
            slope = np.where(pre >= 0, 1.0, 0.5)
            z = y * (an * slope) @ pre
            W += 0.3 / (1 + np.exp(z)) * y * (an * slope)[:, None] * delta[None, :]
        assert np.allclose(run.final["W"][r], W, atol=1e-12)


def test_lemma19_invariants_hold_on_a_short_run():
    g = torch.Generator().manual_seed(10)
    m, d, gamma, nu = 8, 5, 0.3, 0.1
    W1 = torch.randn((3, m, d), generator=g)
    a = torch.where(torch.rand((3, m), generator=g) < 0.5, -1.0, 1.0) / math.sqrt(m)
    v = torch.zeros(d)
    v[0] = 1.0
    run = adversarial.adversarial_training(relu_lazy.sphere_margin_sampler(d, gamma, 3, g), W1, a, 0.5, nu,
                                           1 / (1 + nu) ** 2, 200, g, direction=v, margin=gamma, progress=False)
    assert run.metrics["norm_excess"][-1].max() <= 3
    assert run.metrics["increment"][-1].min() >= (1 / math.sqrt(m)) * (1 - 1e-12)
    assert np.allclose(run.metrics["proof_ratio"][-1], 1.0) and run.metrics["ball_excess"][-1].max() <= 1e-15


def test_multiclass_counterexample():
    W, x = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 10.0]]), np.array([1.0, 0.0])
    ce = adversarial.multiclass_pgd(W, x, 0, 0.3, 0.05, 50, "cross-entropy")
    greedy = adversarial.multiclass_pgd(W, x, 0, 0.3, 0.05, 50, "greedy")
    target = adversarial.multiclass_pgd(W, x, 0, 0.3, 0.05, 50, "targeted", target=2)
    assert np.argmax(W @ ce[-1]) == 2 and np.argmax(W @ target[-1]) == 2 and np.argmax(W @ greedy[-1]) != 2
    assert np.all(np.linalg.norm(ce - x, axis=1) <= 0.3 + 1e-15)


def _brute_grid(x, y, radius, box, points, top, endpoints=True):
    """Every grid point scored: the top of each reading by (−score, position), the feasible and flip counts."""
    g = np.linspace(-box, box, points) if endpoints else np.linspace(-box, box, points + 2)[1:-1]
    D = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    position = np.arange(len(D))
    inside = D[:, 0] * D[:, 0] + D[:, 1] * D[:, 1] + D[:, 2] * D[:, 2] <= radius * radius
    D, position = D[inside], position[inside]
    Z = x + D
    scores, margin = adversarial._reading_scores(Z, x, y)
    tops = {name: margin[np.lexsort((position, -scores[name]))[:top]] for name in adversarial.READINGS}
    others = [j for j in range(3) if j != y]
    return tops, len(D), int(np.sum(Z[:, y] < Z[:, others].max(1)))


@pytest.mark.parametrize("seed", range(6))
def test_grid_readings_and_flip_count_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(0, 2, 3), int(rng.integers(0, 3))
    radius, box, points, top = rng.uniform(0.2, 1.0), rng.uniform(0.3, 1.0), int(rng.integers(5, 40)), int(rng.integers(1, 200))
    endpoints = bool(seed % 2)
    tops, feasible, flips = _brute_grid(x, y, radius, box, points, top, endpoints)
    out = adversarial.grid_readings(x, y, radius, box, points, top, endpoints=endpoints, block=int(rng.integers(2, 9)))
    assert int(out["feasible"]) == feasible
    for name in adversarial.READINGS:
        assert np.array_equal(out[name], tops[name])
    assert adversarial.lattice_flip_count(x, y, radius, box, points, endpoints=endpoints) == flips


def test_flip_count_is_exact_on_the_sphere():
    # grid values 0, ±0.5, ±1: many grid points lie exactly on the sphere of radius 1 (and of radius 0.75)
    for radius in (1.0, 0.75):
        for y in range(3):
            x = np.array([0.6, 0.3, 0.0])[[(y + k) % 3 for k in range(3)]]
            _, feasible, flips = _brute_grid(x, y, radius, 1.0, 5, 1)
            assert adversarial.lattice_flip_count(x, y, radius, 1.0, 5) == flips > 0
            assert int(adversarial.grid_readings(x, y, radius, 1.0, 5, 1)["feasible"]) == feasible


def test_beta_certificate_contains_every_broken_point():
    rng = np.random.default_rng(4)
    for _ in range(10):
        m, alpha, nu, beta = int(rng.integers(2, 8)), float(rng.uniform(0.1, 1)), float(rng.uniform(0.1, 0.8)), float(rng.uniform(0, 0.3))
        W, a = rng.standard_normal((m, 2)), rng.standard_normal(m)
        X, y = rng.standard_normal((40, 2)), np.sign(rng.standard_normal(40))
        flagged = adversarial.beta_certificate(W, a, X, y, alpha, nu, beta)
        norm = np.linalg.norm(W)
        for k in range(40):
            worst, _ = adversarial.worst_margin_plane(W / norm, a, X[k], y[k], alpha, nu)
            assert worst >= -beta or flagged[k]
        lipschitz = np.abs(a) @ np.linalg.norm(W / norm, axis=1)
        expected = y * adversarial.network(W / norm, a, X, alpha) < nu * lipschitz - beta
        assert np.array_equal(flagged, expected)


@pytest.mark.parametrize("bad", [dict(alpha=0.0), dict(alpha=1.5), dict(radius=-1.0)])
def test_bad_arguments_name_themselves(bad):
    W, a = _net()
    args = dict(alpha=0.5, radius=0.5)
    args.update(bad)
    with pytest.raises(ValueError, match=next(iter(bad))):
        adversarial.pgd_attack(W, a, torch.zeros((1, 1, 3)), torch.ones((1, 1)), args["alpha"], args["radius"], 0.1, 3)

