"""The fused E-step of a mixture of records whose fields are linear in their features: the
statistics a brute-force E-step gives, the fallback when a field is not, no NaN anywhere."""

import numpy as np
import pytest
from scipy.stats import lognorm, norm, poisson
from scipy.special import logsumexp

import mixfold
from mixfold import (CategoricalDistribution, DiagonalGaussianDistribution, GaussianDistribution,
                     LogGaussianDistribution, MixtureDistribution, PoissonDistribution,
                     RecordDistribution, VonMisesDistribution)
from mixfold.compute.row_blocks import row_threads
from mixfold.compute.linear import ONE_HOT_LEVELS, PARTIAL_ROWS, MAX_FUSED_BLOCK_ROWS
from mixfold.precision import DOUBLE_DOUBLE, FLOAT64, resolve_precision


def component(i, lam=None):
    return RecordDistribution({
        "x": GaussianDistribution(100.0 + i, 1.0 + 0.3 * i),  # far from 0: centring matters
        "y": LogGaussianDistribution(0.2 * i, 0.5),
        "n": PoissonDistribution(1.0 + 2 * i if lam is None else lam),
        "c": CategoricalDistribution([0.1 + 0.05 * i, 0.5, 0.4 - 0.05 * i], levels=["a", "b", "c"]),
        "v": DiagonalGaussianDistribution([i, -i], [1.0, 2.0]),
        "d": CategoricalDistribution({0: 0.5 - 0.1 * i, 1: 0.5 + 0.1 * i})})


def raw_sums(acc):
    """A Gaussian accumulator's (sum w, sum w x, sum w x^2), from its sums about a reference."""
    s0, a, b, mass = acc.weight[0], acc.sum_x[0], acc.sum_xx[0], acc.ref_mass[0]
    c = mass / s0 if s0 > 0 else 0.0
    return np.array([s0, a + mass, b + 2 * c * a + c * c * s0])


def brute_force(model, rows, weights):
    """(per-row log-density, responsibilities times weights), straight from scipy.stats."""
    levels = {"a": 0, "b": 1, "c": 2}
    cols = {f: np.asarray([r[f] for r in rows]) for f in rows[0]}
    joint = []
    for wk, comp in zip(model.weights, model.components):
        f = comp.fields
        joint.append(np.log(wk)
                     + norm.logpdf(cols["x"], f["x"].mu, np.sqrt(f["x"].sigma2))
                     + lognorm.logpdf(cols["y"], np.sqrt(f["y"].sigma2), scale=np.exp(f["y"].mu))
                     + poisson.logpmf(cols["n"], f["n"].lam)
                     + np.log(f["c"].probs[[levels[c] for c in cols["c"]]])
                     + norm.logpdf(cols["v"], f["v"].mu, np.sqrt(f["v"].sigma2)).sum(axis=1)
                     + np.log(f["d"].probs[cols["d"]]))
    joint = np.stack(joint, axis=1)
    lse = logsumexp(joint, axis=1)
    return lse, np.exp(joint - lse[:, None]) * weights[:, None], cols


def fold(model, rows, weights, precision="float64"):
    enc = model.encoder().fit(rows).encode(rows)
    acc = model.estimator().bind(model.encoder().fit(rows)).accumulator_factory().make()
    lse = acc.seq_update(enc, weights, model, resolve_precision(precision))
    return acc, lse


@pytest.fixture(scope="module")
def problem():
    model = MixtureDistribution([component(i) for i in range(3)], [0.2, 0.3, 0.5])
    n = MAX_FUSED_BLOCK_ROWS + 777  # two blocks, the second short
    rows = model.sampler(0).sample(n)
    weights = np.random.default_rng(1).uniform(0, 2, n)
    return model, rows, weights


