"""The package version, importable without loading the numerical core."""

__version__ = "0.1.0"
