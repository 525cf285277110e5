"""The decomposition contract: lookup order, validation, and what every family declares."""

import numpy as np
import pytest

from mixfold import (
    CategoricalDistribution,
    CompositeDistribution,
    GammaDistribution,
    GaussianDistribution,
    HiddenMarkovDistribution,
    MixtureDistribution,
    OptionalDistribution,
    PoissonDistribution,
    RecordDistribution,
    SequenceDistribution,
)
from mixfold.decomposition import (
    DecompAxis,
    Decomposition,
    ReductionOp,
    decomposition_for,
    register_decomposition,
)


class Base:
    pass


class Derived(Base):
    pass


class Hooked(Base):
    def decomposition(self):
        return Decomposition.atomic(row_work=7.0)


def _pair(node):
    return Decomposition(DecompAxis.FACTOR, ReductionOp.SUM, units=("a", "b"),
                         child_roles=("left", "right"))


register_decomposition(Base, _pair)


def test_lookup_order_instance_hook_then_registry_then_mro_then_atomic():
    assert decomposition_for(Base()).child_roles == ("left", "right")
    assert decomposition_for(Derived()).child_roles == ("left", "right")  # through the MRO
    assert decomposition_for(Hooked()).row_work == 7.0  # the class's own method wins
    node = Derived()
    node.decomposition = lambda: Decomposition.atomic(row_work=3.0)  # an instance hook
    assert decomposition_for(node).row_work == 3.0
    plain = decomposition_for(object())
    assert (plain.axis, plain.reduction, plain.num_units, plain.children) == (
        DecompAxis.NONE, ReductionOp.REPLICATE, 1, ())


def test_register_decomposition_refuses_what_is_not_a_class_or_callable():
    with pytest.raises(TypeError, match="needs a class"):
        register_decomposition(Base(), _pair)
    with pytest.raises(TypeError, match="callable"):
        register_decomposition(Derived, 3)


def test_a_hook_must_return_a_decomposition():
    class Bad:
        def decomposition(self):
            return "component"

    with pytest.raises(TypeError, match="Bad must be a Decomposition, got str"):
        decomposition_for(Bad())


@pytest.mark.parametrize("kwargs, message", [
    (dict(axis=DecompAxis.NONE, reduction=ReductionOp.REPLICATE, units=("a",)), "no units"),
    (dict(axis=DecompAxis.SEQUENCE, reduction=ReductionOp.REPLICATE, units=("a", "b")),
     "exactly one unit, got 2"),
    (dict(axis=DecompAxis.COMPONENT, reduction=ReductionOp.SUM), "at least one unit"),
    (dict(axis=DecompAxis.COMPONENT, reduction=ReductionOp.REPLICATE, units=("a",)),
     "cannot reduce by replicate"),
    (dict(axis=DecompAxis.NONE, reduction=ReductionOp.SUM), "cannot reduce by sum"),
    (dict(axis=DecompAxis.FACTOR, reduction=ReductionOp.SUM, units=("a",),
          child_roles=("x", "y")), r"one role per unit and shared child \(1\), got 2"),
    (dict(axis=DecompAxis.NONE, reduction=ReductionOp.REPLICATE, row_work=float("nan")),
     "row_work must be a finite number >= 0, got nan"),
    (dict(axis=DecompAxis.NONE, reduction=ReductionOp.REPLICATE, unit_rows=-1.0),
     "unit_rows must be a finite number >= 0, got -1.0"),
    (dict(axis=DecompAxis.NONE, reduction=ReductionOp.REPLICATE, param_bytes=1.5),
     "param_bytes must be an integer >= 0, got 1.5"),
    (dict(axis="diagonal", reduction=ReductionOp.SUM), "'diagonal' is not a valid DecompAxis"),
    (dict(axis=DecompAxis.SEQUENCE, reduction=ReductionOp.REPLICATE, units=("a",), fused=True),
     "only a node split into units can be fused, not a sequence node"),
    (dict(axis=DecompAxis.FACTOR, reduction=ReductionOp.SUM, units=("a",), fused=1),
     "fused must be True or False, got 1"),
])
def test_inconsistent_declarations_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Decomposition(**kwargs)


