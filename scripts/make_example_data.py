"""Regenerate src/mixfold/data/customers.csv, the bundled example data (fixed seed).

Three customer segments with a mixed-type record per customer: age (Gaussian), plan (categorical),
monthly visits (Poisson), monthly spend (log-normal, missing for some customers).
"""

import csv
from pathlib import Path

import numpy as np

# weight, age mean/sd, plan probs (free, basic, pro), visits rate, log-spend mean/sd, p missing
SEGMENTS = [
    (0.5, 27.0, 5.0, (0.70, 0.25, 0.05), 3.0, 2.0, 0.5, 0.30),
    (0.3, 41.0, 8.0, (0.20, 0.60, 0.20), 9.0, 3.5, 0.4, 0.10),
    (0.2, 58.0, 6.0, (0.05, 0.25, 0.70), 16.0, 4.6, 0.3, 0.05),
]


def main(n: int = 3000, seed: int = 2026) -> None:
    rng = np.random.default_rng(seed)
    out = Path(__file__).resolve().parents[1] / "src" / "mixfold" / "data" / "customers.csv"
    z = rng.choice(len(SEGMENTS), size=n, p=[s[0] for s in SEGMENTS])
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["age", "plan", "visits", "spend"])
        for k in z:
            _, am, asd, plan_p, rate, lm, lsd, pmiss = SEGMENTS[k]
            spend = "" if rng.uniform() < pmiss else f"{np.exp(rng.normal(lm, lsd)):.2f}"
            plan = rng.choice(["free", "basic", "pro"], p=plan_p)
            w.writerow([f"{rng.normal(am, asd):.1f}", plan, int(rng.poisson(rate)), spend])
    print(f"wrote {n} rows to {out}")


if __name__ == "__main__":
    main()
