"""The ``c`` plugin: ``*.c`` files, and ``*.h`` headers parsed with the C++ dialect.

A header may belong to a C or a C++ program, and nothing in its name says
which. The C++ grammar reads C declarations too (short of C code naming a
variable ``class`` or ``new``), while the C grammar breaks on every class,
namespace and template of a C++ header; so headers are parsed as C++. This
plugin alone claims ``*.h``: ``--disable c`` leaves headers unparsed.
"""

from __future__ import annotations

from ctx04_parse_treesitter.engine import LanguageSpec, hooks
from ctx04_parse_treesitter.languages.cfamily import CPP, C

LANGUAGE = LanguageSpec("c", (("*.c", C), ("*.h", CPP)))
source_globs, parse_file = hooks(LANGUAGE)
