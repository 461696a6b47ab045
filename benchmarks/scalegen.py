"""A synthetic Python repository of any size, the same for the same seed.

File ``i`` is made from ``Random(f"{seed}:{i}")`` alone and imports only
from files before it, so the repository of 5,000 files is the first 5,000
files of the one of 50,000: a growth measure compares the same code, with
more beside it. Each file is a module with a docstring, a few imports from
earlier modules, one class with three methods and two functions (about six
definitions), bodies that call the imported names, and docstrings; names are
drawn from a small vocabulary, so they repeat across files as real names do.
"""

from __future__ import annotations

import keyword
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_WORD_TEXT = (
    "account address agent alarm archive array asset audit batch bill block board "
    "bucket buffer budget cache calendar campaign card cart catalog channel chart "
    "check client cluster codec column comment config contact context contract cookie "
    "counter coupon credit cursor customer dashboard datum deadline delivery device "
    "digest discount document domain draft driver email endpoint engine entry event "
    "export feature feed field filter folder format frame gateway grant graph group "
    "handle header history host image import inbox index invoice issue item job "
    "journal key label layer ledger license limit link listing loader locale lock "
    "log manifest map marker media member message meter metric migration mirror "
    "model module monitor node note notice offer order owner package page panel "
    "parcel partner patch payload payment peer permit pipeline plan plugin policy "
    "pool port post price printer profile project prompt proxy quota queue quote "
    "rate reader receipt record region release report request resource result "
    "review role route rule sample schedule schema scope score secret segment "
    "sender session setting shard shipment signal slot snapshot source span stage "
    "state status stock store stream subscriber summary supplier survey table tag "
    "target task team template tenant term ticket timer token topic trace track "
    "transfer trigger upload user vendor version view voucher wallet warehouse "
    "webhook widget worker workflow zone"
)
# A folder named like a keyword ("import") could not be imported from.
WORDS = tuple(word for word in _WORD_TEXT.split() if not keyword.iskeyword(word))
_VERB_TEXT = (
    "apply build check clean close collect compute convert count create decode "
    "delete dispatch encode expire export fetch filter find flush format group "
    "import index load lock match merge move normalize open parse post prepare "
    "publish read refresh register reload remove render replace reset resolve "
    "restore retry save scan schedule send serialize sort split start stop store "
    "submit sync track transform update upload validate verify watch write"
)
VERBS = tuple(_VERB_TEXT.split())
SUFFIXES = ("Manager", "Handler", "Store", "Service", "Builder", "Client", "Registry",
            "Parser", "Resolver", "Adapter", "Factory", "Policy", "Queue", "View")
# Modules per folder, folders per package.
PER_FOLDER = 50
FOLDERS_PER_PACKAGE = 10


@dataclass(frozen=True)
class Module:
    """What one generated file defines, for imports and for the tasks."""

    path: str  # repo-relative, e.g. "src/ledger_pkg/invoice/record_store_17.py"
    dotted: str  # its import path
    class_name: str
    methods: tuple[str, ...]
    functions: tuple[str, ...]
    docstring: str