def test_fused_record_fold_equals_brute_force(problem):
    model, rows, weights = problem
    acc, lse = fold(model, rows, weights)
    want_lse, resp, cols = brute_force(model, rows, weights)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
    np.testing.assert_allclose(acc.counts, resp.sum(axis=0), rtol=1e-12)
    for k, comp_acc in enumerate(acc.components):
        r = resp[:, k]
        x, y, n, v = comp_acc.factors[0], comp_acc.factors[1], comp_acc.factors[2], \
            comp_acc.factors[4]
        np.testing.assert_allclose(raw_sums(x), [r.sum(), r @ cols["x"], r @ cols["x"] ** 2],
                                   rtol=1e-11)
        logy = np.log(cols["y"])
        np.testing.assert_allclose(raw_sums(y), [r.sum(), r @ logy, r @ logy ** 2], rtol=1e-11)
        np.testing.assert_allclose(n.sums, [r.sum(), r @ cols["n"]], rtol=1e-11)
        codes = np.array([{"a": 0, "b": 1, "c": 2}[c] for c in cols["c"]])
        np.testing.assert_allclose(comp_acc.factors[3].counts,
                                   np.bincount(codes, weights=r, minlength=3), rtol=1e-11)
        np.testing.assert_allclose(comp_acc.factors[5].counts,
                                   np.bincount(cols["d"], weights=r, minlength=2), rtol=1e-11)
        np.testing.assert_allclose(v.sum_x, r @ cols["v"], rtol=1e-11)
        np.testing.assert_allclose(v.sum_xx, r @ cols["v"] ** 2, rtol=1e-11)


def test_fused_fold_does_not_depend_on_the_thread_count(problem, monkeypatch):
    model, rows, weights = problem
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    assert row_threads() == 2
    two, lse_two = fold(model, rows, weights)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "1")
    one, lse_one = fold(model, rows, weights)
    assert np.array_equal(two.to_array(), one.to_array())
    assert np.array_equal(lse_two, lse_one)


def test_float32_fold_stays_close_to_float64(problem):
    model, rows, weights = problem
    a64, lse64 = fold(model, rows, weights)
    a32, lse32 = fold(model, rows, weights, resolve_precision("float32"))
    np.testing.assert_allclose(lse32, lse64, rtol=1e-5)
    # float32 partial sums of 2,048 rows: a sum that cancels (a first moment about the centre,
    # -8.8 out of terms totalling thousands) is off by ~1e-7 of its terms' total
    np.testing.assert_allclose(a32.to_array(), a64.to_array(), rtol=1e-4, atol=2e-3)


