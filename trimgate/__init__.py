"""trimgate: keep agent conversations inside the context window, visibly."""

__version__ = "0.1.0"
