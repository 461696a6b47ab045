"""Query construction (spec §3.1): regex and name-index extraction, no model.

Choices the spec leaves open, fixed here so the same task always gives the
same query:

* Qualified names count in every language's notation: ``a.b`` (Python, Go,
  Java, JavaScript), ``a::b::C`` (Rust, C++, PHP), ``$obj->m`` (PHP), ``A\\B``
  (PHP namespaces), ``A#m`` (Ruby). A name resolves by its last component;
  it is searched as written.
* A dotted match whose last component is a file extension (``models.py``)
  names a file, not an attribute, and is not an identifier. The extensions
  are those of the languages ctx04 knows and of the repository's files.
* A link to a code forge (``https://github.com/org/app/issues/3``) makes no
  dotted name of its host (``github.com``: where code is kept, matched by
  every file that links there); another site's host stays a term
  (``facebook.com`` names the code that reads that site).
* An unresolved term becomes a search term only when it is shaped like code:
  dotted (but not ``e.g``), containing ``_``, or CamelCase with an inner capital
  and a lowercase letter (``QuerySet``, ``HTTPServer``; not ``The`` or ``SQL``).
  Otherwise every capitalised or plain English word would be searched for.
* A command-line option (``--collect-only``) is a code-shaped term: the
  string a program's argument parser holds. Only lowercase ones: prose
  writes ``--To`` and ``--Note``. An option of several words is also the
  names code reads it by, ``collect_only`` (an argparse dest, a Ruby
  symbol, a Rust field) and ``collectOnly`` (Java, JavaScript, Go): the
  parser's file is rarely the one to change. Only where the prose names it:
  inside a fenced code block it is the pasted command line's or log's, which
  names every option the reporter ran with.
* A kebab-case name in prose (``yield-in-for-loop``, a linter's rule as its
  users write it) resolves when a definition has exactly its PascalCase
  spelling (``YieldInForLoop``), and is then searched as that name. Not by
  prefix: ``constant_case`` as ``ConstantCaseFixer`` brought other code in
  (docs/benchmarks.md, "names spelled as code").
* A CamelCase name that no definition has, but one definition has in
  another case with the same first letter (``JsonField`` for ``JSONField``,
  ``RelPermaLink`` for ``RelPermalink``), resolves as that definition: a
  reporter's slip of case. Not ``compilationUnit`` for ``CompilationUnit``
  (a variable named after its type), nor a snake-case word (``_base``, a
  module's name, for a class ``_Base``).
* Resolved identifiers are ordered most specific first (dotted, CamelCase,
  snake_case with ``_``, plain words), each group in first-seen order, so the
  cap drops the vaguest.
* Error strings are taken from ``latest_error`` then ``task_text``; within each,
  quoted strings first, then the whole lines that name an error.
* A sentence ends at a ``.`` followed by whitespace or the end of the text, or
  at a newline; the ``.`` in ``QuerySet.only()`` does not end one.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Container, Iterable, Iterator

from ctx04_core.settings import Settings
from ctx04_core.text import QUALIFIER, RULE_CODE, STOPWORDS, simple_name
from ctx04_core.types import Query

# Source and configuration files a task may name, in any repository.
EXTENSIONS = frozenset({
    "py", "pyi", "js", "jsx", "mjs", "cjs", "ts", "tsx", "mts", "cts", "go", "rs", "java", "kt",
    "c", "h", "cc", "cpp", "cxx", "hh", "hpp", "hxx", "php", "rb", "rake", "toml", "json", "yaml",
    "yml", "xml", "cfg", "ini",
})
# Every pattern run on the task is linear in its length: a match is tried only
# where a run of name characters starts, and the characters of the run that
# cannot begin the name (leading digits, lowercase before a capital) are
# consumed outside the ``term`` group. A try inside the run would find what
# the try at its start found, after scanning the run again: on a 64 Ki
# character word, minutes. Possessive ``*+``: a name never gives back a character.
_RUN_START = r"(?<![A-Za-z0-9_])"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*+"
_CAPITALISED = r"[A-Z][A-Za-z0-9_]*+"
# ``term`` is the dotted name (``3d.plot`` names ``d.plot``).
DOTTED = re.compile(rf"{_RUN_START}[0-9]*+(?P<term>{_NAME}(?:\.{_NAME})+)")
# Other languages' qualified names; a leading $ is a PHP variable. ``#`` only
# as Ruby writes it (``Class#method``), so a URL's ``page.html#part`` is not one.
# The matched alternative's group names the term (``match.lastgroup``).
QUALIFIED = re.compile(
    rf"(?:{_RUN_START}[0-9]*+|(?=\$))(?P<scoped>\$?{_NAME}(?:(?:::|->){_NAME})+)"
    rf"|{_RUN_START}[a-z0-9_]*+(?P<ruby>{_CAPITALISED}#[a-z_][A-Za-z0-9_]*+)"
    rf"|{_RUN_START}[a-z0-9_]*+(?P<namespaced>{_CAPITALISED}(?:\\{_CAPITALISED})+)"
)
# CamelCase, and the lowerCamelCase of JavaScript, Java and Go (``fullName``).
CAMEL = re.compile(r"\b[A-Z][a-zA-Z0-9_]+\b|\b[a-z_][a-z0-9_]*[A-Z][a-zA-Z0-9_]*\b")
SNAKE = re.compile(r"\b[a-z_][a-z0-9_]*\b")
CLI_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
# A kebab-case name in prose: a linter's rule, a command, a setting.
KEBAB = re.compile(r"(?<![\w/.-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w/-])")
# A test id is a whitespace-delimited word with ``.py::`` inside it, or two
# ``::`` apart (``tests/a.py::test_b``, ``a::b::c``).
_PYTEST_ID = ".py::"
_SCOPE = "::"
# A quote that opens or closes a word (``don't``) is an apostrophe, not a quote.
# A fenced code block: a pasted command line or log names every option it
# ran with, not the one the task is about.
FENCED_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
# A link to a code forge: its host names where code is kept, not the code, and
# searched as a dotted name matches every file that links to the forge. Other
# hosts stay: a site's host names its extractor or client (``facebook.com``).
FORGE_LINK = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*+://(?:[A-Za-z0-9-]+\.)*"
    r"(?:github\.com|githubusercontent\.com|gitlab\.com|bitbucket\.org)(?![A-Za-z0-9.-])"
)
QUOTED = re.compile(r"""(?<!\w)'([^'\n]+)'(?!\w)|(?<!\w)"([^"\n]+)"(?!\w)""")
ERROR_LINE = re.compile(r"Error:|Exception:|Traceback|assert")
_CAPITAL = re.compile("[A-Z]")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_LEADING_VERB = re.compile(
    r"^(?:fix|implement|add|change|when|given|please|we\s+need\s+to)(?=[\s,:;]|$)[\s,:;]*",
    re.IGNORECASE,
)
# Punctuation around a test id in prose: ``(see tests/a.py::test_b).``
_TEST_NAME_OPENERS = "`'\"(<"
_TEST_NAME_CLOSERS = "`'\".,;:)>"

