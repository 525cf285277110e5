"""A combinator is a file a newcomer can read: every ``def`` in the files of the sequence
combinators counted (their classes' methods and module functions alike), at most about
:data:`MAX_DEFS`; the one past it holds its count (``CEILINGS``)."""

import ast
from pathlib import Path

import pytest

import mixfold.families

FAMILIES = Path(mixfold.families.__file__).parent
MAX_DEFS = 25

#: Past MAX_DEFS, each at most its count today, and why.
CEILINGS = {
    "sequence": MAX_DEFS,
    "markov_chain": MAX_DEFS,
    # its emissions' scores in C order for the segment recursion, and its own fixed-length draw
    "hidden_semi_markov": 26,
}


def defs(module: str) -> list[str]:
    """The names of every function defined in ``families/<module>.py``, at any depth."""
    tree = ast.parse((FAMILIES / f"{module}.py").read_text())
    return [n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))]


@pytest.mark.parametrize("module", sorted(CEILINGS))
def test_a_sequence_combinator_writes_at_most_about_25_defs(module):
    written = defs(module)
    assert len(written) <= CEILINGS[module], f"families/{module}.py: {len(written)} {written}"


def test_the_count_is_every_def_of_the_file():
    assert defs("sequence")[:2] == ["parts", "encoder"]  # the parts model and estimator share
    assert len(defs("sequence")) == sum(
        line.lstrip().startswith("def ") for line in (FAMILIES / "sequence.py").open())
