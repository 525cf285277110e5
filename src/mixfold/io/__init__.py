"""Reading and writing: JSON model files."""

from mixfold.io.model_files import load, save

__all__ = ["save", "load"]
