"""Two-layer image classifiers batched over runs, their PGD attacks and their training (the networks of
the source's Tables 6-I and 6-II, Mianjy 2021, Ch. 6; the theory is in :mod:`dropnb.adversarial`).

The model: R two-layer networks f(x) = W₂σ(h(x)) + b₂ at once, with the leaky ReLU σ(z) = max{αz, z},
α ∈ (0, 1], and a first layer h(x) that is either

* dense, h(x) = W₁x + b₁ (:func:`mlp_init`): W₁ (R, m, d) of entries N(0, 2/d), W₂ (R, k, m) of
  entries N(0, 1/m), or
* convolutional, h(x) = K₁ ⋆ x + b₁ (:func:`conv_init`) on square images of side n (inputs of length
  d = n²): c kernels K₁ (R, c, s, s) of entries N(0, 2/s²) applied at stride 2 (an (n − s)/2 + 1 square
  map per kernel, n − s even), W₂ (R, k, c·((n − s)/2 + 1)²) of entries N(0, 1/fan-in),

with zero biases b₁ and b₂ (R, k). The parameters are a dict with keys W1 (or K1), b1, W2 and b2, all of
one dtype and device (default: float64 on a CPU, float32 on a GPU); inputs are x (R, n, d).
:func:`classifier_logits` gives the outputs (R, n, k).

The loss is the logistic loss ℓ(yf) = ln(1 + e^{−yf}) for one output (labels y = ±1) and the
cross-entropy −ln p_y for k outputs (y the class). :func:`classifier_attack` is projected gradient ascent
on a per-point loss L in the step order of the Adversarial Robustness Toolbox: δ₀ = x,
δ_{t+1} = x + Π_ν(clip(δ_t + η_t s_t) − x) with g = ∇_δ L(δ_t), s = g, g/‖g‖ or sign(g), Π_ν the
projection on the ℓ2 or ℓ∞ ball of radius ν, clip to the pixel range; L is ℓ(yf), the reflected
ℓ₋(yf) = −ln(1 + e^{yf}), the cross-entropy or the greedy reflected ln p_j (j the most likely wrong
class). FGSM is one sign step of size ν, BIM sign steps, PGD with random restarts.
:func:`classifier_train` is minibatch SGD on the book's engine (:func:`dropnb.engine.train`), standard
or adversarial (each minibatch replaced by its attack at the current weights).
"""

from __future__ import annotations

import math

import torch

from . import checks
from .adversarial import BALLS, RULES, _leak
from .engine import Schedule, train


# ---------------------------------------------------------------------------------------------
# Two-layer networks on images (the source's Tables 6-I and 6-II), batched over runs
# ---------------------------------------------------------------------------------------------

CLASSIFIER_LOSSES = ("logistic", "reflected", "cross-entropy", "greedy")
CONV_STRIDE = 2  # stride of the convolutional first layer (:func:`conv_init`)


