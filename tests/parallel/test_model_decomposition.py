"""The structural planner: sizing, costing, whole-tree axis search and device placement."""

import itertools
import json

import numpy as np
import pytest

from mixfold import (
    CategoricalDistribution,
    CompositeDistribution,
    DiagonalGaussianDistribution,
    GaussianDistribution,
    HiddenMarkovDistribution,
    MixtureDistribution,
    MultivariateGaussianDistribution,
    OptionalDistribution,
    PoissonDistribution,
    RecordDistribution,
    SequenceDistribution,
)
from mixfold.decomposition import DecompAxis, ReductionOp
from mixfold.parallel.model_decomposition import (
    ModelCut,
    ModelDecomposition,
    best_parallel_axis,
    compute_cost,
    cost_children,
    decompose_model,
    node_at,
    shard_children,
    size_model_tree,
    subtree_work,
    tree_axes,
)
from mixfold.parallel.resources import DeviceSpec, Resources


def devices(*speeds, memory=None):
    return Resources(tuple(DeviceSpec(f"d{i}", throughput=s, memory_bytes=memory)
                           for i, s in enumerate(speeds)))


def mvn(dim, shift=0.0):
    return MultivariateGaussianDistribution(np.full(dim, shift), np.eye(dim) * (1 + shift))


def gmm(k, dim=1):
    comps = [GaussianDistribution(i, 1 + i) if dim == 1 else
             DiagonalGaussianDistribution(np.full(dim, float(i)), np.ones(dim)) for i in range(k)]
    return MixtureDistribution(comps, np.full(k, 1 / k))


def mvn_bytes(dim):
    return 8 * (dim + 3 * dim * dim)  # mean, covariance and its two Cholesky factors


# -- work and bytes from the declarations ----------------------------------------------------------


def test_leaf_work_reflects_the_real_per_row_cost():
    assert subtree_work(GaussianDistribution(0, 1)) == 1.0
    assert subtree_work(DiagonalGaussianDistribution(np.zeros(7), np.ones(7))) == 7.0
    assert subtree_work(mvn(7)) == 49.0  # whitening by a 7 x 7 factor
    # a table lookup per row, whatever the vocabulary
    assert subtree_work(CategoricalDistribution([1 / 500] * 500)) == 1.0


def test_hmm_work_is_states_squared_per_item_plus_its_emissions():
    s = 4
    trans = np.full((s, s), 1 / s)
    hmm = HiddenMarkovDistribution([mvn(3, i) for i in range(s)], np.full(s, 1 / s), trans)
    # no terminal law: one item per row; forward-backward s^2 + s, each emission 9
    assert subtree_work(hmm) == s * s + s + s * 9
    stop = np.full(s, 0.25)  # geometric lengths, mean 4 items
    hmm_t = HiddenMarkovDistribution([mvn(3, i) for i in range(s)], np.full(s, 1 / s),
                                     trans, stop)
    assert subtree_work(hmm_t) == pytest.approx(4 * (s * s + s) + 4 * s * 9)
    size = size_model_tree(hmm_t)
    assert size.axis is DecompAxis.STATE
    # initial, transitions, continuing transitions, terminal: held by every worker
    assert size.own_param_bytes == 8 * (s + s * s + s * s + s)


def test_sequence_items_are_costed_per_expected_item_and_the_length_law_once():
    length = CategoricalDistribution({2: 0.5, 4: 0.5})  # 3 items on average
    seq = SequenceDistribution(mvn(2), length)
    # own (3 per row) + 3 items of 4 + the length law's lookup
    assert subtree_work(seq) == 3 + 3 * 4 + 1
    assert cost_children(seq) == (seq.item, length)
    assert shard_children(seq) == (seq.item,)
    present = OptionalDistribution(mvn(2), 0.25)
    assert subtree_work(present) == 1 + 0.75 * 4


def test_shared_objects_are_held_once_but_scored_at_each_place():
    heavy = mvn(6)
    shared = MixtureDistribution([heavy] * 3, [1 / 3] * 3)
    apart = MixtureDistribution([mvn(6) for _ in range(3)], [1 / 3] * 3)
    own = 2 * 3 * 8  # weights and log-weights
    assert compute_cost(shared) == (3 + 3 * 36, own + mvn_bytes(6))
    assert compute_cost(apart) == (3 + 3 * 36, own + 3 * mvn_bytes(6))
    tree = size_model_tree(shared)
    assert [c.repeat_of for c in tree.children] == [None, "component_0", "component_0"]
    assert [c.subtree_param_bytes for c in tree.children] == [mvn_bytes(6), 0, 0]
    assert [c.subtree_work for c in tree.children] == [36.0] * 3