def module(seed: int, i: int) -> Module:
    """File ``i``'s names; :func:`source` writes its code from them."""
    rng = random.Random(f"{seed}:{i}")
    package = f"{WORDS[(i // (PER_FOLDER * FOLDERS_PER_PACKAGE)) % len(WORDS)]}_pkg" + (
        str(i // (PER_FOLDER * FOLDERS_PER_PACKAGE * len(WORDS)) or "")
    )
    folder = WORDS[(i // PER_FOLDER * 7) % len(WORDS)]
    stem = f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{i}"
    noun, other = rng.choice(WORDS), rng.choice(WORDS)
    class_name = f"{noun.title()}{other.title()}{rng.choice(SUFFIXES)}"
    methods = tuple(dict.fromkeys(
        f"{rng.choice(VERBS)}_{rng.choice(WORDS)}" for _ in range(3)
    ))
    functions = tuple(dict.fromkeys(
        f"{rng.choice(VERBS)}_{rng.choice(WORDS)}_{rng.choice(WORDS)}" for _ in range(2)
    ))
    docstring = (f"{rng.choice(VERBS).title()} the {noun} {other} of a "
                 f"{rng.choice(WORDS)} and keep its {rng.choice(WORDS)} in step.")
    path = f"src/{package}/{folder}/{stem}.py"
    return Module(path, path[4:-3].replace("/", "."), class_name, methods, functions, docstring)


def source(seed: int, i: int) -> str:
    me = module(seed, i)
    rng = random.Random(f"{seed}:{i}:body")
    imported = [module(seed, j) for j in sorted({rng.randrange(i) for _ in range(3)})] if i else []
    lines = [f'"""{me.docstring}"""', "", "from __future__ import annotations", "",
             "import logging", ""]
    for other in imported:
        lines.append(f"from {other.dotted} import {other.class_name}, {other.functions[0]}")
    lines += ["", "log = logging.getLogger(__name__)", "", ""]
    field = rng.choice(WORDS)
    lines += [f"class {me.class_name}:",
              f'    """{me.docstring}',
              "",
              f"    Holds the {field} and the {rng.choice(WORDS)} it was made from.",
              '    """',
              "",
              f"    def __init__(self, {field}: str, "
              f"limit: int = {rng.randrange(2, 500)}) -> None:",
              f"        self.{field} = {field}",
              "        self.limit = limit",
              "        self.seen: list[str] = []",
              ""]
    for name in me.methods:
        lines += _method(rng, name, field, imported)
    lines.append("")
    for name in me.functions:
        lines += _function(rng, name, me, imported)
    return "\n".join(lines).rstrip() + "\n"


def _method(rng: random.Random, name: str, field: str, imported: list[Module]) -> list[str]:
    arg = rng.choice(WORDS)
    body = [f"    def {name}(self, {arg}: str) -> str:",
            f'        """{name.replace("_", " ").capitalize()} for one {arg}; '
            f'raises ValueError past the limit."""',
            "        if len(self.seen) >= self.limit:",
            f'            raise ValueError(f"{name}: over {{self.limit}} {arg}s")',
            f"        self.seen.append({arg})"]
    if imported:
        other = rng.choice(imported)
        body.append(f"        {arg} = {other.functions[0]}({arg}, self.{field})")
    body += [f'        log.debug("{name} %s", {arg})', f"        return {arg}.strip()", ""]
    return body


def _function(rng: random.Random, name: str, me: Module, imported: list[Module]) -> list[str]:
    first, second = rng.choice(WORDS), rng.choice(WORDS)
    body = [f"def {name}({first}: str, {second}: str = \"\") -> str:",
            f'    """{name.replace("_", " ").capitalize()}: join the {first} with '
            f'its {second}."""']
    if imported:
        other = rng.choice(imported)
        body += [f"    helper = {other.class_name}({first})",
                 f"    {first} = helper.{other.methods[0]}({second} or {first})"]
    body += [f"    holder = {me.class_name}({first})",
             f"    return holder.{me.methods[-1]}({first} + {second})", "", ""]
    return body


def task_text(seed: int, i: int) -> str:
    """An issue text about file ``i``'s code, as a user would write it."""
    me = module(seed, i)
    rng = random.Random(f"{seed}:{i}:task")
    method, function = rng.choice(me.methods), rng.choice(me.functions)
    return (
        f"{me.class_name}.{method} raises ValueError too early\n\n"
        f"Calling `{function}` with a long {rng.choice(WORDS)} fails with "
        f"\"ValueError: {method}: over 3 {rng.choice(WORDS)}s\" although the limit was "
        f"raised. It looks like {me.class_name} does not reset its list of seen items "
        f"between calls. {me.docstring} Expected: {method} only fails when the limit "
        "is really exceeded."
    )


def materialise(seed: int, files: int, trees: Path) -> Path:
    """The repository of ``files`` files under ``trees``, made and committed once.

    Written into a temporary folder renamed into place at the end, so an
    interrupted run never leaves a half repository that later runs trust.
    """
    dest = trees / f"gen-{files}-seed{seed}"
    if dest.is_dir():
        return dest
    trees.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=trees))
    print(f"generating {files} files into {dest}", file=sys.stderr, flush=True)
    try:
        made: set[Path] = set()
        for i in range(files):
            path = staging / module(seed, i).path
            if path.parent not in made:
                _packages(staging, path.parent, made)
            path.write_text(source(seed, i), encoding="utf-8")
        git = ["git", "-C", str(staging), "-c", "user.name=bench", "-c",
               "user.email=bench@example.invalid", "-c", "commit.gpgsign=false"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"{files} generated files, seed {seed}"],
                       check=True, env={"GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
                                        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
                                        "PATH": "/usr/bin:/bin"})
        staging.rename(dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


def _packages(root: Path, folder: Path, made: set[Path]) -> None:
    """The folder and an ``__init__.py`` in it and each parent up to ``src``."""
    folder.mkdir(parents=True, exist_ok=True)
    while folder != root / "src" and folder not in made:
        (folder / "__init__.py").touch()
        made.add(folder)
        folder = folder.parent