_DOTTED, _CAMEL, _SNAKE, _WORD = range(4)


def build_query(
    task_text: str,
    *,
    latest_error: str | None = None,
    repro_target: str | None = None,
    names: Container[str],
    settings: Settings,
    extensions: frozenset[str] = frozenset(),
    respelled: Callable[[str], str | None] = lambda _name: None,
) -> Query:
    """The query of a task; ``extensions`` adds to :data:`EXTENSIONS` those of
    the repository's files; ``respelled`` gives the defined name a name not
    defined is, but for letter case (the index's ``DefinedNames.respelled``)."""
    texts = [task_text] if latest_error is None else [task_text, latest_error]
    known = EXTENSIONS | extensions
    identifiers, unresolved = _identifiers(texts, names, known, respelled)
    if settings.drop_stopword_identifiers:
        # "a", "t" and "the" name a function somewhere in most large repositories;
        # as identifiers they only add noise to every stage that uses them.
        identifiers = [t for t in identifiers if len(t) > 1 and t.lower() not in STOPWORDS]
    cap, chars = settings.max_identifiers, settings.max_term_chars
    errors_first = texts[::-1]
    tests = ([repro_target] if repro_target else []) + [
        _strip_test_name(word) for word in task_text.split() if _is_test_name(word)
    ]
    return Query(
        task_text=task_text,
        identifiers=_cap(identifiers, cap, chars),
        unresolved=_cap(unresolved, cap, chars),
        error_strings=_cap(_error_strings(errors_first), settings.max_error_strings, chars),
        test_names=_cap(tests, settings.max_test_names, chars),
        file_paths=_cap(
            (m.group() for m in _file_path(known).finditer(task_text)),
            settings.max_file_paths, chars,
        ),
        goal_hint=goal_hint(task_text, settings.max_goal_hint_chars),
        latest_error=latest_error or "",
    )


def goal_hint(task_text: str, max_chars: int) -> str:
    """The first sentence with leading request verbs stripped, at most ``max_chars``."""
    text = task_text.lstrip()
    end = _SENTENCE_END.search(text)
    sentence = text[: end.start()] if end else text
    while True:
        stripped = _LEADING_VERB.sub("", sentence, count=1).lstrip()
        if stripped == sentence:
            break
        sentence = stripped
    return sentence.strip()[:max_chars].rstrip()


def extensions_of(paths: Iterable[str]) -> frozenset[str]:
    """The file extensions among ``paths`` (``tsx`` of ``src/App.tsx``)."""
    names = (path.rsplit("/", 1)[-1] for path in paths)
    return frozenset(name.rsplit(".", 1)[1] for name in names if "." in name.lstrip("."))