def test_sizes_split_own_bytes_from_subtree_bytes_along_record_paths():
    rec = RecordDistribution({"age": GaussianDistribution(40, 9),
                              "visits": SequenceDistribution(gmm(3), PoissonDistribution(2.0))})
    tree = size_model_tree(rec)
    assert [c.path for c in tree.children] == ["age", "visits"]
    visits = tree.find("visits")
    assert [c.path for c in visits.children] == ["visits/item", "visits/length"]
    item = tree.find("visits/item")
    assert item.own_param_bytes == 48 and item.subtree_param_bytes == 48 + 3 * 16
    assert tree.subtree_param_bytes == 16 + 0 + item.subtree_param_bytes + 8  # Poisson: rate
    # a Poisson length law averages 2 items per row
    assert item.rows_per_model_row == pytest.approx(2.0, rel=0.1)
    with pytest.raises(KeyError, match="visits/nothing"):
        tree.find("visits/nothing")


# -- whole-tree search ---------------------------------------------------------------------------


def test_a_heavy_mixture_inside_a_thin_composite_is_found_below_the_root():
    heavy = MixtureDistribution([mvn(8, i) for i in range(12)], np.full(12, 1 / 12))
    model = CompositeDistribution([GaussianDistribution(0, 1), heavy])
    axes = tree_axes(model)
    assert [(a.path, a.axis) for a in axes] == [("", DecompAxis.FACTOR),
                                                ("1", DecompAxis.COMPONENT)]
    assert axes[0].unit_works == (1.0, 12 + 12 * 64)
    best = best_parallel_axis(model, max_workers=4)
    assert best.path == "1" and best.reduction is ReductionOp.LOGSUMEXP_RESPONSIBILITY
    plan = decompose_model(model, devices(1, 1, 1, 1), prefer_data_parallel=False)
    assert plan.path == "1" and plan.axis is DecompAxis.COMPONENT
    assert node_at(model, plan.path) is heavy
    assert [(c.start, c.stop) for c in plan.cuts] == [(0, 3), (3, 6), (6, 9), (9, 12)]


def test_an_imbalanced_composite_loses_to_its_balanced_child():
    heavy = MixtureDistribution([mvn(5, i) for i in range(6)], np.full(6, 1 / 6))
    model = CompositeDistribution([heavy, GaussianDistribution(0, 1)])
    # the root carries more total work, but its heavy factor cannot be split there
    root = tree_axes(model)[0]
    assert root.total_work > tree_axes(model)[1].total_work
    assert root.benefit([1, 1, 1]) == 1.0  # only the light leaf runs beside the mixture
    assert best_parallel_axis(model, max_workers=3).path == "0"
    assert decompose_model(model, devices(1, 1, 1), prefer_data_parallel=False).path == "0"


def test_a_balanced_composite_wins_over_its_small_children():
    model = CompositeDistribution([gmm(2, dim=20), gmm(2, dim=20)])
    plan = decompose_model(model, devices(1, 1), prefer_data_parallel=False)
    assert plan.path == "" and plan.axis is DecompAxis.FACTOR
    assert plan.reduction is ReductionOp.SUM and plan.cut_work == (42.0, 42.0)


def test_a_mixture_inside_a_sequence_inside_a_record_is_cut_through_role_names():
    comps = gmm(6, dim=4)
    model = RecordDistribution({
        "id": CategoricalDistribution({"a": 0.5, "b": 0.5}),
        "pages": SequenceDistribution(comps, CategoricalDistribution({5: 1.0}))})
    plan = decompose_model(model, devices(1, 1), prefer_data_parallel=False)
    assert plan.path == "pages/item" and node_at(model, "pages/item") is comps
    # 5 items per row, each item 4 work per component
    assert plan.cut_work == (60.0, 60.0)
    assert node_at(model, "pages/length") is model.fields["pages"].length
    with pytest.raises(KeyError, match="'itme'.*'item', 'length'"):
        node_at(model, "pages/itme")


