"""Every number the pipeline uses, named once, with the spec's defaults.

A default changes only when the retrieval benchmark shows the change wins
(spec §7.4); the JSON output echoes the settings that produced it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class Settings:
    # §3.1 query construction
    max_identifiers: int = 32
    max_error_strings: int = 8
    max_test_names: int = 8
    max_file_paths: int = 8
    max_term_chars: int = 120
    max_goal_hint_chars: int = 200
    # §3.2 recall; folders never searched or indexed
    exclude_globs: tuple[str, ...] = (
        "vendor/**", "node_modules/**", "site-packages/**", "third_party/**",
        "external/**", "build/**", ".git/**",
    )
    hits_per_term: int = 40
    apidesc_limit: int = 20
    callgraph_limit: int = 20
    search_timeout_s: float = 10.0
    # §3.4 re-rank
    top_k: int = 20
    identifier_weight: float = 3.0
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # §3.5 line prune
    prune_ratio: float = 0.6
    prune_floor: float = 1e-3
    # §3.6 token cap
    budget_tokens: int = 4000
    # §3.7 vetting: an artifact sharing more than this share of its tokens
    # with one retrieved block is a verbatim reproduction
    vet_overlap_threshold: float = 0.9
    # Evidence budgets (repository-source-references). A file over
    # max_file_bytes is excluded whole, never read as a prefix; a shown line is
    # cut to max_line_bytes at a UTF-8 boundary. The block cap lets the token
    # cap bind on ordinary code (about 4 bytes a token) and stops text that
    # tokenizes densely; headings (references) have their own budget.
    max_file_bytes: int = 1024 * 1024
    max_line_bytes: int = 160
    max_block_bytes: int = 16 * 1024
    max_reference_bytes: int = 4 * 1024
    # Limits the compact profile sets; None means only the budgets above apply.
    max_search_terms: int | None = None
    max_paths: int | None = None
    max_quoted_lines: int | None = None
    max_quoted_bytes: int | None = None

    @classmethod
    def compact(cls, **overrides: Any) -> Settings:
        """The source-references document's budgets exactly: 4 search terms,
        8 paths, 10 lines, 2 KiB of quoted text, an 8 KiB block."""
        profile = cls(
            max_search_terms=4, max_paths=8, max_quoted_lines=10, max_quoted_bytes=2 * 1024,
            max_block_bytes=8 * 1024, max_reference_bytes=2 * 1024,
        )
        return profile.with_overrides(**overrides)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def with_overrides(self, **overrides: Any) -> Settings:
        known = {f.name for f in fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(f"unknown setting(s): {', '.join(unknown)}")
        return replace(self, **overrides)
