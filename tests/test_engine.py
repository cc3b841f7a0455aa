"""The training engine: schedules, checkpoints, the descent loop and autograd training."""

import numpy as np
import pytest
import torch

from dropnb.engine import Run, Schedule, descend, log_checkpoints, train

# --- checkpoints ----------------------------------------------------------------------------------


@pytest.mark.parametrize("steps, count", [(1, 2), (10, 5), (100, 40), (5000, 40), (20, 40)])
def test_log_checkpoints_include_ends_and_increase(steps, count):
    points = log_checkpoints(steps, count)
    assert points[0] == 0 and points[-1] == steps
    assert np.all(np.diff(points) > 0)
    assert len(points) <= count


def test_log_checkpoints_are_log_spaced():
    points = log_checkpoints(10**6, 14)  # 0 and 13 points from 10⁰ to 10⁶, half a decade apart
    assert list(points) == [0] + [round(10 ** (k / 2)) for k in range(13)]


@pytest.mark.parametrize("steps, count", [(0, 5), (-1, 5), (10, 1), (10, 0), (True, 5)])
def test_log_checkpoints_bad_input_raises(steps, count):
    with pytest.raises(ValueError, match="steps|count"):
        log_checkpoints(steps, count)


# --- schedules ------------------------------------------------------------------------------------


def test_stages_switch_after_each_count():
    schedule = Schedule.stages([(0.1, 2), (0.01, 3)])
    assert schedule.steps == 5
    assert [schedule(t) for t in range(5)] == [0.1, 0.1, 0.01, 0.01, 0.01]


def test_inverse_time_and_constant():
    schedule = Schedule.inverse_time(0.1, 10, 40)
    assert schedule(0) == 0.1 and schedule(10) == pytest.approx(0.05) and schedule(30) == pytest.approx(0.025)
    assert Schedule.constant(0.3, 7)(6) == 0.3 and Schedule.constant(0.3, 7).steps == 7


def test_of_accepts_every_form():
    stages = Schedule.stages([(0.1, 2)])
    assert Schedule.of(stages) is stages and Schedule.of(stages, 2) is stages
    assert Schedule.of([(0.1, 2), (0.2, 1)]).steps == 3
    assert Schedule.of(0.5, 4)(3) == 0.5
    assert Schedule.of(lambda t: 1 / (t + 1), 4)(3) == 0.25


@pytest.mark.parametrize("call, match", [
    (lambda: Schedule.constant(0.0, 5), "eta"),
    (lambda: Schedule.constant(True, 5), "eta"),
    (lambda: Schedule.constant(0.1, 0), "steps"),
    (lambda: Schedule.stages([]), "schedule"),
    (lambda: Schedule.stages([(0.1, 0)]), "schedule step count"),
    (lambda: Schedule.stages([(float("nan"), 3)]), "schedule step size"),
    (lambda: Schedule.stages(3), "schedule"),
    (lambda: Schedule.inverse_time(0.0, 10, 5), "initial"),
    (lambda: Schedule.of(0.1), "steps"),
    (lambda: Schedule.of(lambda t: -1.0, 5), "lr"),
    (lambda: Schedule.of(Schedule.constant(0.1, 5), 6), "steps"),
])
def test_bad_schedules_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- the loop -------------------------------------------------------------------------------------


def test_descend_records_metrics_state_and_losses_at_checkpoints():
    state = dict(x=np.array([1.0, 2.0]))

    def step(t, eta):
        state["x"] *= 1 - eta
        return state["x"] ** 2

    run = descend(state, step, Schedule.constant(0.5, 4), checkpoints=[4, 0, 2], keep=True,
                  metrics=lambda s: dict(total=s["x"].sum(keepdims=True)), progress=False)
    assert list(run.steps) == [0, 2, 4] and run.taken == 4
    np.testing.assert_array_equal(run.kept["x"][:, 0], [1.0, 0.25, 0.0625])
    np.testing.assert_array_equal(run.metrics["total"][:, 0], [3.0, 0.75, 0.1875])
    assert run.losses.shape == (2, 4) and run.losses[0, 0] == 0.25
    np.testing.assert_array_equal(run.final["x"], [0.0625, 0.125])


def test_a_step_can_end_the_run():
    state = dict(x=np.zeros(3))

    def step(t, eta):
        if t == 3:
            return True
        state["x"] += eta

    run = descend(state, step, Schedule.constant(1.0, 10), checkpoints=[0, 2, 4, 10], progress=False)
    assert run.taken == 3 and list(run.steps) == [0, 2] and np.all(run.final["x"] == 3.0)


def test_divergence_at_a_checkpoint_raises():
    state = dict(x=torch.ones(2))

    def step(t, eta):
        state["x"].mul_(1e300)

    with pytest.raises(FloatingPointError, match="step size"):
        descend(state, step, Schedule.constant(1.0, 5), checkpoints=[0, 5], progress=False)


# --- training from a model, a loss and a data source ----------------------------------------------