def test_nothing_below_a_fused_node_is_cut():
    def heavy():
        return CompositeDistribution([DiagonalGaussianDistribution(np.zeros(20), np.ones(20))] * 2)

    light = CompositeDistribution([GaussianDistribution(0, 1)] * 2)
    apart = MixtureDistribution([heavy(), light], [0.5, 0.5])  # scored component by component
    assert [a.path for a in tree_axes(apart)] == ["", "component_0", "component_1"]
    plan = decompose_model(apart, devices(1, 1), prefer_data_parallel=False)
    assert plan.path == "component_0" and plan.axis is DecompAxis.FACTOR
    fused = MixtureDistribution([heavy(), heavy()], [0.5, 0.5])  # one stacked call
    assert [a.path for a in tree_axes(fused)] == [""]
    assert decompose_model(fused, devices(1, 1), prefer_data_parallel=False).path == ""
    # the root cannot be cut at 2 components a device: nothing below it is tried instead
    blocked = decompose_model(fused, devices(1, 1), prefer_data_parallel=False,
                              min_components_per_shard=2)
    assert not blocked.is_model_parallel and blocked.axis is DecompAxis.NONE


def test_node_at_matches_roles_containing_a_slash_whole():
    g = GaussianDistribution(0, 1)
    rec = RecordDistribution({"a/b": RecordDistribution({"c": g}), "a": GaussianDistribution(1, 1)})
    assert node_at(rec, "a/b/c") is g
    assert node_at(rec, "") is rec


# -- placement ------------------------------------------------------------------------------------


def test_a_leaf_is_never_model_parallel():
    for leaf in (GaussianDistribution(0, 1), mvn(30), CategoricalDistribution([0.5, 0.5])):
        plan = decompose_model(leaf, devices(1, 1, 1, 1), n_data=10, prefer_data_parallel=False)
        assert not plan.is_model_parallel and plan.axis is DecompAxis.NONE and plan.cuts == ()
    assert best_parallel_axis(mvn(30)) is None and tree_axes(mvn(30)) == []


def test_data_parallel_is_preferred_while_the_model_fits_and_rows_dominate():
    model = gmm(4, dim=3)
    four = devices(1, 1, 1, 1)
    assert not decompose_model(model, four).is_model_parallel  # unknown N counts as large
    assert not decompose_model(model, four, n_data=10_000).is_model_parallel
    small_data = decompose_model(model, four, n_data=20)  # fewer than 8 rows per device
    assert small_data.is_model_parallel and "small" in small_data.rationale
    many_units = decompose_model(gmm(8, dim=3), four, n_data=10_000)  # 2 units per device
    assert many_units.is_model_parallel
    assert decompose_model(model, four, prefer_data_parallel=False).is_model_parallel
    assert not decompose_model(model, devices(1)).is_model_parallel  # one device


def test_faster_devices_get_proportionally_more_work():
    model = gmm(100, dim=2)
    plan = decompose_model(model, devices(3, 1), prefer_data_parallel=False)
    assert [(c.device.name, c.start, c.stop) for c in plan.cuts] == [("d0", 0, 75),
                                                                    ("d1", 75, 100)]
    plan = decompose_model(model, devices(1, 2, 1), prefer_data_parallel=False)
    assert [c.stop - c.start for c in plan.cuts] == [25, 50, 25]
    assert [c.device.name for c in plan.cuts] == ["d0", "d1", "d2"]


@pytest.mark.parametrize("seed", range(12))
def test_each_cut_is_within_one_unit_of_its_ideal_share(seed):
    rng = np.random.default_rng(seed)
    dims = rng.integers(1, 40, size=int(rng.integers(5, 60)))
    model = MixtureDistribution([DiagonalGaussianDistribution(np.zeros(d), np.ones(d))
                                 for d in dims], np.full(len(dims), 1 / len(dims)))
    speeds = rng.uniform(0.5, 4.0, size=int(rng.integers(2, 6)))
    plan = decompose_model(model, devices(*speeds), prefer_data_parallel=False)
    cut_units = [dims[c.start:c.stop] for c in plan.cuts]
    assert plan.cut_work == tuple(float(u.sum()) for u in cut_units)
    used = {c.device.name for c in plan.cuts}
    shares = np.array([s for i, s in enumerate(speeds) if f"d{i}" in used])
    # devices given no unit have an ideal share below half a unit
    for i, s in enumerate(speeds):
        if f"d{i}" not in used:
            assert dims.sum() * s / speeds.sum() <= dims.max()
    ideal = dims.sum() * shares / speeds.sum()
    assert np.all(np.abs(np.array(plan.cut_work) - ideal) <= dims.max() + 1e-9), \
        (plan.cut_work, ideal)
    assert plan.cuts[0].start == 0 and plan.cuts[-1].stop == len(dims)
    assert all(a.stop == b.start for a, b in zip(plan.cuts, plan.cuts[1:]))