@pytest.mark.parametrize("change", ["rate_zero", "von_mises_field"])
def test_a_field_outside_the_form_falls_back_to_the_three_steps(problem, change):
    model, rows, weights = problem
    if change == "rate_zero":  # 0 * log 0 is no GEMM product: the unfused path scores it
        comps = [component(i, lam=0.0 if i == 0 else None) for i in range(3)]
        rows = [dict(r, n=0) if i % 3 == 0 else r for i, r in enumerate(rows)]
    else:
        comps = [RecordDistribution({"x": GaussianDistribution(i, 1.0),
                                     "a": VonMisesDistribution(0.3 * i, 2.0)})
                 for i in range(3)]
        rows = MixtureDistribution(comps, [0.2, 0.3, 0.5]).sampler(0).sample(len(weights))
    model = MixtureDistribution(comps, [0.2, 0.3, 0.5])
    acc, lse = fold(model, rows, weights)
    enc = model.encoder().fit(rows).encode(rows)
    three = model.estimator().bind(model.encoder().fit(rows)).accumulator_factory().make()
    resp, want_lse = model.weighted_posteriors(enc, weights)
    three.counts += resp.sum(axis=0)
    three.units.add(enc, resp, model.units, FLOAT64)
    assert np.array_equal(acc.to_array(), three.to_array())  # the same calls, the same bits
    assert np.array_equal(lse, want_lse, equal_nan=True)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_row_no_component_can_score_gets_minus_inf_and_no_mass(precision):
    # level "z" has probability 0 in every component: its row scores -inf, takes no
    # posterior mass and leaves every statistic finite (the fit then names the row)
    comps = [RecordDistribution({"x": GaussianDistribution(float(i), 1.0),
                                 "c": CategoricalDistribution([0.5, 0.5, 0.0],
                                                              levels=["a", "b", "z"])})
             for i in range(2)]
    model = MixtureDistribution(comps, [0.5, 0.5])
    rows = [{"x": 0.1 * i, "c": "z" if i == 7 else "ab"[i % 2]} for i in range(50)]
    acc, lse = fold(model, rows, np.ones(50), precision)
    assert lse[7] == -np.inf and np.isfinite(np.delete(lse, 7)).all()
    assert np.isfinite(acc.to_array()).all()
    assert acc.counts.sum() == pytest.approx(49.0)
    with pytest.raises(mixfold.NumericalError, match="row 7 has log-density -inf"):
        mixfold.fit(rows, model.estimator(), init=model, max_iter=2, progress=False)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_large_vocabulary_is_counted_by_bincount_with_the_same_sums(precision):
    levels = ONE_HOT_LEVELS + 36  # past the one-hot rows: the weighted-bincount path
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.full(levels, 0.3), size=3)
    probs[:, -1] = 0.0  # a level no component can emit: its row is dead
    probs /= probs.sum(axis=1, keepdims=True)
    comps = [RecordDistribution({"c": CategoricalDistribution(p),
                                 "x": GaussianDistribution(i, 1.0)}) for i, p in enumerate(probs)]
    model = MixtureDistribution(comps, [0.3, 0.3, 0.4])
    rows = model.sampler(2).sample(9000)
    rows[11] = {"c": levels - 1, "x": 0.0}
    weights = rng.uniform(0, 2, 9000)
    acc, lse = fold(model, rows, weights, precision)
    codes = np.array([r["c"] for r in rows])
    x = np.array([r["x"] for r in rows])
    with np.errstate(divide="ignore"):
        joint = np.stack([np.log(w) + np.log(p[codes]) + norm.logpdf(x, i, 1.0)
                          for i, (w, p) in enumerate(zip(model.weights, probs))], axis=1)
    want_lse = logsumexp(joint, axis=1)
    with np.errstate(invalid="ignore"):  # the dead row: -inf - -inf
        resp = np.nan_to_num(np.exp(joint - want_lse[:, None])) * weights[:, None]
    rtol = 1e-11 if precision == "float64" else 1e-4
    assert lse[11] == -np.inf
    np.testing.assert_allclose(np.delete(lse, 11), np.delete(want_lse, 11), rtol=rtol / 10)
    for k, comp_acc in enumerate(acc.components):
        np.testing.assert_allclose(comp_acc.factors[0].counts,
                                   np.bincount(codes, weights=resp[:, k], minlength=levels),
                                   rtol=rtol, atol=1e-9 if precision == "float64" else 1e-4)


def scalar_mixture(kind):
    """A 3-component mixture of one family, and the scipy.stats log-density of component k."""
    if kind == "gaussian":
        comps = [GaussianDistribution(-1e3 + 2.0 * i, 1.0 + i) for i in range(3)]
        return comps, lambda x, c: norm.logpdf(x, c.mu, np.sqrt(c.sigma2))
    if kind == "log_gaussian":
        comps = [LogGaussianDistribution(0.5 * i, 0.3 + 0.1 * i) for i in range(3)]
        return comps, lambda x, c: lognorm.logpdf(x, np.sqrt(c.sigma2), scale=np.exp(c.mu))
    if kind == "poisson":
        comps = [PoissonDistribution(0.5 + 4 * i) for i in range(3)]
        return comps, lambda x, c: poisson.logpmf(x, c.lam)
    comps = [CategoricalDistribution([0.2 + 0.2 * i, 0.8 - 0.3 * i, 0.1 * i]) for i in range(3)]
    return comps, lambda x, c: np.log(c.probs[x])


