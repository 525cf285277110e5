"""The size of two combinators a newcomer reads: the functions written in ``composite.py``
(Composite and Record) and in ``lda.py`` (LDA), every ``def`` of the module counted (methods,
module functions, closures). What is not the combinator itself lives in modules of its own
(``_record_encoding``, ``_record_scoring``, ``_stacked_factors``; ``_bag_of_words``,
``_lda_fixed_point``, ``_dirichlet_fixed_point``, ``_topic_queries``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mixfold

FAMILIES = Path(mixfold.__file__).parent / "families"
#: the most functions each file may define (issue 40: combinators at about 25 methods)
LIMITS = {"composite.py": 26, "lda.py": 29}


def defs_in(path: Path) -> int:
    return sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               for node in ast.walk(ast.parse(path.read_text(), str(path))))


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_the_combinator_stays_small(name):
    assert defs_in(FAMILIES / name) <= LIMITS[name], \
        f"{name} defines {defs_in(FAMILIES / name)} functions, its limit is {LIMITS[name]}"


def test_the_count_sees_every_def(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    def g():\n        pass\n\nclass C:\n    def h(self):\n"
                    "        pass\n\n    async def i(self):\n        pass\n")
    assert defs_in(path) == 4
