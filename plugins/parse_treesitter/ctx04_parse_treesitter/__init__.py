"""ctx04 parser plugins for C, C++, Go, Java, JavaScript, TypeScript, PHP, Ruby and Rust.

Each language is its own entry point (``languages/<name>.py``: its dialects
as data) over one engine (``engine.py``: the conventions), so ``--disable
go`` disables exactly Go parsing. Python stays with ctx04's own ``ast`` parser.
"""
