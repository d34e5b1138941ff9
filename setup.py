"""Build shim: the package is described in setup.cfg."""

import setuptools

setuptools.setup()
