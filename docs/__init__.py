"""rbscope's documentation, installed with the package as ``rbscope.docs`` (package data).

The help texts name documents as ``docs/NAME.md``; ``rbscope docs NAME`` prints one from the
installed package (``importlib.resources``), so they are there without a checkout.
"""
