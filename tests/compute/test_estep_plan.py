"""compute/estep_plan.py: which path and chunk each (declared fusion, precision) gets, against
the rules written out here, and how the declared capabilities map to a fusion."""

import pytest

from mixfold.capabilities import FusedFold, LinearInFeatures, LinearInFeaturesInBands
from mixfold.compute.band_engines import fused_linear_mixture
from mixfold.compute.estep_plan import (FUSED_CHUNK_ROWS, EStep, Fusion, fused_pass_of,
                                        fusion_of, plan_estep)
from mixfold.compute.linear_torch import GPU_CHUNK_ROWS
from mixfold.precision import FLOAT64, resolve_precision

NONE, IN_BANDS, EVERYWHERE = Fusion.NONE, Fusion.IN_BANDS, Fusion.EVERYWHERE


@pytest.mark.parametrize("fusion, precision, path, chunk, three_step_rows, scores_in", [
    # native: fused where the family fuses natively; the three steps take the asked rows
    (EVERYWHERE, "float64", EStep.FUSED, FUSED_CHUNK_ROWS, 1000, "float64"),
    (EVERYWHERE, "float32", EStep.FUSED, FUSED_CHUNK_ROWS, 1000, "float32"),
    (IN_BANDS, "float64", EStep.THREE_STEPS, FUSED_CHUNK_ROWS, 1000, "float64"),
    (NONE, "float64", EStep.THREE_STEPS, 1000, 1000, "float64"),
    # torch: fused whenever the family fuses at all; a GPU takes its own chunk
    (IN_BANDS, "bfloat16", EStep.FUSED, FUSED_CHUNK_ROWS, None, "float64"),
    (EVERYWHERE, "float64@cpu", EStep.FUSED, FUSED_CHUNK_ROWS, None, "float64"),
    (EVERYWHERE, "float16@cuda", EStep.FUSED, GPU_CHUNK_ROWS, None, "float64"),
    (NONE, "bfloat16", EStep.THREE_STEPS, 1000, None, "float64"),  # no screen: float64
    # the element-by-element bands and double-double are never fused
    (EVERYWHERE, "bfloat16@emulated", EStep.IN_BAND, 1000, None, "float64"),
    (EVERYWHERE, "dd", EStep.DOUBLE_DOUBLE, 1000, None, "float64"),
    (NONE, "dd", EStep.DOUBLE_DOUBLE, 1000, None, "float64"),
])
def test_the_plan_of_each_fusion_and_precision(fusion, precision, path, chunk, three_step_rows,
                                               scores_in):
    plan = plan_estep(fusion, resolve_precision(precision), 1000)
    assert (plan.path, plan.chunk_rows, plan.three_step_rows, plan.scores_in) == \
        (path, chunk, three_step_rows, scores_in)
    assert plan.made_for(fusion, precision)
    assert not plan.made_for(NONE if fusion is not NONE else EVERYWHERE, precision)
    assert not plan.made_for(fusion, "float32" if precision != "float32" else "float64")


def test_a_chunk_larger_than_the_fused_one_is_kept_and_a_nested_node_takes_its_rows():
    assert plan_estep(EVERYWHERE, FLOAT64, 1 << 22).chunk_rows == 1 << 22
    nested = plan_estep(EVERYWHERE, FLOAT64)
    assert (nested.path, nested.chunk_rows, nested.three_step_rows) == (EStep.FUSED, None, None)


class _Plain:
    pass


class _Linear(LinearInFeatures):
    @staticmethod
    def linear_terms(accs, components, enc):
        return None


class _LinearInBands(LinearInFeaturesInBands):
    @staticmethod
    def linear_terms(accs, components, enc):
        return None


class _OwnPass(FusedFold):
    @staticmethod
    def stack_fold(accs, components, log_weights, enc, weights, precision="float64"):
        return None


class _OwnPassInBands(_OwnPass, _LinearInBands):
    pass


def test_the_declared_capabilities_give_the_fusion_and_the_pass():
    assert (fusion_of(_Plain), fused_pass_of(_Plain)) == (NONE, None)
    assert (fusion_of(_Linear), fused_pass_of(_Linear)) == (EVERYWHERE, fused_linear_mixture)
    assert (fusion_of(_LinearInBands), fused_pass_of(_LinearInBands)) == \
        (IN_BANDS, fused_linear_mixture)
    assert (fusion_of(_OwnPass), fused_pass_of(_OwnPass)) == (EVERYWHERE, _OwnPass.stack_fold)
    # a family's own pass says itself where it runs (it declines elsewhere)
    assert fusion_of(_OwnPassInBands) is EVERYWHERE
