"""trimgate: keep agent conversations inside the context window, visibly."""

__version__ = "0.1.0"


def compiled() -> bool:
    """Whether the core and codecs run as mypyc-compiled extensions (see setup.py)."""
    from trimgate import history

    return not (history.__file__ or "").endswith(".py")
