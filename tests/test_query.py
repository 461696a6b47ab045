"""Query construction (spec §3.1) on scripted task texts."""

from __future__ import annotations

from ctx04_core.settings import Settings
from ctx04_core.stages.query import build_query, extensions_of, goal_hint

SETTINGS = Settings()
NAMES = frozenset({"MemStore", "remember", "recall", "parse_args", "only", "QuerySet", "models"})


def test_dotted_name_is_extracted_first() -> None:
    query = build_query(
        "Fix memstore.MemStore.remember: it drops the kind when recall runs.",
        names=NAMES,
        settings=SETTINGS,
    )
    assert query.identifiers == ("memstore.MemStore.remember", "MemStore", "remember", "recall")
    assert query.unresolved == ()


def test_goal_hint_is_first_sentence_with_verbs_stripped() -> None:
    query = build_query(
        "Please fix: QuerySet.only() ignores deferred fields. It should not.",
        names=NAMES,
        settings=SETTINGS,
    )
    assert query.goal_hint == "QuerySet.only() ignores deferred fields"


def test_goal_hint_edges() -> None:
    assert goal_hint("\n  We need to add   caching\nsecond line", 200) == "caching"
    assert (
        goal_hint("When given bad input, parse_args crashes", 200)
        == "bad input, parse_args crashes"
    )
    # Verbs only strip as whole words.
    assert goal_hint("Fixture loading is slow. More text.", 200) == "Fixture loading is slow"
    assert goal_hint("Add-on registry is empty", 200) == "Add-on registry is empty"
    assert goal_hint("x" * 300, 200) == "x" * 200
    assert goal_hint("fix.", 200) == ""


def test_unresolved_terms_only_when_code_shaped() -> None:
    query = build_query(
        "The HTTPServer and the SQL layer call load_config via conf.Loader, e.g. at startup.",
        names=NAMES,
        settings=SETTINGS,
    )
    assert query.identifiers == ()
    assert query.unresolved == ("conf.Loader", "HTTPServer", "load_config")


def test_a_checker_s_message_or_rule_code_is_a_search_term() -> None:
    query = build_query(
        "Error E108 misses a case; W0611 and PIE800 too, in SQL with MD5 and E1234567.",
        names=NAMES,
        settings=SETTINGS,
    )
    # A code is capitals then two to five digits: MD5 (one digit), SQL (none)
    # and E1234567 (a number) are not.
    assert query.unresolved == ("E108", "W0611", "PIE800")


def test_command_line_options_are_search_terms() -> None:
    query = build_query(
        "`pytest --collect-only` and --dry-run--please; --To be clear, a--b and ---x are not.",
        names=NAMES,
        settings=SETTINGS,
    )
    # Code reads an option of several words by its name spelled as code.
    assert query.unresolved == (
        "--collect-only", "--dry-run", "collectOnly", "dryRun", "collect_only", "dry_run"
    )
    resolving = build_query(
        "Exit status is wrong with --display-only-correctable and --seq.",
        names=NAMES | {"display_only_correctable"},
        settings=SETTINGS,
    )
    assert resolving.identifiers == ("display_only_correctable",)
    assert resolving.unresolved == ("--display-only-correctable", "--seq", "displayOnlyCorrectable")
    # A pasted command line names every option it ran with: searched as
    # written, not spelled as code.
    pasted = build_query(
        "Formats are missing.\n```\n$ yt-dlp --list-formats --no-config URL\n```\n",
        names=NAMES,
        settings=SETTINGS,
    )
    assert pasted.unresolved == ("--list-formats", "--no-config")


def test_a_kebab_case_name_resolves_to_its_pascal_case_definition() -> None:
    # A linter's rule by its name, the way its users write it; the rule is
    # the definition of exactly that name spelled as code. A spelling with
    # no such definition and a path's part are left as they were; an option
    # is searched as written and as code spells it, never as a PascalCase name.
    query = build_query(
        "Rule yield-in-for-loop (UP028) flags src/mem-store/x.rs; also "
        "unused-import-alias and --mem-store.",
        names=NAMES | {"YieldInForLoop", "MemStore"},
        settings=SETTINGS,
    )
    assert query.identifiers == ("YieldInForLoop",)
    assert query.unresolved == ("--mem-store", "memStore", "UP028", "mem_store")


def test_resolution_order_and_latest_error() -> None:
    task, error = "only recall parse_args and QuerySet", "MemStore failed in models.QuerySet"
    spec = SETTINGS.with_overrides(drop_stopword_identifiers=False)
    query = build_query(task, latest_error=error, names=NAMES, settings=spec)
    assert query.identifiers == (
        "models.QuerySet",
        "QuerySet",
        "MemStore",
        "parse_args",
        "only",
        "recall",
        "models",
    )
    assert query.latest_error == error
    # By default a stopword ("only") is no identifier on its own; inside a
    # dotted name it still is.
    default = build_query(task, latest_error=error, names=NAMES, settings=SETTINGS)
    assert default.identifiers == (
        "models.QuerySet", "QuerySet", "MemStore", "parse_args", "recall", "models",
    )


