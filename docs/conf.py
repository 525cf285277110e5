"""Sphinx configuration of mixfold's documentation site.

Build (offline; warnings are errors, every internal reference is checked)::

    python -m sphinx -W -n -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the gallery draws without a display

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent / "src"))  # the worktree's mixfold, not an installed copy

import mixfold  # noqa: E402

project = "mixfold"
author = "the mixfold authors"
copyright = "the mixfold authors"  # noqa: A001 - Sphinx's name
release = version = mixfold.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.doctest",
    "sphinx_click",
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "gallery/README.rst"]
templates_path: list[str] = []
html_static_path: list[str] = []
html_theme = "furo"
html_title = f"mixfold {release}"

# --- API reference: the docstrings, in numpy style (napoleon), types as plain text ---
autodoc_typehints = "none"  # the docstrings say the types; hints in signatures would be noise
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
autosummary_generate = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_param = False  # "array of shape (n_rows, n_features)" stays text, not a reference
napoleon_use_rtype = False
napoleon_use_ivar = True

# --- references: nitpicky (set by -n) checks every internal one ---
nitpicky = True
nitpick_ignore_regex = [
    # external types named in docstrings whose inventories are not on this machine
    (r"py:.*", r"(numpy|np|pandas|pd|pyspark|dask|ray|mpi4py|torch|scipy|sklearn|matplotlib)"
               r"(\..*)?"),
    # internals the docstrings name for readers of the source; the reference covers the public
    # API, so these stay code text (every :doc:, :ref: and public name is still checked)
    (r"py:.*", r"mixfold\.(compute|dispatch|precision\.(gpu|emulation|compensated)"
               r"|parallel\.executor|families\.(_\w+|gamma|dirichlet))(\..*)?"),
    (r"py:.*", r"mixfold\.families\.(Encoded|InitRandom)"),
    (r"py:(func|meth|class|data|attr)",
     r"(tree_axes|best_parallel_axis|size_model_tree|subtree_work|AxisCandidate\.benefit"
     r"|check_plan|plan_for|model_parallel_fold|ModelParallelEncodedData|close"
     r"|init_sample_mask|gamma_shape_mle|dirichlet_mle|von_mises_kappa_mle|MAX_SHAPE_STEP"
     r"|empty_mass|CentredStatistics|from_dict"
     r"|from_json|default_spec|TEXT_SAMPLE|LONG_TEXT_WORDS|FAR_OVERDISPERSION|PlanRequest"
     r"|PlannedLocalEncodedData|ENGINES|Engine|RowPlan|measure_rows_per_second|Encoded"
     r"|Accumulator\.(combine|to_array)"
     r"|mixfold\.parallel\.model_decomposition\.subtree_work)"),
]

# --- intersphinx: local inventories only, so the build works offline ---
# Debian's python3-doc ships the standard library's inventory; the doc packages of NumPy, SciPy,
# pandas and scikit-learn are used when installed. MIXFOLD_DOCS_ONLINE=1 fetches them instead.
_ONLINE = os.environ.get("MIXFOLD_DOCS_ONLINE") == "1"
_DEBIAN = "/usr/share/doc"
_INVENTORIES = {
    "python": ("https://docs.python.org/3",
               f"{_DEBIAN}/python3.{sys.version_info.minor}/html/objects.inv"),
    "numpy": ("https://numpy.org/doc/stable", f"{_DEBIAN}/python-numpy/html/objects.inv"),
    "scipy": ("https://docs.scipy.org/doc/scipy", f"{_DEBIAN}/python-scipy-doc/html/objects.inv"),
    "pandas": ("https://pandas.pydata.org/docs", f"{_DEBIAN}/python-pandas-doc/html/objects.inv"),
    "sklearn": ("https://scikit-learn.org/stable",
                f"{_DEBIAN}/python-sklearn-doc/html/objects.inv"),
    "pyspark": ("https://spark.apache.org/docs/latest/api/python", ""),
    "dask": ("https://docs.dask.org/en/stable", ""),
}
intersphinx_mapping = {
    name: (url, None if _ONLINE else local)
    for name, (url, local) in _INVENTORIES.items()
    if _ONLINE or (local and Path(local).is_file())
}
intersphinx_timeout = 5

# --- doctest builder: the user guide's examples run (docstrings run under pytest) ---
doctest_test_doctest_blocks = ""
doctest_global_setup = "import numpy as np\nimport mixfold"

# --- the gallery: src/mixfold/examples driven by short scripts, executed at build time ---
sphinx_gallery_conf = {
    "examples_dirs": "gallery",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib",),
    "show_memory": False,
    "plot_gallery": "True",
}


# --- figures on the site come from benchmarks/README.md, as its scripts last wrote them ---
BENCHMARK_TABLES = {
    # generated page -> the start of the heading whose first table it quotes
    "p10": "## P10",
    "peers": "## Peers",
}


def _rst_inline(markdown: str) -> str:
    """A Markdown cell in rst: `code` as a literal, and no "band@device" read as an e-mail."""
    parts = re.split(r"(`[^`]+`)", markdown)
    # a cell's text: no "band@device" read as an e-mail, no "name_" as a reference
    return "".join(f"`{p}`" if p.startswith("`") else
                   re.sub(r"(\w)_(?!\w)", r"\1\\_", p.replace("@", "\\@")) for p in parts)


def benchmark_table(readme: str, heading: str) -> str:
    """The first Markdown table under the first heading starting with ``heading``, as an rst
    list-table whose title is that heading; fails the build when the README has no such table."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise ValueError(f"benchmarks/README.md has no heading starting {heading!r}")
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            cells = [_rst_inline(c.strip()) for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif rows:
            break
    if not rows:
        raise ValueError(f"benchmarks/README.md: no table under {lines[start]!r}")
    title = _rst_inline(lines[start].lstrip("#").strip())
    out = [f".. list-table:: {title}", "   :header-rows: 1", ""]
    for row in rows:
        out.append("   * - " + (row[0] or " "))
        out.extend(f"     - {c or ' '}" for c in row[1:])
    return "\n".join(out) + "\n"


def _write_benchmark_tables() -> None:
    readme = (DOCS.parent / "benchmarks" / "README.md").read_text(encoding="utf-8")
    generated = DOCS / "_generated"
    generated.mkdir(exist_ok=True)
    for name, heading in BENCHMARK_TABLES.items():
        (generated / f"{name}.rst").write_text(benchmark_table(readme, heading), encoding="utf-8")


_write_benchmark_tables()
exclude_patterns.append("_generated")


_ATTRIBUTE_DOCS: dict[str, list[str]] = {}


def _keep_attribute_doc(app, what, name, obj, options, lines):
    """Napoleon reads "words: text" on the first line of an attribute's docstring as
    "type: text"; these docstrings are sentences, so theirs is kept as written (restored below)."""
    if what in ("attribute", "property", "data"):
        _ATTRIBUTE_DOCS[name] = list(lines)


def _restore_attribute_doc(app, what, name, obj, options, lines):
    if what in ("attribute", "property", "data") and name in _ATTRIBUTE_DOCS:
        lines[:] = _ATTRIBUTE_DOCS.pop(name)


def setup(app):
    app.connect("autodoc-process-docstring", _keep_attribute_doc, priority=400)
    app.connect("autodoc-process-docstring", _restore_attribute_doc, priority=600)
