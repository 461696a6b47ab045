"""The ``cpp`` plugin: C++ sources and C++-only header names (``*.h`` is the ``c`` plugin's)."""

from __future__ import annotations

from ctx04_parse_treesitter.engine import LanguageSpec, hooks
from ctx04_parse_treesitter.languages.cfamily import CPP

LANGUAGE = LanguageSpec(
    "cpp", tuple((glob, CPP) for glob in ("*.cc", "*.cpp", "*.cxx", "*.hpp", "*.hh", "*.hxx"))
)
source_globs, parse_file = hooks(LANGUAGE)