@pytest.mark.parametrize("kind", ["gaussian", "log_gaussian", "poisson", "categorical"])
def test_a_mixture_of_one_linear_family_folds_fused_to_the_brute_force_sums(kind):
    comps, logpdf = scalar_mixture(kind)
    model = MixtureDistribution(comps, [0.5, 0.2, 0.3])
    x = np.asarray(model.sampler(6).sample(MAX_FUSED_BLOCK_ROWS + 5))
    weights = np.random.default_rng(7).uniform(0, 2, len(x))
    acc, lse = fold(model, x, weights)
    with np.errstate(divide="ignore"):
        joint = np.stack([np.log(w) + logpdf(x, c) for w, c in zip(model.weights, comps)], axis=1)
    want_lse = logsumexp(joint, axis=1)
    resp = np.exp(joint - want_lse[:, None]) * weights[:, None]
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
    np.testing.assert_allclose(acc.counts, resp.sum(axis=0), rtol=1e-12)
    values = np.log(x) if kind == "log_gaussian" else x.astype(float)
    for k, comp_acc in enumerate(acc.components):
        r = resp[:, k]
        if kind == "categorical":
            want = np.bincount(x, weights=r, minlength=3)
        elif kind == "poisson":
            want = [r.sum(), r @ values]
        else:
            np.testing.assert_allclose(raw_sums(comp_acc), [r.sum(), r @ values, r @ values ** 2],
                                       rtol=1e-10)
            continue
        np.testing.assert_allclose(comp_acc.to_array(), want, rtol=1e-10)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_a_block_with_an_outlier_is_scored_row_by_row_and_agrees_with_brute_force(precision):
    # every component is scored against the largest peak, in the scoring GEMM; a block
    # holding a row far below it (here 10^4 standard deviations out) is scored again against
    # each row's largest score: both blocks must give the brute-force sums
    comps = [GaussianDistribution(3.0 * i, 1.0 + 0.5 * i) for i in range(4)]
    model = MixtureDistribution(comps, [0.1, 0.2, 0.3, 0.4])
    x = np.asarray(model.sampler(8).sample(2 * MAX_FUSED_BLOCK_ROWS))
    x[5] = 1e4  # in the first block only
    weights = np.random.default_rng(9).uniform(0, 2, len(x))
    acc, lse = fold(model, x, weights, precision)
    joint = np.stack([np.log(w) + norm.logpdf(x, c.mu, np.sqrt(c.sigma2))
                      for w, c in zip(model.weights, comps)], axis=1)
    want_lse = logsumexp(joint, axis=1)
    resp = np.exp(joint - want_lse[:, None]) * weights[:, None]
    assert want_lse[5] < -1e7
    rtol = 1e-12 if precision == "float64" else 1e-5
    np.testing.assert_allclose(lse, want_lse, rtol=rtol)
    np.testing.assert_allclose(acc.counts, resp.sum(axis=0), rtol=rtol)
    for k, comp_acc in enumerate(acc.components):
        r = resp[:, k]
        want = np.array([r.sum(), r @ x, r @ x ** 2])
        if precision == "float64":
            np.testing.assert_allclose(raw_sums(comp_acc), want, rtol=1e-10)
        else:  # float32 partial sums round relative to the sums of the absolute centred terms
            # (the centre lies within the means, 0..9): a sum that cancels is not known better
            scale = np.array([r.sum(), r @ (np.abs(x) + 9.0), r @ (np.abs(x) + 9.0) ** 2])
            got = raw_sums(comp_acc)
            assert np.all(np.abs(got - want) <= 1e-5 * scale), (got, want)


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_far_apart_components_and_a_short_last_sub_block_give_no_nan(precision):
    # a float32 block is GEMMed in sub-blocks of PARTIAL_ROWS, the last padded: with components
    # 600 sd apart every component's exp underflows on a padding row, whose 0/0 once put NaN
    # into every sum
    comps = [GaussianDistribution(-300.0, 1.0), GaussianDistribution(300.0, 1.0)]
    model = MixtureDistribution(comps, [0.4, 0.6])
    x = np.asarray(model.sampler(1).sample(PARTIAL_ROWS * 3 + 17))
    acc, lse = fold(model, x, np.ones(len(x)), precision)
    low = x < 0
    np.testing.assert_allclose(acc.counts, [low.sum(), (~low).sum()], rtol=1e-6)
    for comp_acc, rows in zip(acc.components, [x[low], x[~low]]):
        np.testing.assert_allclose(raw_sums(comp_acc), [len(rows), rows.sum(), (rows ** 2).sum()],
                                   rtol=1e-5)
    want = np.log(np.where(low, 0.4, 0.6)) + norm.logpdf(x, np.where(low, -300.0, 300.0))
    # the scores are sums of terms of size (x - centre)^2 / 2 = 45,000: known to u of that
    np.testing.assert_allclose(lse, want, atol=1e-9 if precision == "float64" else 0.02)