def quadratic_problem(runs=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    A = torch.randn((runs, 4, 3), generator=generator, dtype=torch.float64)
    b = torch.randn((runs, 4), generator=generator, dtype=torch.float64)
    return A, b, lambda state, _: ((torch.einsum("rij,rj->ri", A, state["w"]) - b) ** 2).sum(-1)


def test_sgd_is_plain_gradient_descent_per_run():
    A, b, loss = quadratic_problem()
    w0 = torch.zeros((3, 3), dtype=torch.float64)
    run = train(dict(w=w0), loss, Schedule.constant(0.01, 20), progress=False)
    w = w0.clone()
    for _ in range(20):
        residual = torch.einsum("rij,rj->ri", A, w) - b
        w = w - 0.01 * 2 * torch.einsum("rij,ri->rj", A, residual)
    np.testing.assert_allclose(run.final["w"], w.numpy(), rtol=1e-12, atol=1e-14)
    assert run.losses.shape == (3, 20) and np.all(np.diff(run.losses, axis=1) <= 1e-12)
    assert torch.all(w0 == 0), "the engine trains copies of the parameters"


def test_adam_matches_torch_adam():
    _, _, loss = quadratic_problem(runs=2, seed=1)
    w = torch.zeros((2, 3), dtype=torch.float64, requires_grad=True)
    adam = torch.optim.Adam([w], lr=0.05)
    for _ in range(15):
        adam.zero_grad()
        loss(dict(w=w), None).sum().backward()
        adam.step()
    run = train(dict(w=torch.zeros((2, 3), dtype=torch.float64)), loss, Schedule.constant(0.05, 15), optimizer="adam",
                progress=False)
    np.testing.assert_array_equal(run.final["w"], w.detach().numpy())


def test_a_relu_network_with_masks_from_a_data_source_and_max_norm_projection():
    """The interface the coming chapters need: a two-layer ReLU network, fresh samples and dropout
    masks each step (the data source), and a projection of every unit onto a max-norm ball."""
    runs, d, width, n = 4, 3, 8, 16
    generator = torch.Generator().manual_seed(2)
    teacher = torch.randn((d,), generator=generator, dtype=torch.float64)
    seen = []

    def data(t):
        seen.append(t)
        x = torch.randn((runs, n, d), generator=generator, dtype=torch.float64)
        mask = (torch.rand((runs, n, width), generator=generator, dtype=torch.float64) < 0.5).double() / 0.5
        return x, torch.relu(x @ teacher), mask

    def loss(state, batch):
        x, y, mask = batch
        hidden = torch.relu(x @ state["W"].transpose(1, 2)) * mask
        return ((hidden @ state["a"].unsqueeze(-1)).squeeze(-1) - y).pow(2).mean(-1)

    def project(state):  # every unit's incoming weights onto the ball of radius 1
        norms = state["W"].norm(dim=-1, keepdim=True)
        state["W"].mul_(torch.clamp(1 / norms, max=1.0))

    start = dict(W=torch.randn((runs, width, d), generator=generator, dtype=torch.float64),
                 a=torch.randn((runs, width), generator=generator, dtype=torch.float64) / width)
    run = train(start, loss, Schedule.constant(0.05, 50), data=data, project=project, progress=False)
    assert seen == list(range(50))
    assert np.all(np.linalg.norm(run.final["W"], axis=-1) <= 1 + 1e-12)
    assert run.losses.shape == (runs, 50) and np.all(run.losses[:, -10:].mean(1) < run.losses[:, :10].mean(1))


def test_train_rejects_an_unknown_optimizer_and_reports_divergence():
    _, _, loss = quadratic_problem()
    with pytest.raises(ValueError, match="optimizer"):
        train(dict(w=torch.zeros((3, 3), dtype=torch.float64)), loss, Schedule.constant(0.1, 2), optimizer="lbfgs")
    with pytest.raises(FloatingPointError, match="diverged"):
        train(dict(w=torch.zeros((3, 3), dtype=torch.float64)), loss, Schedule.constant(1e3, 400), progress=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_train_runs_on_the_device_of_the_parameters():
    A, b, loss = quadratic_problem()
    A, b = A.cuda(), b.cuda()
    run = train(dict(w=torch.zeros((3, 3), dtype=torch.float64, device="cuda")),
                lambda state, _: ((torch.einsum("rij,rj->ri", A, state["w"]) - b) ** 2).sum(-1),
                Schedule.constant(0.01, 20), progress=False)
    assert run.final["w"].dtype == np.float64 and run.losses.shape == (3, 20)


def test_run_select_keeps_the_chosen_runs_of_every_record():
    run = Run(steps=np.array([0, 5]), metrics=dict(f=np.arange(6.0).reshape(2, 3)), kept=dict(U=np.zeros((2, 3, 4))),
              final=dict(U=np.arange(3.0)), losses=np.arange(6.0).reshape(3, 2), taken=5, outcome=dict(t=np.arange(3)))
    part = run.select([2, 0])
    np.testing.assert_array_equal(part.metrics["f"], [[2.0, 0.0], [5.0, 3.0]])
    np.testing.assert_array_equal(part.final["U"], [2.0, 0.0])
    np.testing.assert_array_equal(part.losses, [[4.0, 5.0], [0.0, 1.0]])
    assert part.kept["U"].shape == (2, 2, 4) and part.taken == 5 and list(part.outcome["t"]) == [2, 0]
    assert run.select(slice(1, 3)).final["U"].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="runs"):
        run.select("first")


def test_a_state_that_turns_non_finite_between_checkpoints_is_stopped_with_its_run_and_step():
    """Checkpoints only at 0: the state is also checked every FINITE_EVERY steps and at the end, so
    nothing non-finite is returned; the error names the quantity, the run and the step."""
    from dropnb.engine import FINITE_EVERY

    state = dict(x=np.ones((3, 2)))

    def step(t, eta):
        if t == 7:
            state["x"][1, 0] = np.nan

    with pytest.raises(FloatingPointError, match=rf"before step {FINITE_EVERY}: x is not finite \(first in run 1"):
        descend(state, step, Schedule.constant(1.0, 3 * FINITE_EVERY), checkpoints=[0], progress=False)
    state = dict(x=torch.ones(2))

    def blow_up_then_stop(t, eta):
        state["x"].mul_(1e300)
        return True if t == 3 else None

    with pytest.raises(FloatingPointError, match="before step 3: x is not finite"):
        descend(state, blow_up_then_stop, Schedule.constant(1.0, 50), checkpoints=[0], progress=False)
