"""Chapter figures, one module per chapter: each function draws from a table and returns its Figure.

The tables come from :mod:`labhelpers.experiments` (measured here) or from reference data
(:func:`labhelpers.load_reference`); every function is tested on the shipped reference data.
"""