def test_float64_scores_that_would_underflow_are_floored_to_the_same_sums():
    # components 38 sd apart: a row's score under its neighbour is about -722 (a subnormal exp)
    # and under the next one -2888 (0); such blocks are floored at FLOAT64_SCORE_FLOOR before
    # the exp (NumPy computes those lanes one by one, up to 100x slower), which must not move
    # anything at float64's resolution
    comps = [GaussianDistribution(38.0 * i, 1.0) for i in range(3)]
    model = MixtureDistribution(comps, [0.3, 0.3, 0.4])
    x = np.asarray(model.sampler(2).sample(20000))
    weights = np.random.default_rng(3).uniform(0, 2, len(x))
    acc, lse = fold(model, x, weights, FLOAT64)
    joint = np.stack([np.log(w) + norm.logpdf(x, c.mu, 1.0)
                      for w, c in zip(model.weights, comps)], axis=1)
    want_lse = logsumexp(joint, axis=1)
    resp = np.exp(joint - want_lse[:, None]) * weights[:, None]
    assert ((joint - want_lse[:, None]) < -708).mean() > 0.5  # most lanes would underflow
    np.testing.assert_allclose(lse, want_lse, rtol=1e-12)
    np.testing.assert_allclose(acc.counts, resp.sum(axis=0), rtol=1e-12)
    for k, comp_acc in enumerate(acc.components):
        r = resp[:, k]
        np.testing.assert_allclose(raw_sums(comp_acc), [r.sum(), r @ x, r @ x ** 2], rtol=1e-11)


class _CountingMaximum:
    """NumPy as the fused fold sees it, with its np.maximum calls counted: in a mixture of
    Gaussians (whose scores are bounded) the float64 floor is its only use."""

    def __init__(self):
        self.maximum_calls = 0

    def __getattr__(self, name):
        return getattr(np, name)

    def maximum(self, *args, **kwargs):
        self.maximum_calls += 1
        return np.maximum(*args, **kwargs)


@pytest.mark.parametrize("order, floored", [("overlapping", False), ("far apart first", True),
                                            ("far apart after the first block", False)])
def test_a_float64_fold_floors_its_scores_when_its_first_block_finds_them_far_below(
        monkeypatch, order, floored):
    import mixfold.compute.linear as linear

    # the decision is taken once per fold, on the first rows of its first block (the others
    # wait for it): rows whose scores sit far below under one component (here a component
    # 38 sd away: -722, a subnormal exp) floor every block when the fold starts with them;
    # rows that every component scores within ~700 of each other floor none, and far-apart
    # rows after the first block are folded unfloored (correct, only slower)
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    spread = 1.0 if order == "overlapping" else 38.0
    model = MixtureDistribution([GaussianDistribution(spread * i, 1.0) for i in range(2)],
                                [0.5, 0.5])
    between = np.random.default_rng(5).normal(spread / 2, 1.0, 2 * MAX_FUSED_BLOCK_ROWS)
    far = np.asarray(model.sampler(4).sample(MAX_FUSED_BLOCK_ROWS))
    x = np.concatenate([far, between] if order == "far apart first" else [between, far])
    counting = _CountingMaximum()
    monkeypatch.setattr(linear, "np", counting)
    acc, lse = fold(model, x, np.ones(len(x)), FLOAT64)
    monkeypatch.undo()
    assert (counting.maximum_calls > 0) == floored
    joint = np.stack([np.log(w) + norm.logpdf(x, c.mu, 1.0)
                      for w, c in zip(model.weights, model.components)], axis=1)
    np.testing.assert_allclose(lse, logsumexp(joint, axis=1), rtol=1e-12)
    np.testing.assert_allclose(acc.counts, np.exp(joint - lse[:, None]).sum(axis=0), rtol=1e-12)