def _classifier_params(params) -> dict[str, torch.Tensor]:
    """Validate the parameters of R two-layer classifiers: W1 (R, m, d) of an MLP or K1 (R, c, s, s) of a
    convolution, then b1, W2 (R, k, ·) and b2 (R, k), all of one dtype and device."""
    if not isinstance(params, dict) or set(params) not in ({"W1", "b1", "W2", "b2"}, {"K1", "b1", "W2", "b2"}):
        raise ValueError(f"params must be a dict with keys W1 (or K1), b1, W2, b2, got {checks._shown(params)}")
    first = "W1" if "W1" in params else "K1"
    W1 = checks.tensor(params[first], first, ndim=3 if first == "W1" else 4)
    runs, width = W1.shape[:2]
    W2 = checks.tensor(params["W2"], "W2", ndim=3)
    hidden = width if first == "W1" else W2.shape[2]
    if first == "K1" and (W1.shape[2] != W1.shape[3] or math.isqrt(hidden // width) ** 2 * width != hidden):
        raise ValueError(f"K1 must be (R, c, s, s) and W2's columns c times a square, got {tuple(W1.shape)} and "
                         f"{tuple(W2.shape)}")
    out = W2.shape[1]
    for name, want in {"b1": (runs, width), "W2": (runs, out, hidden), "b2": (runs, out)}.items():
        if tuple(params[name].shape) != want:
            raise ValueError(f"params[{name!r}] must have shape {want}, got {tuple(params[name].shape)}")
    checks.same_dtype({f"params[{name!r}]": params[name] if name != first else W1
                       for name in (first, "b1", "W2", "b2")})
    return {first: W1, "b1": params["b1"], "W2": W2, "b2": params["b2"]}


def _inputs(p) -> int:
    """The input dimension d of validated classifier parameters (a square image of side n for a convolution)."""
    if "W1" in p:
        return p["W1"].shape[2]
    channels, size = p["K1"].shape[1], p["K1"].shape[2]
    out = math.isqrt(p["W2"].shape[2] // channels)
    return ((out - 1) * CONV_STRIDE + size) ** 2


def mlp_init(runs: int, dim: int, width: int, outputs: int, generator: torch.Generator,
             dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Start R two-layer networks f(x) = W₂σ(W₁x + b₁) + b₂ with W₁ (R, m, d) of entries N(0, 2/d),
    W₂ (R, k, m) of entries N(0, 1/m) and zero biases, in ``dtype`` (default: float64 on a CPU, float32
    on a GPU)."""
    runs, dim = checks.integer(runs, "runs"), checks.integer(dim, "dim")
    width, outputs = checks.integer(width, "width"), checks.integer(outputs, "outputs")
    generator = checks.torch_generator(generator)
    device = generator.device
    dtype = checks.float_dtype(dtype, device)
    W1 = torch.randn(runs, width, dim, generator=generator, device=device, dtype=dtype) * math.sqrt(2 / dim)
    W2 = torch.randn(runs, outputs, width, generator=generator, device=device, dtype=dtype) / math.sqrt(width)
    return {"W1": W1, "b1": torch.zeros(runs, width, device=device, dtype=dtype), "W2": W2,
            "b2": torch.zeros(runs, outputs, device=device, dtype=dtype)}


def conv_init(runs: int, side: int, channels: int, kernel: int, outputs: int, generator: torch.Generator,
              dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Start R two-layer convolutional networks on square images of side n (inputs of length d = n²):
    f(x) = W₂ vec σ(K₁ ⋆ x + b₁) + b₂, with c kernels K₁ (R, c, s, s) of entries N(0, 2/s²) applied at stride
    2 (an (n − s)/2 + 1 square map per kernel, n − s even), W₂ (R, k, c·((n − s)/2 + 1)²) of entries
    N(0, 1/fan-in) and zero biases, in ``dtype`` (default: float64 on a CPU, float32 on a GPU)."""
    runs, side = checks.integer(runs, "runs"), checks.integer(side, "side")
    channels, kernel = checks.integer(channels, "channels"), checks.integer(kernel, "kernel")
    outputs = checks.integer(outputs, "outputs")
    if kernel > side or (side - kernel) % CONV_STRIDE:
        raise ValueError(f"kernel must be at most side and side − kernel a multiple of {CONV_STRIDE}, "
                         f"got side {side} and kernel {kernel}")
    generator = checks.torch_generator(generator)
    device = generator.device
    dtype = checks.float_dtype(dtype, device)
    hidden = channels * ((side - kernel) // CONV_STRIDE + 1) ** 2
    K1 = torch.randn(runs, channels, kernel, kernel, generator=generator, device=device, dtype=dtype) * math.sqrt(2) / kernel
    W2 = torch.randn(runs, outputs, hidden, generator=generator, device=device, dtype=dtype) / math.sqrt(hidden)
    return {"K1": K1, "b1": torch.zeros(runs, channels, device=device, dtype=dtype), "W2": W2,
            "b2": torch.zeros(runs, outputs, device=device, dtype=dtype)}


def classifier_logits(params, x, alpha: float) -> torch.Tensor:
    """The outputs W₂σ(h(x)) + b₂ (R, n, k) of R two-layer networks at x (R, n, d), with h(x) = W₁x + b₁
    (:func:`mlp_init`) or the convolution K₁ ⋆ x + b₁ (:func:`conv_init`), and the leaky ReLU
    σ(z) = max{αz, z}, α ∈ (0, 1]; x is moved to the parameters' device and dtype."""
    p = _classifier_params(params)
    x = checks.tensor(x, "x", ndim=3)
    runs, dim = p["b1"].shape[0], _inputs(p)
    if x.shape[0] != runs or x.shape[2] != dim:
        raise ValueError(f"x must be ({runs}, n, {dim}), got {tuple(x.shape)}")
    return _logits(p, x.to(device=p["W2"].device, dtype=p["W2"].dtype), _leak(alpha))


def _logits(p, x, alpha):
    if "W1" in p:
        pre = torch.baddbmm(p["b1"][:, None, :], x, p["W1"].transpose(1, 2))
    else:  # all runs in one grouped convolution: images (n, R, side, side), kernels (R·c, 1, s, s)
        runs, n, dim = x.shape
        side, channels, size = math.isqrt(dim), p["K1"].shape[1], p["K1"].shape[2]
        images = x.transpose(0, 1).reshape(n, runs, side, side)
        maps = torch.nn.functional.conv2d(images, p["K1"].reshape(runs * channels, 1, size, size),
                                          p["b1"].reshape(-1), stride=CONV_STRIDE, groups=runs)
        pre = maps.reshape(n, runs, -1).transpose(0, 1)
    return torch.baddbmm(p["b2"][:, None, :], torch.maximum(alpha * pre, pre), p["W2"].transpose(1, 2))


def _objective(z: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """The per-point objective the attack ascends: ℓ(yf), ℓ₋(yf) = −ln(1 + e^{yf}) (one output, y = ±1),
    −ln p_y or ln p_j for the most likely wrong class j (k outputs, y the class)."""
    if loss in ("logistic", "reflected"):
        margin = y * z[..., 0]
        return torch.nn.functional.softplus(-margin) if loss == "logistic" else -torch.nn.functional.softplus(margin)
    log_p = torch.log_softmax(z, dim=-1)
    own = log_p.gather(-1, y[..., None].long())[..., 0]
    if loss == "cross-entropy":
        return -own
    wrong = z.detach().scatter(-1, y[..., None].long(), -math.inf).argmax(-1, keepdim=True)
    return log_p.gather(-1, wrong)[..., 0]


def _labels(y, logits_shape, name="y") -> torch.Tensor:
    y = checks.tensor(y, name)
    if tuple(y.shape) != tuple(logits_shape[:2]):
        raise ValueError(f"{name} must have shape {tuple(logits_shape[:2])}, got {tuple(y.shape)}")
    if logits_shape[2] == 1 and not bool((y.abs() == 1).all()):
        raise ValueError(f"{name} must be labels ±1 for a network with one output, got {checks._shown(y)}")
    if logits_shape[2] > 1 and not bool(((y >= 0) & (y < logits_shape[2]) & (y == y.round())).all()):
        raise ValueError(f"{name} must be classes 0…{logits_shape[2] - 1}, got {checks._shown(y)}")
    return y


def classifier_attack(params, x, y, alpha: float, radius: float, step: float, steps: int, loss: str = "logistic",
               rule: str = "sign", ball: str = "linf", decay_every: int | None = None, decay: float = 1.0,
               clip: tuple[float, float] | None = (0.0, 1.0), restarts: int = 0,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """Projected gradient ascent on a per-point loss L for R networks at once (x (R, n, d)), in the step
    order of the Adversarial Robustness Toolbox: δ₀ = x,
    δ_{t+1} = x + Π_ν(clip(δ_t + η_t s_t) − x) with g = ∇_δ L(δ_t), s = g, g/‖g‖ or sign(g)
    (``rule``), Π_ν the projection on the ℓ2 or ℓ∞ ball of radius ν (``ball``), clip to ``clip``,
    η_t = η·decay^{⌊t/decay_every⌋}; returns the last iterate δ_T (R, n, d). L is ℓ(yf) or
    ℓ₋(yf) (``logistic``/``reflected``, one output, y = ±1), the cross-entropy −ln p_y or the greedy
    reflected ln p_j, j the most likely wrong class at δ_t (``cross-entropy``/``greedy``, y the class).
    FGSM is one sign step of size ν, BIM sign steps. With ``restarts`` r > 0 the attack also runs from r
    uniform random starts in the ℓ∞ ball (``generator``) and keeps, per point, the end point of largest
    cross-entropy or ℓ. x and y are moved to the parameters' device and dtype."""
    p = _classifier_params(params)
    x = checks.tensor(x, "x", ndim=3)
    runs, dim = p["b1"].shape[0], _inputs(p)
    if x.shape[0] != runs or x.shape[2] != dim:
        raise ValueError(f"x must be ({runs}, n, {dim}), got {tuple(x.shape)}")
    y = _labels(y, (runs, x.shape[1], p["W2"].shape[1]))
    alpha, radius, step = _leak(alpha), checks.positive(radius, "radius"), checks.positive(step, "step")
    steps = checks.integer(steps, "steps")
    loss, rule, ball = checks.choice(loss, "loss", CLASSIFIER_LOSSES), checks.choice(rule, "rule", RULES), checks.choice(ball, "ball", BALLS)
    if (p["W2"].shape[1] == 1) != (loss in ("logistic", "reflected")):
        raise ValueError(f"loss must be 'logistic' or 'reflected' for one output and 'cross-entropy' or 'greedy' "
                         f"for several, got {loss!r} for {p['W2'].shape[1]} outputs")
    if decay_every is not None:
        decay_every = checks.integer(decay_every, "decay_every")
    decay = checks.number(decay, "decay", minimum=0.0, maximum=1.0, open_minimum=True)
    if clip is not None:
        if not isinstance(clip, tuple) or len(clip) != 2:
            raise checks.error("clip", "None or a pair (low, high)", clip)
        low, high = (checks.number(c, "clip") for c in clip)
        if not low < high:
            raise checks.error("clip", "a pair with low < high", clip)
        clip = (low, high)
    restarts = checks.integer(restarts, "restarts", minimum=0)
    if restarts:
        generator = checks.torch_generator(generator)
    p = {k: v.detach() for k, v in p.items()}
    x, y = (v.to(device=p["W2"].device, dtype=p["W2"].dtype) for v in (x, y))
    base_loss = "logistic" if loss in ("logistic", "reflected") else "cross-entropy"
    best, best_value = None, None
    for r in range(restarts + 1):
        delta = x.clone()
        if r > 0:
            noise = torch.rand(x.shape, generator=generator, device=generator.device, dtype=x.dtype).to(x.device)
            delta = x + radius * (2 * noise - 1)
            if clip is not None:
                delta = delta.clamp(*clip)
        delta = _ascend(p, x, y, delta, alpha, radius, step, steps, loss, rule, ball, decay_every, decay, clip)
        with torch.no_grad():
            value = _objective(_logits(p, delta, alpha), y, base_loss)
        if best is None:
            best, best_value = delta, value
        else:
            better = value > best_value
            best, best_value = torch.where(better[..., None], delta, best), torch.where(better, value, best_value)
    return best


def _ascend(p, x, y, delta, alpha, radius, step, steps, loss, rule, ball, decay_every, decay, clip):
    for t in range(steps):
        eta = step * decay ** (t // decay_every) if decay_every else step
        delta = delta.detach().requires_grad_(True)
        objective = _objective(_logits(p, delta, alpha), y, loss).sum()
        (g,) = torch.autograd.grad(objective, delta)
        with torch.no_grad():
            if rule == "sign":
                s = torch.sign(g)
            elif rule == "normalized":
                norm = g.norm(dim=-1, keepdim=True)
                s = g / torch.where(norm > 0, norm, torch.ones_like(norm))
            else:
                s = g
            moved = delta + eta * s
            if clip is not None:
                moved = moved.clamp(*clip)
            moved = moved - x
            if ball == "l2":
                length = moved.norm(dim=-1, keepdim=True)
                moved = moved * torch.where(length > radius, radius / torch.where(length > 0, length, torch.ones_like(length)),
                                            torch.ones_like(length))
            else:
                moved = moved.clamp(-radius, radius)
            delta = x + moved
    return delta.detach()


def classifier_train(params, X, y, alpha: float, lr: float, epochs: int, batch: int, generator: torch.Generator,
              lr_every: int | None = None, lr_decay: float = 1.0, attack: dict | None = None) -> dict[str, torch.Tensor]:
    """Minibatch SGD for R networks at once on the book's engine (:func:`dropnb.engine.train`), each run
    with its own shuffles of the shared data X (n, d), y (n,): W ← W − η_e ∇_W (1/B) Σ_i ℓ_train(f(δ_i)), with ℓ_train the logistic loss ℓ(yf) (one output)
    or the cross-entropy (several), η_e = lr·lr_decay^{⌊e/lr_every⌋} in epoch e, and δ_i = x_i, or with
    ``attack`` (keyword arguments of :func:`classifier_attack`) its attack on x_i at the current weights
    (adversarial training). X and y are moved to the parameters' device and dtype. Returns the trained
    parameters."""
    p = {k: v.detach().clone() for k, v in _classifier_params(params).items()}
    runs, dim = p["b1"].shape[0], _inputs(p)
    X = checks.tensor(X, "X")
    if X.shape[1] != dim:
        raise ValueError(f"X must have {dim} columns, got {tuple(X.shape)}")
    y = _labels(checks.tensor(y, "y", ndim=1)[None].expand(runs, -1), (runs, X.shape[0], p["W2"].shape[1]))[0]
    alpha, lr = _leak(alpha), checks.positive(lr, "lr")
    epochs, batch = checks.integer(epochs, "epochs"), checks.integer(batch, "batch")
    generator = checks.torch_generator(generator)
    if lr_every is not None:
        lr_every = checks.integer(lr_every, "lr_every")
    lr_decay = checks.number(lr_decay, "lr_decay", minimum=0.0, maximum=1.0, open_minimum=True)
    if attack is not None and not isinstance(attack, dict):
        raise checks.error("attack", "None or a dict of classifier_attack's keyword arguments", attack)
    X, y = (v.to(device=p["W2"].device, dtype=p["W2"].dtype) for v in (X, y))
    train_loss = "logistic" if p["W2"].shape[1] == 1 else "cross-entropy"
    n = X.shape[0]
    per_epoch = -(-n // batch)
    order = {}

    def minibatch(t: int) -> torch.Tensor:
        if t % per_epoch == 0:  # each run its own shuffle of the data, once per epoch
            order["now"] = torch.argsort(torch.rand(runs, n, generator=generator, device=generator.device),
                                         dim=1).to(X.device)
        return order["now"][:, (t % per_epoch) * batch:(t % per_epoch + 1) * batch]

    def loss(state, idx) -> torch.Tensor:
        xb, yb = X[idx], y[idx]
        if attack is not None:
            xb = classifier_attack({k: v.detach() for k, v in state.items()}, xb, yb, alpha, **attack)
        return _objective(_logits(state, xb, alpha), yb, train_loss).mean(1)

    schedule = Schedule(epochs * per_epoch,
                        lambda t: lr * lr_decay ** ((t // per_epoch) // lr_every) if lr_every else lr)
    run = train(p, loss, schedule, data=minibatch, checkpoints=[0, schedule.steps], progress=False,
                description="classifier training")
    return {k: torch.as_tensor(v, device=p[k].device, dtype=p[k].dtype) for k, v in run.final.items()}
