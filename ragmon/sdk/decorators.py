"""Placeholder: the SDK helper replaces this module."""
def pipeline(fn=None, **kw):  # type: ignore[no-untyped-def]
    raise NotImplementedError
retriever = generator = pipeline