def test_default_roles_name_the_axis_and_the_shared_children():
    dc = Decomposition("sequence", "replicate", units=("item",), shared_children=("len",))
    assert dc.axis is DecompAxis.SEQUENCE and dc.reduction is ReductionOp.REPLICATE
    assert dc.child_roles == ("sequence_0", "shared_0")
    assert dc.children == ("item", "len") and not dc.is_shardable
    assert not Decomposition("component", "logsumexp_responsibility", units=("a",)).is_shardable


def test_mixture_declares_its_components_and_weights():
    comps = [GaussianDistribution(i, 1) for i in range(3)]
    dc = decomposition_for(MixtureDistribution(comps, [0.2, 0.3, 0.5]))
    assert dc.axis is DecompAxis.COMPONENT
    assert dc.reduction is ReductionOp.LOGSUMEXP_RESPONSIBILITY
    assert dc.units == tuple(comps) and dc.is_shardable
    assert dc.child_roles == ("component_0", "component_1", "component_2")
    assert dc.row_work == 3.0 and dc.param_bytes == 2 * 3 * 8  # weights and their logs
    assert dc.fused  # one family: scored in one stacked call
    mixed = decomposition_for(MixtureDistribution([comps[0], PoissonDistribution(1.0)],
                                                  [0.5, 0.5]))
    assert not mixed.fused


def test_composite_and_record_declare_factors_named_by_position_and_field():
    g, c = GaussianDistribution(0, 1), CategoricalDistribution({"x": 1.0})
    comp = decomposition_for(CompositeDistribution([g, c]))
    assert (comp.axis, comp.reduction, comp.units, comp.child_roles) == (
        DecompAxis.FACTOR, ReductionOp.SUM, (g, c), ("0", "1"))
    rec = decomposition_for(RecordDistribution({"age": g, "plan": c}))
    assert rec.units == (g, c) and rec.child_roles == ("age", "plan")
    assert rec.row_work == 2.0 and rec.param_bytes == 0


def test_sequence_and_optional_recurse_into_one_unit_with_rows_per_row():
    item, length = GaussianDistribution(0, 1), CategoricalDistribution({1: 0.5, 3: 0.5})
    seq = decomposition_for(SequenceDistribution(item, length))
    assert (seq.axis, seq.reduction) == (DecompAxis.SEQUENCE, ReductionOp.REPLICATE)
    assert seq.units == (item,) and seq.shared_children == (length,)
    assert seq.child_roles == ("item", "length") and seq.unit_rows == 2.0
    bare = decomposition_for(SequenceDistribution(item))
    assert bare.child_roles == ("item",) and bare.unit_rows == 1.0
    opt = decomposition_for(OptionalDistribution(item, 0.4))
    assert opt.units == (item,) and opt.child_roles == ("inner",)
    assert opt.unit_rows == pytest.approx(0.6)


def test_hidden_markov_declares_states_with_the_chain_held_whole():
    emissions = [GaussianDistribution(-1, 1), GaussianDistribution(1, 1)]
    trans = [[0.9, 0.1], [0.2, 0.8]]
    hmm = HiddenMarkovDistribution(emissions, [0.5, 0.5], trans, [0.5, 0.5])
    dc = decomposition_for(hmm)
    assert (dc.axis, dc.reduction) == (DecompAxis.STATE, ReductionOp.LOGSUMEXP_RESPONSIBILITY)
    assert dc.units == tuple(emissions) and dc.child_roles == ("state_0", "state_1")
    # mean length under terminal probability 1/2 in every state: 2 items
    assert dc.unit_rows == pytest.approx(2.0) and dc.row_work == pytest.approx(2 * (4 + 2))
    assert dc.param_bytes == 8 * (2 + 4 + 4 + 2) and dc.fused
    mixed = HiddenMarkovDistribution([emissions[0], PoissonDistribution(1.0)], [0.5, 0.5], trans)
    assert not decomposition_for(mixed).fused


def test_undeclared_families_are_atomic_scalar_leaves_sized_by_their_parameters():
    for dist, n_params in ((PoissonDistribution(2.0), 1), (GammaDistribution(2.0, 3.0), 2)):
        dc = decomposition_for(dist)
        assert dc.axis is DecompAxis.NONE and dc.row_work == 1.0
        assert dc.param_bytes == 8 * n_params
    cat = CategoricalDistribution(np.full(10, 0.1))
    assert decomposition_for(cat).param_bytes == 2 * 10 * 8  # probabilities and their logs