@functools.cache
def _file_path(extensions: frozenset[str]) -> re.Pattern[str]:
    # Longest first, so ``a.tsx`` is not taken for ``a.ts``; the trailing \b
    # keeps ``foo.pyc`` from yielding ``foo.py``. Tried only where a run of
    # path characters starts, so a long run is scanned once, not once per
    # character (a path glued to the last, ``a.py/b.py``, is not taken).
    alternatives = "|".join(sorted(map(re.escape, extensions), key=lambda e: (-len(e), e)))
    return re.compile(rf"(?<![\w\-/])[\w\-/]+\.(?:{alternatives})\b")


def _identifiers(
    texts: list[str],
    names: Container[str],
    extensions: frozenset[str],
    respelled: Callable[[str], str | None],
) -> tuple[list[str], list[str]]:
    found: list[tuple[int, str]] = []
    for text in (FORGE_LINK.sub(" ", t) for t in texts):
        for match in DOTTED.finditer(text):
            term = match["term"]
            if term.rsplit(".", 1)[1] not in extensions:
                found.append((_DOTTED, term))
        found.extend((_DOTTED, m[m.lastgroup or 0]) for m in QUALIFIED.finditer(text))
        found.extend((_DOTTED, m.group()) for m in CLI_OPTION.finditer(text))
        for option in CLI_OPTION.finditer(FENCED_CODE.sub(" ", text)):
            found.extend(_option_spellings(option.group()))
        found.extend((_CAMEL, m.group()) for m in CAMEL.finditer(text))
        found.extend((_CAMEL, name) for name in _kebab_definitions(text, names))
        found.extend(
            (_SNAKE if "_" in m.group() else _WORD, m.group()) for m in SNAKE.finditer(text)
        )
    # sorted() is stable: within a group the first-seen order survives.
    found.sort(key=lambda item: item[0])
    resolved, unresolved = [], []
    for group, term in found:
        if simple_name(term) in names:
            resolved.append(term)
        elif not _code_shaped(group, term):
            continue
        elif group == _CAMEL and (spelled := respelled(term)) is not None:
            resolved.append(spelled)
        else:
            unresolved.append(term)
    return resolved, unresolved


def _option_spellings(option: str) -> Iterator[tuple[int, str]]:
    """An option of several words as code names it, snake- and camel-case."""
    words = option.lstrip("-").split("-")
    if len(words) > 1:
        yield _SNAKE, "_".join(words)
        yield _CAMEL, words[0] + _pascal(words[1:])


def _kebab_definitions(text: str, names: Container[str]) -> Iterator[str]:
    """The kebab-case names whose PascalCase spelling is a definition here: a
    rule the task calls ``yield-in-for-loop`` is the ``YieldInForLoop`` it
    means. Only an exact definition counts; a prefix named other code."""
    for match in KEBAB.finditer(text):
        pascal = _pascal(match.group().split("-"))
        if pascal in names:
            yield pascal


def _pascal(words: Iterable[str]) -> str:
    return "".join(word.capitalize() for word in words)


def _code_shaped(group: int, term: str) -> bool:
    if group == _DOTTED:
        # ``e.g`` and ``i.e`` are abbreviations, not attribute access.
        return any(len(part) > 1 for part in QUALIFIER.split(term.lstrip("$")))
    if "_" in term:
        return any(c.isalnum() for c in term)
    if group != _CAMEL:
        return False
    return RULE_CODE.fullmatch(term) is not None or (
        bool(_CAPITAL.search(term, 1)) and term != term.upper()
    )


def _error_strings(texts: Iterable[str]) -> Iterator[str]:
    for text in texts:
        for match in QUOTED.finditer(text):
            quoted = match.group(1) if match.group(1) is not None else match.group(2)
            if quoted.strip():
                yield quoted
        for line in text.splitlines():
            if ERROR_LINE.search(line):
                yield line.strip()


def _is_test_name(word: str) -> bool:
    """``word`` holds ``.py::``, or two ``::`` with characters between; neither
    at its start or end. A scan, where a pattern's backtracking was quadratic."""
    if word.find(_PYTEST_ID, 1, len(word) - 1) != -1:
        return True
    first = word.find(_SCOPE, 1)
    return first != -1 and word.find(_SCOPE, first + len(_SCOPE) + 1, len(word) - 1) != -1


def _strip_test_name(token: str) -> str:
    return token.lstrip(_TEST_NAME_OPENERS).rstrip(_TEST_NAME_CLOSERS)


def _cap(terms: Iterable[str], limit: int, max_chars: int) -> tuple[str, ...]:
    unique = dict.fromkeys(term[:max_chars] for term in terms if term)
    return tuple(unique)[:limit]