def test_min_components_per_shard_caps_the_cuts_and_uses_the_fastest_devices():
    plan = decompose_model(gmm(6), devices(1, 5, 1, 4), prefer_data_parallel=False,
                           min_components_per_shard=3)
    assert [c.device.name for c in plan.cuts] == ["d1", "d3"]
    assert [c.stop - c.start for c in plan.cuts] == [3, 3]
    whole = decompose_model(gmm(3), devices(1, 1), prefer_data_parallel=False,
                            min_components_per_shard=2)
    assert not whole.is_model_parallel


def test_device_memory_forces_and_shapes_the_cuts():
    units = [mvn(10, i) for i in range(8)]
    model = CompositeDistribution([GaussianDistribution(0, 1),
                                   MixtureDistribution(units, np.full(8, 1 / 8))])
    _, total = compute_cost(model)
    context = total - 8 * mvn_bytes(10)
    room = context + 3 * mvn_bytes(10)  # room for the rest of the model and 3 units
    plan = decompose_model(model, devices(1, 1, 1, memory=room))
    assert plan.is_model_parallel and plan.path == "1"
    assert "does not fit" in plan.rationale and "balanced" in plan.rationale
    assert [c.stop - c.start for c in plan.cuts] == [3, 2, 3]
    # the balanced 4 + 2 + 2 split for a device twice as fast overflows it: 3 + 3 + 2 fits
    plan = decompose_model(model, devices(2, 1, 1, memory=room))
    assert "fitted to memory" in plan.rationale
    assert [c.stop - c.start for c in plan.cuts] == [3, 3, 2]
    with pytest.raises(ValueError, match=f"needs {total} bytes.*holds {room} bytes"):
        decompose_model(model, devices(1, 1, memory=room))
    with pytest.raises(ValueError, match="nothing in the model splits"):
        decompose_model(mvn(10), devices(1, 1, memory=100))


def test_the_memory_bound_cut_minimises_the_slowest_device():
    fitted = sum(_memory_bound_case(np.random.default_rng(100 + seed)) for seed in range(20))
    assert fitted >= 5  # the cases exercise the memory-bound placement, not only the balanced one


def _memory_bound_case(rng):
    dims = rng.integers(2, 9, size=7)
    model = MixtureDistribution([mvn(int(d)) for d in dims], np.full(7, 1 / 7))
    speeds = rng.uniform(1, 4, size=3)
    context = size_model_tree(model).own_param_bytes
    unit_bytes = [mvn_bytes(int(d)) for d in dims]
    room = context + int(rng.uniform(0.34, 0.5) * sum(unit_bytes))
    work = [d * d for d in dims]
    best = np.inf  # brute force over every contiguous split into at most three ranges
    for a, b in itertools.combinations_with_replacement(range(8), 2):
        ranges = [(0, a), (a, b), (b, 7)]
        if all(sum(unit_bytes[i:j]) + (context if j > i else 0) <= room for i, j in ranges):
            best = min(best, max(sum(work[i:j]) / s for (i, j), s in zip(ranges, speeds)))
    res = devices(*speeds, memory=room)
    if best == np.inf:
        with pytest.raises(ValueError):
            decompose_model(model, res)
        return False
    plan = decompose_model(model, res)
    slowest = max(w / c.device.throughput for c, w in zip(plan.cuts, plan.cut_work))
    assert all(context + sum(unit_bytes[c.start:c.stop]) <= room for c in plan.cuts)
    if "fitted to memory" not in plan.rationale:  # the balanced cut fitted
        assert slowest >= best * (1 - 1e-12)
        return False
    assert slowest == pytest.approx(best, rel=1e-9)
    return True


