"""One module per language plugin: its globs and dialects, and the hookimpls made from them."""