def test_file_names_are_not_dotted_identifiers() -> None:
    query = build_query(
        "See src/models.py and build/out.pyc and pkg/setup.toml.", names=NAMES, settings=SETTINGS
    )
    assert query.file_paths == ("src/models.py", "pkg/setup.toml")
    assert "models.py" not in query.identifiers + query.unresolved
    assert query.identifiers == ("models",)
    assert query.unresolved == ("out.pyc",)


def test_error_strings_test_names_and_caps() -> None:
    task = (
        "Running `tests/test_mem.py::TestStore::test_kind` fails, don't know why.\n"
        "    assert store.kind == 'note'\n"
        "Also a::b::c here."
    )
    error = "Traceback (most recent call last):\n  File \"mem.py\", line 3\nKeyError: 'kind'\n"
    query = build_query(
        task,
        latest_error=error,
        repro_target="tests/test_mem.py::test_other",
        names=NAMES,
        settings=SETTINGS.with_overrides(max_error_strings=5, max_term_chars=12),
    )
    assert query.error_strings == (
        "mem.py",
        "kind",
        "Traceback (m",
        "KeyError: 'k",
        "note",
    )
    # Truncated to 12 characters, the two test ids become one.
    assert query.test_names == ("tests/test_m", "a::b::c")


def test_test_names_strip_surrounding_punctuation() -> None:
    query = build_query(
        "Running `tests/test_mem.py::TestStore::test_kind[a-1]` fails (see a::b::c).",
        repro_target="tests/test_mem.py::test_other",
        names=NAMES,
        settings=SETTINGS,
    )
    assert query.test_names == (
        "tests/test_mem.py::test_other",
        "tests/test_mem.py::TestStore::test_kind[a-1]",
        "a::b::c",
    )


def test_identifier_cap_keeps_the_most_specific() -> None:
    names = frozenset(f"name_{i}" for i in range(40)) | {"Big", "word"}
    task = "word " + " ".join(f"name_{i}" for i in range(40)) + " Big"
    query = build_query(task, names=names, settings=SETTINGS)
    assert len(query.identifiers) == 32
    assert query.identifiers[:2] == ("Big", "name_0")
    assert "word" not in query.identifiers


def test_deterministic() -> None:
    task = "Fix a.b and C.d when e_f fails: 'x' Error: y"
    assert build_query(task, names=NAMES, settings=SETTINGS) == build_query(
        task, names=NAMES, settings=SETTINGS
    )


def test_other_languages_qualified_names_resolve_by_their_last_name() -> None:
    query = build_query(
        "tokio::runtime::Builder::enable_all panics; $request->input('x') is empty; "
        "App\\Http\\Kernel boots twice; Parser#parse loops; see docs.html#part; "
        "com.google.gson.Gson.toJson drops nulls",
        names=frozenset({"enable_all", "input", "Kernel", "parse", "toJson"}),
        settings=SETTINGS,
    )
    assert query.identifiers == (
        "com.google.gson.Gson.toJson", "tokio::runtime::Builder::enable_all",
        "$request->input", "App\\Http\\Kernel", "Parser#parse", "Kernel", "toJson",
        "enable_all", "input", "parse",
    )
    assert query.unresolved == ("docs.html",)


def test_file_paths_take_every_known_and_repository_extension() -> None:
    text = "Broken in src/App.tsx, lib/parser.rb, ext/fast.cc and conf/app.properties."
    plain = build_query(text, names=NAMES, settings=SETTINGS)
    assert plain.file_paths == ("src/App.tsx", "lib/parser.rb", "ext/fast.cc")
    assert plain.unresolved == ("app.properties",)
    with_repo = build_query(
        text, names=NAMES, settings=SETTINGS,
        extensions=extensions_of(["conf/app.properties", ".github/x", "Makefile", ".env"]),
    )
    assert with_repo.file_paths == (
        "src/App.tsx", "lib/parser.rb", "ext/fast.cc", "conf/app.properties",
    )
    assert with_repo.unresolved == ()
    assert extensions_of(["a/b.tar.gz", ".bashrc", "x/.eslintrc.json"]) == {"gz", "json"}


def test_a_link_to_a_code_forge_is_no_dotted_name_a_site_s_link_is() -> None:
    query = build_query(
        "QuerySet.only() fails, see https://github.com/org/app/issues/3, "
        "https://user-images.githubusercontent.com/1/shot.png and "
        "https://www.example.org/models.html#QuerySet.only",
        names=NAMES,
        settings=SETTINGS,
    )
    assert query.identifiers == ("QuerySet.only", "QuerySet", "models")
    assert query.unresolved == ("shot.png", "www.example.org", "models.html")
