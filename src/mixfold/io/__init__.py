"""Reading and writing: JSON model files, and row blocks read one at a time (out of core)."""

from mixfold.io.model_files import load, save
from mixfold.io.readers import RowBlocks

__all__ = ["save", "load", "RowBlocks"]
