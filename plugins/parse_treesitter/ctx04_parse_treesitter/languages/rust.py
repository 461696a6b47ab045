"""The ``rust`` plugin.

An ``impl`` block is a node named after the type it implements (``impl
Display for Counter`` is ``Counter``), so its methods are
``<module>.Counter.fmt`` like the struct's; an ``impl`` of a type written
some other way (``impl Trait for &T``) is not a node. ``mod m { ... }`` is a
``namespace``; ``mod m;`` imports ``m``. ``#[...]`` attributes are part of
the item's span, and ``//!`` inner doc comments document no item.
"""

from __future__ import annotations

from ctx04_parse_treesitter.engine import SLASH_DOCS, Dialect, LanguageSpec, hooks, kinds

RUST = Dialect(
    grammar="tree_sitter_rust",
    kinds=kinds({
        "function": "function_item function_signature_item",
        "struct": "struct_item union_item",
        "enum": "enum_item",
        "trait": "trait_item",
        "impl": "impl_item",
        "namespace": "mod_item",
    }),
    blocks=frozenset({"block", "declaration_list", "field_declaration_list", "enum_variant_list",
                      "match_block"}),
    comments=frozenset({"line_comment", "block_comment"}),
    doc_comment=SLASH_DOCS,
    needs_body=frozenset({"mod_item"}),
    attributes=frozenset({"attribute_item"}),
)

LANGUAGE = LanguageSpec("rust", (("*.rs", RUST),))
source_globs, parse_file = hooks(LANGUAGE)