def test_calibrated_resources_turn_work_into_seconds():
    model = gmm(10, dim=4)
    fast, slow = DeviceSpec("cpu:0", throughput=2000.0), DeviceSpec("cpu:1", throughput=1000.0)
    res = Resources((fast, slow), calibrated_work=50.0)  # the timed model did 50 work per row
    plan = decompose_model(model, res, n_data=1000, prefer_data_parallel=False)
    assert plan.cut_seconds == pytest.approx(tuple(
        w / (c.device.throughput * 50.0) for c, w in zip(plan.cuts, plan.cut_work)))
    text = plan.describe()
    assert "est. s/iteration" in text
    per_iteration = [f"{1000 * s:.4g}" for s in plan.cut_seconds]
    assert all(s in text for s in per_iteration)
    assert decompose_model(model, devices(2, 1), prefer_data_parallel=False).cut_seconds is None
    # a 3-component model (3 + 3 * 4 work per row) with the rows shared by both devices
    replicated = decompose_model(gmm(3, dim=4), res, n_data=1000)
    assert not replicated.is_model_parallel
    assert replicated.data_parallel_seconds == pytest.approx(15 / (3000 * 50))
    assert replicated.describe().splitlines()[-1] == \
        f"data parallel estimate: {1000 * 15 / (3000 * 50):.4g} s/iteration"


def test_describe_is_a_table_with_one_line_per_cut():
    model = CompositeDistribution([gmm(9, dim=3), GaussianDistribution(0, 1)])
    plan = decompose_model(model, devices(1, 1, 1), prefer_data_parallel=False)
    lines = plan.describe().splitlines()
    assert lines[0].startswith("model parallel: component axis of '0', 9 units over 3 devices")
    assert lines[1].startswith("why: model parallelism was asked for")
    assert lines[2].split() == ["device", "kind", "units", "count", "work/row", "share"]
    assert [ln.split()[:5] for ln in lines[3:]] == [
        ["d0", "cpu", "[0,", "3)", "3"], ["d1", "cpu", "[3,", "6)", "3"],
        ["d2", "cpu", "[6,", "9)", "3"]]
    assert all(ln.split()[-1] == "33.3%" for ln in lines[3:])


def test_planning_reads_the_model_and_changes_nothing():
    model = RecordDistribution({"x": gmm(5, dim=3),
                                "s": SequenceDistribution(mvn(3), PoissonDistribution(4.0))})
    before = json.dumps(model.to_dict(), sort_keys=True)
    arrays = [a.copy() for a in (model.fields["x"].weights, model.fields["s"].item.cov)]
    plans = [decompose_model(model, devices(1, 2, 3), n_data=n, prefer_data_parallel=p)
             for n in (None, 5) for p in (True, False)]
    assert json.dumps(model.to_dict(), sort_keys=True) == before
    assert np.array_equal(arrays[0], model.fields["x"].weights)
    assert np.array_equal(arrays[1], model.fields["s"].item.cov)
    # a pure function: the same inputs give the same plan
    assert plans[1] == decompose_model(model, devices(1, 2, 3), prefer_data_parallel=False)


def test_cuts_must_cover_the_units_in_order():
    d = DeviceSpec("a")
    with pytest.raises(ValueError, match="contiguous"):
        ModelDecomposition(DecompAxis.COMPONENT, ReductionOp.SUM, 4,
                           (ModelCut(d, 0, 2, ReductionOp.SUM), ModelCut(d, 3, 4, ReductionOp.SUM)),
                           "x")
    with pytest.raises(ValueError, match=r"cover \[0, 4\)"):
        ModelDecomposition(DecompAxis.COMPONENT, ReductionOp.SUM, 4,
                           (ModelCut(d, 0, 2, ReductionOp.SUM),), "x")


def test_bad_arguments_are_refused_with_their_values():
    with pytest.raises(ValueError, match="n_data must be None or an integer >= 0, got -1"):
        decompose_model(gmm(2), devices(1, 1), n_data=-1)
    with pytest.raises(ValueError, match="min_components_per_shard .* got 0"):
        decompose_model(gmm(2), devices(1, 1), min_components_per_shard=0)
    with pytest.raises(TypeError, match="must be a Resources .*, got a list"):
        decompose_model(gmm(2), [DeviceSpec("a"), DeviceSpec("b")])
    with pytest.raises(ValueError, match="max_workers .* got 0"):
        best_parallel_axis(gmm(2), max_workers=0)
