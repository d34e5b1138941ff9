"""The library's version, in a module that imports nothing: setup.cfg reads it without
importing the package, and every layer of the package may record it (`hub.proofs`)."""

__version__ = "0.2.0"
