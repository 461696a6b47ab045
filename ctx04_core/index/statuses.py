"""Each file's status in the index, as its ``files`` rows store it.

The parser and the refresh write them, the queries filter on them and the
pipeline words the unusable ones for a reader: a module of names alone, so
that readers of the table need not import the parser.
"""

OK = "ok"
PARTIAL = "partial"  # indexed around lines that do not parse
SYNTAX_ERROR = "syntax_error"
TOO_COMPLEX = "too_complex"  # over the parse budget
NO_PARSER = "no_parser"
TOO_LARGE = "too_large"
BINARY = "binary"
NOT_UTF8 = "not_utf8"
UNREADABLE = "unreadable"
# A source the index will not read: a link out of the repository, a loop, a
# file replaced by a FIFO or a folder.
REFUSED = "refused"
# The statuses of files no stage may read; a syntax error or a language
# without a parser still leaves a file searchable and shown as lines.
UNUSABLE = frozenset({TOO_LARGE, BINARY, NOT_UTF8, UNREADABLE, REFUSED})
