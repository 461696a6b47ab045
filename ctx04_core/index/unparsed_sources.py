"""Source files of languages no bundled plugin parses: searched, never parsed.

A Kotlin file in a Java repository, a shell script or a Vue component can
hold the line a task is about. Their globs make the index list them (with
status ``no_parser``, reported by ``ctx04 index`` and in every retrieval's
index failures) and lexical recall search them; a hit is shown as a run of
lines around it. A parser plugin for one of these languages simply parses
them: the index asks every parser before it records ``no_parser``.
"""

from __future__ import annotations

from ctx04_core.hookspecs import hookimpl

GLOBS = (
    "*.kt", "*.kts", "*.scala", "*.groovy", "*.swift", "*.cs", "*.fs", "*.m", "*.mm",
    "*.dart", "*.lua", "*.pl", "*.pm", "*.r", "*.R", "*.jl", "*.ex", "*.exs", "*.erl",
    "*.hs", "*.ml", "*.clj", "*.zig", "*.nim", "*.vue", "*.svelte", "*.sh", "*.bash",
)


@hookimpl
def source_globs() -> list[str]:
    return list(GLOBS)
