"""Placeholder: the SDK helper replaces this module."""
def init(*a, **kw):  # type: ignore[no-untyped-def]
    raise NotImplementedError
shutdown = init
