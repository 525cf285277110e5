"""The model-parallel executor: every planned cut, folded apart, gives the serial fold's bits."""

import pickle

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, CompositeDistribution,
                     DiagonalGaussianDistribution, GaussianDistribution, GaussianEstimator,
                     HiddenMarkovDistribution, MixtureDistribution, MixtureEstimator,
                     MultivariateGaussianDistribution, MultivariateGaussianEstimator,
                     OptionalDistribution, PoissonDistribution, RecordDistribution,
                     SequenceDistribution, VonMisesDistribution, VonMisesEstimator)
from mixfold.decomposition import decomposition_for
from mixfold.families.hidden_markov import HiddenMarkovEstimator
from mixfold.parallel import executor
from mixfold.parallel.model_decomposition import ModelCut, ModelDecomposition, node_at
from mixfold.parallel.model_parallel import (ModelParallelEncodedData, ModelParallelEstimator,
                                             WorkerPool, auto_parallel_estimator, check_plan,
                                             model_parallel_fold, plan_for)
from mixfold.parallel.resources import DeviceSpec, Resources
from mixfold.precision import resolve_precision


def cut_plan(model, path, stops, names=None):
    """A plan cutting the node at ``path`` at the unit indices ``stops`` (the last is K)."""
    dc = decomposition_for(node_at(model, path))
    names = names or [f"w{i}" for i in range(len(stops))]
    cuts, start = [], 0
    for name, stop in zip(names, stops):
        cuts.append(ModelCut(DeviceSpec(name), start, stop, dc.reduction))
        start = stop
    return ModelDecomposition(dc.axis, dc.reduction, len(dc.units), tuple(cuts), "test", path)


def serial_and_threaded(model, rows, plan, weights=None, precision="float64"):
    """(serial accumulator, its return), (threaded accumulator, its return) over ``rows``."""
    precision = resolve_precision(precision)
    enc = model.encoder().fit(rows).encode(rows)
    est = model.estimator().bind(model.encoder().fit(rows))
    w = np.ones(enc.n_rows) if weights is None else weights
    serial, threaded = est.accumulator_factory().make(), est.accumulator_factory().make()
    with threadpool_limits(1, user_api="blas"):  # the workers' BLAS thread count
        ll_serial = serial.seq_update(enc, w, model, precision)
    with WorkerPool([c.device.name for c in plan.cuts]) as pool:
        ll_threaded = model_parallel_fold(threaded, model, enc, w, plan, precision, pool)
        assignments = pool.assignments
    return (serial, ll_serial), (threaded, ll_threaded), assignments


def assert_same_bits(serial, threaded):
    (a, ll_a), (b, ll_b) = serial, threaded
    arrays_a, arrays_b = a.arrays(), b.arrays()
    assert len(arrays_a) == len(arrays_b)
    for x, y in zip(arrays_a, arrays_b):
        assert np.array_equal(x, y), np.abs(x - y).max()
    assert (ll_a is None) == (ll_b is None)
    if ll_a is not None:
        assert np.array_equal(ll_a, ll_b, equal_nan=True)
    assert np.array_equal(a.to_array(), b.to_array())


def gaussian_mixture(k=5):
    return MixtureDistribution([GaussianDistribution(2.0 * i - k, 1.0 + 0.1 * i)
                                for i in range(k)], np.full(k, 1.0 / k))


def von_mises_mixture(k=5):
    """A stacked mixture whose serial E-step scores, normalises and adds in three steps (von
    Mises is not linear in its features, so nothing fuses them): a cut of it is bit-identical."""
    return MixtureDistribution([VonMisesDistribution(-2.5 + 1.1 * i, 1.5 + 0.2 * i)
                                for i in range(k)], np.full(k, 1.0 / k))


def mvg_mixture(k=6, d=3, seed=0):
    rng = np.random.default_rng(seed)
    comps = []
    for _ in range(k):
        a = rng.normal(size=(d, d))
        comps.append(MultivariateGaussianDistribution(rng.normal(0, 3, d), a @ a.T + d * np.eye(d)))
    return MixtureDistribution(comps, np.full(k, 1.0 / k))


