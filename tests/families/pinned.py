"""Digests that pin a fit's bits across a restructuring: every fitted parameter as ``float.hex``
and every score array's bytes, hashed (the pinned-fit tests of the leaves and vector leaves)."""

import hashlib
import json

import numpy as np


def hexes(v):
    """``v`` with every float written as ``float.hex`` (nested dicts and lists)."""
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, dict):
        return {k: hexes(x) for k, x in v.items()}
    if isinstance(v, list):
        return [hexes(x) for x in v]
    return v


def digest_model(model) -> str:
    text = json.dumps(hexes(model.to_dict()), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def digest_scores(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(a.tobytes() + f"{a.dtype}{a.shape}".encode()).hexdigest()[:16]


def all_digests(fits: dict, scored: dict, score_digests) -> dict[str, str]:
    """Every case's digest, keyed as the tests' ``PINNED`` is: ``"<family>: <case>"`` for a fit,
    ``"<family> scores: <key>"`` for a score array."""
    out = {f"{fam}: {case}": digest_model(make()) for (fam, case), make in fits.items()}
    for fam, (comps, rows) in scored.items():
        out.update({f"{fam} scores: {k}": v for k, v in score_digests(comps, rows).items()})
    return out