def test_a_fused_mixture_takes_large_chunks_and_a_declined_one_the_asked_rows():
    from mixfold.compute.fold import fold_rows
    from mixfold.compute.estep_plan import FUSED_CHUNK_ROWS

    # fused: one chunk of up to FUSED_CHUNK_ROWS rows whatever chunk_rows asks
    fused = MixtureDistribution([GaussianDistribution(i, 1.0) for i in range(3)], [0.3] * 2 + [0.4])
    acc = fused.estimator().accumulator_factory().make()
    assert acc.rows_per_chunk(fused, FLOAT64, 1000) == FUSED_CHUNK_ROWS
    assert acc.rows_per_chunk(fused, DOUBLE_DOUBLE, 1000) == 1000  # the dd band is never fused
    # declined (a rate of 0): the three steps run 1,000 rows at a time, as the fold asked
    model = MixtureDistribution([PoissonDistribution(lam) for lam in (0.0, 2.0, 7.0)],
                                [0.2, 0.3, 0.5])
    x = np.asarray(model.sampler(3).sample(4500))
    enc = model.encoder().fit(x).encode(x)
    est = model.estimator().bind(model.encoder().fit(x))
    weights = np.random.default_rng(2).uniform(0, 2, len(x))
    acc = est.accumulator_factory().make()
    total = fold_rows(acc, enc, weights, model, FLOAT64, 1000)
    want = est.accumulator_factory().make()
    want_total = 0.0
    for lo in range(0, len(x), 1000):
        part, w = enc.rows(lo, min(len(x), lo + 1000)), weights[lo:lo + 1000]
        resp, lse = model.weighted_posteriors(part, w)
        want.counts += resp.sum(axis=0)
        want.units.add(part, resp, model.units, FLOAT64)
        want_total += float(np.einsum("i,i->", w, lse))
    assert np.array_equal(acc.to_array(), want.to_array())
    assert total == pytest.approx(want_total, rel=1e-14)  # one sum of 4,500 terms, not five


def test_a_first_block_that_fails_does_not_leave_the_other_blocks_waiting(monkeypatch):
    import dataclasses
    import signal

    from mixfold.compute.linear import linear_fold
    from mixfold.families._protocol import ArrayEncoded
    from mixfold.families.poisson import PoissonAccumulator

    # the other blocks wait at their exp for the first block's floor decision: if the first
    # block raises before it decides, they must go on, and the error must reach the caller
    monkeypatch.setenv("MIXFOLD_NUM_THREADS", "2")
    n = 3 * MAX_FUSED_BLOCK_ROWS
    enc = ArrayEncoded(np.random.default_rng(8).poisson(3.0, n).astype(float))
    comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
    terms = PoissonAccumulator.linear_terms([PoissonAccumulator() for _ in comps], comps, enc)

    def features(lo, hi, out, write=terms.features):
        if lo == 0:
            raise RuntimeError("the first block's features failed")
        write(lo, hi, out)

    failing = dataclasses.replace(terms, features=features)

    def hung(signum, frame):
        raise TimeoutError("the blocks after the failed first block kept waiting")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # from the main thread, whose blocks run on the pool
    try:
        with pytest.raises(RuntimeError, match="first block's features failed"):
            linear_fold([failing], np.log([0.5, 0.5]), enc, np.ones(n), FLOAT64)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