def record_mixture(k=4):
    def rec(i):
        return RecordDistribution({"x": GaussianDistribution(i, 1.0),
                                   "c": CategoricalDistribution({"u": 0.2 + 0.1 * i,
                                                                 "v": 0.8 - 0.1 * i}),
                                   "n": PoissonDistribution(1.0 + i)})
    return MixtureDistribution([rec(i) for i in range(k)], np.full(k, 1.0 / k))


def unfused_record_mixture(k=4):
    """Records with a von Mises field (no linear form): the serial E-step runs three steps."""
    return MixtureDistribution([RecordDistribution({
        "x": GaussianDistribution(i, 1.0), "a": VonMisesDistribution(0.5 * i, 2.0),
        "n": PoissonDistribution(1.0 + i)}) for i in range(k)], np.full(k, 1.0 / k))


# -- the cut node, each axis ------------------------------------------------------------------


@pytest.mark.parametrize("stops", [(2, 5), (1, 2, 5), (4, 5), (1, 5)])
def test_stacked_mixture_any_cut_is_bit_identical(stops):
    model = von_mises_mixture()
    rows = model.sampler(0).sample(3000)
    weights = np.random.default_rng(1).uniform(0, 2, 3000)
    plan = cut_plan(model, "", stops)
    serial, threaded, ran = serial_and_threaded(model, rows, plan, weights)
    assert_same_bits(serial, threaded)
    starts = (0,) + stops[:-1]
    assert ran == [(f"w{i}", a, b) for i, (a, b) in enumerate(zip(starts, stops))]


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_full_covariance_mixture_columns_share_the_stack_centre(precision):
    model = mvg_mixture()
    rows = model.sampler(2).sample(2500)
    serial, threaded, _ = serial_and_threaded(model, rows, cut_plan(model, "", (1, 4, 6)),
                                              precision=precision)
    assert_same_bits(serial, threaded)


@pytest.mark.parametrize("rows", [600, 5000])
def test_wide_full_covariance_columns_match_the_whitened_fold(rows):
    # D = 30: the serial fold of a small chunk whitens by BLAS and scores in one compiled pass
    # (families/_full_gaussian_fold.py), a larger one runs the three steps; cut apart, the same
    model = mvg_mixture(4, 30, seed=5)
    data = model.sampler(1).sample(rows)
    for stops in [(1, 4), (2, 3, 4)]:
        assert_same_bits(*serial_and_threaded(model, data, cut_plan(model, "", stops))[:2])


