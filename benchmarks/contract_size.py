"""How much a leaf family writes: the functions defined inside its module's classes (methods and
the closures inside them, what a newcomer reads), and the places outside its own file that name
it for registration, beside a baseline tree (main's ``src``).

    python benchmarks/contract_size.py --baseline /work/wt/base/src

Read from the source with ``ast`` (nothing is imported, so the two trees can differ freely).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAMILIES = {"poisson": "families/poisson.py", "bernoulli": "families/bernoulli.py",
            "geometric": "families/geometric.py", "binomial": "families/binomial.py",
            "exponential": "families/exponential.py", "rayleigh": "examples/custom_family.py"}
#: Files outside a family's own that listed the built-in leaves by kind (``"kind": Estimator``).
REGISTRIES = ("mixfold/spec.py",)


def functions_in_classes(path: Path) -> int:
    """Functions defined anywhere inside the module's class bodies."""
    tree = ast.parse(path.read_text())
    return sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
               for node in ast.walk(cls))


def registrations(src: Path, family: str, path: str) -> int:
    """Where the family is registered: its ``@family`` decorator, and each registry file that
    names its estimator."""
    estimator = family.capitalize() + "Estimator"
    own = (src / "mixfold" / path).read_text().count("@family(")
    entry = re.compile(rf'"{family}":\s*{estimator}\b')
    return own + sum(bool(entry.search((src / r).read_text())) for r in REGISTRIES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the baseline's src folder")
    args = parser.parse_args()
    mine = HERE.parent / "src"
    print("| family | functions in classes: baseline | this tree | registered in: baseline "
          "| this tree |")
    print("| --- | --- | --- | --- | --- |")
    for name, path in FAMILIES.items():
        before = functions_in_classes(args.baseline / "mixfold" / path)
        after = functions_in_classes(mine / "mixfold" / path)
        print(f"| {name} (`{path}`) | {before} | {after} | "
              f"{registrations(args.baseline, name, path)} | {registrations(mine, name, path)} |")


if __name__ == "__main__":
    main()
