"""The main example: segment customers from a mixed-type table with a mixture of records.

Each customer is a record — age (Gaussian), plan (categorical), monthly visits (Poisson), monthly
spend (log-normal, sometimes missing) — and the segments are the components of a mixture. The data
ships with mixfold (``mixfold/data/customers.csv``, 3,000 rows).

    python -m mixfold.examples.customers --out model.json
"""

from __future__ import annotations

import argparse
import csv
import sys
from importlib import resources
from pathlib import Path

import mixfold
from mixfold import (CategoricalEstimator, GaussianEstimator, LogGaussianEstimator,
                     MixtureEstimator, OptionalEstimator, PoissonEstimator, RecordEstimator)

__all__ = ["load_customers", "customer_estimator", "main"]


def load_customers() -> list[dict]:
    """The bundled customer rows as dicts (a missing spend is None)."""
    text = resources.files("mixfold").joinpath("data/customers.csv").read_text()
    rows = []
    for r in csv.DictReader(text.splitlines()):
        rows.append({"age": float(r["age"]), "plan": r["plan"], "visits": int(r["visits"]),
                     "spend": float(r["spend"]) if r["spend"] else None})
    return rows


def customer_estimator(segments: int = 3) -> MixtureEstimator:
    """A mixture of ``segments`` customer records."""
    record = RecordEstimator({
        "age": GaussianEstimator(),
        "plan": CategoricalEstimator(pseudo_count=0.5),
        "visits": PoissonEstimator(),
        "spend": OptionalEstimator(LogGaussianEstimator()),
    })
    return MixtureEstimator([record] * segments, pseudo_count=1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("model.json"))
    args = parser.parse_args(argv)

    rows = load_customers()
    print(f"fitting a {args.segments}-segment mixture of records to {len(rows)} customers "
          f"(backend: local)")
    result = mixfold.fit(rows, customer_estimator(args.segments), seed=args.seed, tol=1e-8,
                         max_iter=200)
    for i, (ll, s) in enumerate(zip(result.log_likelihood, result.seconds)):
        print(f"  iteration {i:3d}  mean log-likelihood {ll:.8f}  ({s * 1e3:.1f} ms)")
    print(f"stopped: {result.stop_reason} after {result.iterations} iterations")
    model = result.model
    for k in sorted(range(args.segments), key=lambda j: model.components[j].fields["age"].mu):
        f = model.components[k].fields
        spend = f["spend"]
        print(f"  segment weight {model.weights[k]:.3f}: age {f['age'].mu:.1f} "
              f"(sd {f['age'].sigma2 ** 0.5:.1f}), plan "
              + ", ".join(f"{lv} {p:.2f}" for lv, p in zip(f["plan"].levels, f["plan"].probs))
              + f", visits {f['visits'].lam:.1f}/month, spend missing {spend.p_missing:.2f}")
    mixfold.save(model, args.out)
    print(f"model written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