@pytest.mark.parametrize("dim", [1, 3])
def test_single_component_ranges_are_scored_by_the_same_calls(dim):
    # a one-component range must not fall onto another BLAS routine (a GEMM of one row is a
    # matrix-vector product): each component is scored by its own calls, whatever the range
    model = mvg_mixture(5, dim, seed=3)
    rows = model.sampler(0).sample(2000)
    for stops in [(1, 5), (4, 5), (1, 2, 3, 4, 5)]:
        assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", stops))[:2])
    rng = np.random.default_rng(1)
    hmm = HiddenMarkovDistribution([DiagonalGaussianDistribution(rng.normal(0, 2, dim),
                                                                 rng.uniform(0.5, 2, dim))
                                    for _ in range(3)], [0.4, 0.3, 0.3],
                                   [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    seqs = hmm.sampler(0, sample_length=10).sample(200)
    assert_same_bits(*serial_and_threaded(hmm, seqs, cut_plan(hmm, "", (1, 3)))[:2])


def test_von_mises_mixture_last_component_alone_is_bit_identical():
    vm = MixtureDistribution([VonMisesDistribution(m, 2.0) for m in (-2.0, 0.0, 1.0, 2.5)],
                             [0.25] * 4)
    assert_same_bits(*serial_and_threaded(vm, vm.sampler(0).sample(2000),
                                          cut_plan(vm, "", (3, 4)))[:2])


def test_mixture_of_families_reading_the_rows_differently():
    from mixfold import ExponentialDistribution, LogGaussianDistribution

    model = MixtureDistribution([GaussianDistribution(3.0, 1.0), LogGaussianDistribution(0.0, 0.5),
                                 ExponentialDistribution(0.5)], [0.4, 0.3, 0.3])
    rows = np.abs(model.sampler(0).sample(2000)) + 1e-3
    assert model.units.slots is not None  # one encoding per distinct component encoder
    assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", (1, 3)))[:2])


def test_mixture_of_records_with_an_unfused_field_is_bit_identical():
    # the serial E-step runs the three steps and a cut reproduces them bit for bit
    model = unfused_record_mixture()
    rows = model.sampler(3).sample(2000)
    assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", (2, 4)))[:2])


def test_record_fields_fold_on_their_workers():
    model = RecordDistribution({"mix": gaussian_mixture(3), "c": CategoricalDistribution(
        {"a": 0.3, "b": 0.7}), "g": GaussianDistribution(1.0, 2.0), "v": mvg_mixture(3, 2)})
    rows = model.sampler(4).sample(1500)
    plan = cut_plan(model, "", (1, 4), names=["left", "right"])
    serial, threaded, ran = serial_and_threaded(model, rows, plan)
    assert_same_bits(serial, threaded)
    assert ran == [("left", 0, 1), ("right", 1, 4)]


def test_composite_of_leaves_returns_no_row_scores_like_the_serial_fold():
    model = CompositeDistribution([GaussianDistribution(0, 1), PoissonDistribution(2.0),
                                   GaussianDistribution(3, 2)])
    rows = model.sampler(0).sample(500)
    plan = cut_plan(model, "", (2, 3))
    (serial, ll_s), (threaded, ll_t), _ = serial_and_threaded(model, rows, plan)
    assert ll_s is None and ll_t is None
    assert_same_bits((serial, ll_s), (threaded, ll_t))
    # the estimator's accumulator scores the factors on the workers instead of leaving the
    # rows to be scored serially, with the bits model.seq_log_density gives
    enc = model.encoder().encode(rows)
    est = ModelParallelEstimator(model.estimator(), plan)
    wrapped = est.accumulator_factory().make()
    with executor.fit_pools():  # (a pool of this block's, stopped at its end)
        ll = wrapped.seq_update(enc, np.ones(500), model)
    assert np.array_equal(ll, model.seq_log_density(enc))
    assert np.array_equal(wrapped.to_array(), serial.to_array())


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("terminal", [None, [0.1, 0.2, 0.05]])
def test_hmm_states_scored_and_added_apart_are_bit_identical(monkeypatch, compiled, terminal):
    import mixfold.compute.forward_backward as fb

    if not compiled:
        monkeypatch.setattr(fb, "kernels_available", lambda: False)
    model = HiddenMarkovDistribution(
        [GaussianDistribution(-3, 1), GaussianDistribution(0, 0.5), GaussianDistribution(4, 2)],
        [0.5, 0.3, 0.2], [[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]], terminal)
    rows = model.sampler(0, sample_length=12).sample(300) + [[]] * (terminal is None)
    assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", (1, 3)))[:2])


def test_hmm_with_mixture_emissions_scores_each_state_apart():
    model = HiddenMarkovDistribution([gaussian_mixture(2), gaussian_mixture(3)], [0.6, 0.4],
                                     [[0.9, 0.1], [0.3, 0.7]])
    rows = model.sampler(1, sample_length=8).sample(200)
    assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", (1, 2)))[:2])


def fused_case(kind):
    rng = np.random.default_rng(0)
    if kind == "diagonal":
        return MixtureDistribution([DiagonalGaussianDistribution(rng.normal(0, 3, 4),
                                                                 rng.uniform(0.5, 2, 4))
                                    for _ in range(7)], np.full(7, 1 / 7))
    if kind == "gaussian":
        return gaussian_mixture()
    if kind == "poisson":
        return MixtureDistribution([PoissonDistribution(lam) for lam in (0.5, 3.0, 9.0)],
                                   [0.3, 0.3, 0.4])
    return record_mixture()


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("kind", ["diagonal", "gaussian", "poisson", "record"])
def test_fused_mixture_split_agrees_with_its_fused_fold_to_rounding(kind, precision):
    # the one documented exception: the serial E-step of a mixture of a family linear in its
    # features (or of records of such fields) is fused (one GEMM scores all K components of a
    # row block, one sums them), and a GEMM over a range of the components sums in another
    # order; the split runs the three steps every mixture runs, each column on its own
    model = fused_case(kind)
    rows = model.sampler(0).sample(40000)  # two row blocks of the fused fold
    weights = np.random.default_rng(1).uniform(0, 2, 40000)
    rtol = 1e-12 if precision == "float64" else 1e-5
    k = model.num_components
    for stops in [(k // 2, k), (1, k - 1, k)]:
        (serial, ll_s), (threaded, ll_t), _ = serial_and_threaded(
            model, rows, cut_plan(model, "", stops), weights, precision)
        # float32 rounds relative to the sums of absolute terms: a sum that cancels (the
        # weighted x of a component centred near 0) is held to the scale of the largest
        # the fused fold sums a Gaussian field about the fold's centre, a split one about each
        # component's mean: moved to one point, they hold the same sums
        threaded.align_references(serial)
        atol = ((1e-12 if kind == "record" else 0.0) if precision == "float64" else rtol) \
            * np.abs(serial.to_array()).max()
        np.testing.assert_allclose(threaded.to_array(), serial.to_array(), rtol=rtol, atol=atol)
        np.testing.assert_allclose(ll_t, ll_s, rtol=rtol)


# -- cuts deep in the tree ----------------------------------------------------------------------


def test_mixture_inside_a_sequence_is_threaded():
    model = SequenceDistribution(mvg_mixture(4, 2), CategoricalDistribution({0: 0.1, 3: 0.5,
                                                                              6: 0.4}))
    rows = model.sampler(0).sample(400)
    serial, threaded, ran = serial_and_threaded(model, rows, cut_plan(model, "item", (2, 4)))
    assert_same_bits(serial, threaded)
    assert ran == [("w0", 0, 2), ("w1", 2, 4)]


def test_nested_record_sequence_optional_and_unstacked_mixture():
    inner = MixtureDistribution([von_mises_mixture(4), GaussianDistribution(10.0, 1.0)],
                                [0.7, 0.3])  # components of two classes: scored one by one
    model = RecordDistribution({
        "pages": SequenceDistribution(unfused_record_mixture(3), CategoricalDistribution({1: 0.5,
                                                                                   4: 0.5})),
        "age": OptionalDistribution(inner, 0.2),
        "g": GaussianDistribution(0.0, 1.0)})
    rows = model.sampler(5).sample(600)
    for path, stops in [("pages/item", (1, 3)), ("age/inner/component_0", (2, 4)),
                        ("age/inner", (1, 2)), ("", (2, 3))]:
        assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, path, stops))[:2])


def leaves_case(path):
    """A model whose fold leaves rows unscored (leaves return none), and rows of it."""
    pair = CompositeDistribution([GaussianDistribution(0, 1), PoissonDistribution(2.0)])
    if path == "":
        return pair, pair.sampler(0).sample(300)
    if path == "item":
        model = SequenceDistribution(CompositeDistribution([GaussianDistribution(0, 1),
                                                            PoissonDistribution(2.0),
                                                            GaussianDistribution(1, 3)]))
    else:  # a mixture above the cut, unfused (its components' first fields differ in class)
        other = CompositeDistribution([GaussianDistribution(3, 2), PoissonDistribution(6.0)])
        third = CompositeDistribution([gaussian_mixture(2), PoissonDistribution(1.0)])
        model = SequenceDistribution(MixtureDistribution([pair, other, third], [0.3, 0.3, 0.4]))
        assert not decomposition_for(model.item).fused
    return model, model.sampler(0, sample_length=3).sample(300)


@pytest.mark.parametrize("path, stops", [("", (1, 2)), ("item", (1, 3)),
                                         ("item/component_1", (1, 2))])
def test_rows_the_fold_leaves_unscored_are_scored_threaded_with_the_serial_bits(path, stops):
    # the fit scores rows the fold left unscored with model.seq_log_density; the model-parallel
    # accumulator scores them with the cut threaded instead, with the same bits (and a mixture
    # above the cut scores the unit on the path threaded, with the bits it would get)
    model, rows = leaves_case(path)
    enc = model.encoder().encode(rows)
    est = model.estimator().bind(model.encoder())
    serial = est.accumulator_factory().make()
    with threadpool_limits(1, user_api="blas"):
        ll_serial = serial.seq_update(enc, np.ones(300), model)
        expected = model.seq_log_density(enc) if ll_serial is None else ll_serial
    threaded = ModelParallelEstimator(est, cut_plan(model, path, stops))
    wrapped = threaded.accumulator_factory().make()
    with executor.fit_pools():
        ll = wrapped.seq_update(enc, np.ones(300), model)
    assert np.array_equal(ll, expected)
    assert np.array_equal(wrapped.to_array(), serial.to_array())


def test_cut_inside_an_hmm_state():
    model = HiddenMarkovDistribution([mvg_mixture(4, 2, seed=1), mvg_mixture(2, 2, seed=2)],
                                     [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    rows = model.sampler(0, sample_length=6).sample(150)
    assert_same_bits(*serial_and_threaded(model, rows,
                                          cut_plan(model, "state_0", (1, 4)))[:2])


def test_plans_the_executor_cannot_run_bit_for_bit_are_refused():
    model = record_mixture()  # fused: one record's fields cannot be folded apart
    below_fused = cut_plan(model, "component_1", (1, 3))
    with pytest.raises(ValueError, match="fused"):
        check_plan(model, below_fused)
    rows = model.sampler(0).sample(50)
    acc = model.estimator().accumulator_factory().make()
    with pytest.raises(ValueError, match="fused"):
        model_parallel_fold(acc, model, model.encoder().encode(rows), np.ones(50), below_fused)
    many = Resources(tuple(DeviceSpec(f"d{i}") for i in range(8)))
    check_plan(model, auto_parallel_estimator(model.estimator(), model, many,
                                              prefer_data_parallel=False)[1])
    mix = gaussian_mixture(4)
    wrong = cut_plan(gaussian_mixture(5), "", (2, 5))
    with pytest.raises(ValueError, match="5 units"):
        check_plan(mix, wrong)
    seq = SequenceDistribution(mix, CategoricalDistribution({2: 1.0}))
    with pytest.raises(ValueError, match="whole"):
        check_plan(seq, ModelDecomposition(wrong.axis, wrong.reduction, 5, wrong.cuts, "x",
                                           "length"))


# -- fits: every iteration equals the serial fit; one pool per fit; plans honoured --------------


def fit_pair(rows, est, **options):
    with threadpool_limits(1, user_api="blas"):
        serial = mixfold.fit(rows, est, progress=False, **options)
    threaded = mixfold.fit(rows, est, backend="model_parallel", num_workers=2, progress=False,
                           **options)
    return serial, threaded


@pytest.mark.parametrize("make", ["gmm", "mvg", "hmm", "sequence"])
def test_model_parallel_fit_equals_the_serial_fit_bit_for_bit(make):
    if make == "gmm":
        rows, est = von_mises_mixture().sampler(0).sample(3000), \
            MixtureEstimator([VonMisesEstimator()] * 5)
    elif make == "mvg":
        rows, est = mvg_mixture().sampler(0).sample(2000), \
            MixtureEstimator([MultivariateGaussianEstimator()] * 6)
    elif make == "hmm":
        truth = HiddenMarkovDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
                                         [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
        rows, est = truth.sampler(0, sample_length=10).sample(300), \
            HiddenMarkovEstimator([GaussianEstimator()] * 2)
    else:
        truth = SequenceDistribution(von_mises_mixture(3), CategoricalDistribution({2: 0.5,
                                                                                     5: 0.5}))
        rows = truth.sampler(0).sample(500)
        est = mixfold.SequenceEstimator(MixtureEstimator([VonMisesEstimator()] * 3),
                                        CategoricalEstimator())
    serial, threaded = fit_pair(rows, est, max_iter=6, tol=0.0, seed=2)
    assert threaded.backend == "model_parallel"
    assert threaded.model == serial.model  # every parameter, every bit (to_dict equality)
    assert threaded.log_likelihood == serial.log_likelihood


def test_one_pool_per_fit_honouring_the_planned_ranges():
    model = von_mises_mixture(6)
    rows = model.sampler(0).sample(2000)
    uneven = Resources((DeviceSpec("fast", throughput=3.0), DeviceSpec("slow")))
    est, plan = auto_parallel_estimator(MixtureEstimator([VonMisesEstimator()] * 6), model,
                                        uneven, prefer_data_parallel=False)
    assert est.plan is plan and plan.is_model_parallel
    assert est.num_workers == len(plan.cuts) == 2  # sized to the planner's cuts (seed 003)
    expected = [(c.device.name, c.start, c.stop) for c in plan.cuts]
    assert expected[0][2] > 3  # the fast device holds more components
    enc = model.encoder().encode(rows)
    pools = []
    with ModelParallelEncodedData(enc, num_workers=2) as handle:
        res = mixfold.fit(handle, est, max_iter=4, tol=0.0, progress=False,
                          callbacks=[lambda info: pools.append(handle.pool)])
        assert handle.plan is plan
        assert handle.pool.assignments == expected
    assert len(pools) == 4 and all(p is pools[0] for p in pools)
    assert pools[0].closed
    with threadpool_limits(1, user_api="blas"):
        serial = mixfold.fit(rows, MixtureEstimator([VonMisesEstimator()] * 6), max_iter=4,
                             tol=0.0, progress=False)
    assert res.model == serial.model


def test_estimator_keeps_its_pool_for_the_fit_and_releases_it():
    rows = von_mises_mixture(4).sampler(0).sample(1000)
    est = ModelParallelEstimator(MixtureEstimator([VonMisesEstimator()] * 4), num_workers=2)
    seen = []
    before = dict(executor._PROCESS_POOLS)

    def look(info):
        seen.append(list(executor._FIT_POOLS.get().values()))

    res = mixfold.fit(rows, est, max_iter=3, tol=0.0, progress=False, callbacks=[look])
    # one pool of the fit's, made at its first fold, reused by every iteration, stopped at its
    # end; no pool left behind in the process; the user's estimator is not changed
    assert [len(s) for s in seen] == [1, 1, 1] and all(s[0] is seen[0][0] for s in seen)
    assert seen[0][0].closed and executor._FIT_POOLS.get() is None
    assert executor._PROCESS_POOLS == before and est.plan is None
    with threadpool_limits(1, user_api="blas"):
        serial = mixfold.fit(rows, est.inner, max_iter=3, tol=0.0, progress=False)
    assert res.model == serial.model


def test_estimator_pickles_and_pools_never_nest():
    est = ModelParallelEstimator(MixtureEstimator([GaussianEstimator()] * 3), num_workers=2)
    back = pickle.loads(pickle.dumps(est))
    assert back.num_workers == 2 and type(back.inner) is MixtureEstimator
    acc = pickle.loads(pickle.dumps(est.accumulator_factory().make()))
    assert acc.payload_size() == est.inner.accumulator_factory().make().payload_size()
    with pytest.raises(TypeError, match="nest"):
        ModelParallelEstimator(est)
    with WorkerPool(["a", "b"]) as pool:
        assert pool.run([executor.in_worker, executor.in_worker], [(0, 1), (1, 2)]) == [True, True]
    assert not executor.in_worker()


def test_default_plan_and_data_parallel_plans():
    mix = gaussian_mixture(8)
    assert [(c.start, c.stop) for c in plan_for(mix, 2).cuts] == [(0, 4), (4, 8)]
    est, plan = auto_parallel_estimator(MixtureEstimator([GaussianEstimator()] * 2),
                                        gaussian_mixture(2),
                                        Resources((DeviceSpec("a"), DeviceSpec("b"))))
    assert not plan.is_model_parallel and type(est) is MixtureEstimator
    with pytest.raises(ValueError, match="num_workers"):
        plan_for(mix, 0)



def test_tied_mixture_split_agrees_with_its_pooled_fold_to_rounding():
    # the serial small-data fold of a tied mixture hands each component a share of the pooled
    # scatter (families/stacked_gaussian.tied_fold); split, each component adds its own outer
    # products: the pooled sums, so the fit, agree to rounding (the documented exception)
    rows = mvg_mixture(4).sampler(0).sample(2000)
    est = MixtureEstimator([MultivariateGaussianEstimator(covariance_keys="c")] * 4)
    serial, threaded = fit_pair(rows, est, max_iter=6, tol=0.0, seed=2)
    assert threaded.backend == "model_parallel"
    for a, b in zip(serial.model.components, threaded.model.components):
        np.testing.assert_allclose(b.mu, a.mu, rtol=1e-12, atol=1e-12 * np.abs(a.mu).max())
        np.testing.assert_allclose(b.cov, a.cov, rtol=1e-12, atol=1e-12 * np.abs(a.cov).max())
    np.testing.assert_allclose(threaded.model.weights, serial.model.weights, rtol=1e-12)
    np.testing.assert_allclose(threaded.log_likelihood, serial.log_likelihood, rtol=1e-13)
