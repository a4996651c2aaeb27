"""Small RAG apps decorated with ragmon, for the ``ragmon eval --app`` runner tests."""
