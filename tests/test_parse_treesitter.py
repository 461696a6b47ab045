"""The tree-sitter parser plugins: exact nodes, edges and statements of real source per language."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_git_repo
from ctx04_parse_treesitter.engine import module_qualname

from ctx04_core import retrieve
from ctx04_core.plugins import plugin_manager
from ctx04_core.settings import Settings
from ctx04_core.types import Edge, Node, ParsedFile, Span

LANGUAGES = ("c", "cpp", "go", "java", "javascript", "typescript", "php", "ruby", "rust")

_Row = tuple[str, str, int, int, int, str, str]


@dataclass(frozen=True)
class Case:
    """A realistic file of one language, what it must parse to, and a task about it.

    Qualnames are written relative to the file's module ("" is the module).
    """

    language: str
    path: str
    source: str
    nodes: tuple[_Row, ...]  # qualname, kind, first, last, header end, signature, docstring
    edges: tuple[tuple[str, str, str, int], ...]  # source, kind, target, line
    statements: tuple[tuple[int, int], ...]
    task: str  # names one function of the file
    answer: str  # that function's qualname
    neighbour: tuple[str, str]  # another file of the repository the task runs on


C = Case(
    "c", "src/buf.c", """\
#include <stdlib.h>
#include "buf.h"

/* A growable byte buffer. */
struct buffer {
    char *data;
    size_t len;
};

typedef struct {
    int x;
} point_t;

union value { int i; float f; };

static int grow(struct buffer *b, size_t n);

/**
 * Append bytes to the buffer.
 *
 * Grows it first.
 */
int buffer_append(struct buffer *b,
                  const char *s, size_t n)
{
    if (grow(b, b->len + n) != 0 &&
        n > 0) {
        return -1;
    }
    memcpy(b->data + b->len, s, n);
    return 0;
}

#ifdef DEBUG
// Print the buffer.
static void dump(const struct buffer *b) { fprintf(stderr, "%zu\\n", b->len); }
#endif

static int (*pick(int k))(int) { return table[k]; }
""",
    nodes=(
        ("buffer", "struct", 5, 8, 5, "struct buffer", "A growable byte buffer."),
        ("point_t", "struct", 10, 12, 10, "typedef struct", ""),
        ("value", "struct", 14, 14, 14, "union value", ""),
        ("buffer_append", "function", 23, 32, 24,
         "int buffer_append(struct buffer *b, const char *s, size_t n)",
         "Append bytes to the buffer."),
        ("dump", "function", 36, 36, 36, "static void dump(const struct buffer *b)",
         "Print the buffer."),
        ("pick", "function", 39, 39, 39, "static int (*pick(int k))(int)", ""),
    ),
    edges=(
        ("", "import", "stdlib.h", 1),
        ("", "import", "buf.h", 2),
        ("", "contain", "buffer", 5),
        ("", "contain", "point_t", 10),
        ("", "contain", "value", 14),
        # The prototype of grow on line 16 is not a definition.
        ("", "contain", "buffer_append", 23),
        ("buffer_append", "invoke", "grow", 26),
        ("buffer_append", "invoke", "memcpy", 30),
        ("", "contain", "dump", 36),
        ("dump", "invoke", "fprintf", 36),
        ("", "contain", "pick", 39),
    ),
    # The K&R header ends before its brace's line; the if's header spans two lines.
    statements=((23, 24), (26, 27)),
    task="buffer_append returns -1 after the buffer grows",
    answer="buffer_append",
    neighbour=("src/str.c", "int str_len(const char *s) {\n    return strlen(s);\n}\n"),
)

CPP = Case(
    "cpp", "geo/shapes.cpp", """\
#include <vector>

namespace geo {

/// A circle.
class Circle : public Shape {
 public:
  explicit Circle(double r) : r_(r) {}
  double area() const override { return kPi * square(r_); }
  void grow(double by);

 private:
  double r_;
};

template <typename T>
T clamp(T v, T lo, T hi) {
  return std::max(lo, std::min(v, hi));
}

// Grow the radius, within bounds.
void Circle::grow(double by) {
  r_ = clamp(r_ + by, 0.0, 1e9);
}

}  // namespace geo

namespace a::b {
struct P { int x; };
}
Circle::~Circle() { delete new Circle(1); }
bool operator==(const P& a, const P& b) { return a.x == b.x; }
""",
    nodes=(
        ("geo", "namespace", 3, 26, 3, "namespace geo", ""),
        ("geo.Circle", "class", 6, 14, 6, "class Circle : public Shape", "A circle."),
        ("geo.Circle.Circle", "method", 8, 8, 8, "explicit Circle(double r) : r_(r)", ""),
        ("geo.Circle.area", "method", 9, 9, 9, "double area() const override", ""),
        # The prototype of grow in the class is not a definition.
        ("geo.clamp", "function", 16, 19, 17, "template <typename T> T clamp(T v, T lo, T hi)",
         ""),
        ("geo.Circle.grow", "method", 22, 24, 22, "void Circle::grow(double by)",
         "Grow the radius, within bounds."),
        ("a.b", "namespace", 28, 30, 28, "namespace a::b", ""),
        ("a.b.P", "struct", 29, 29, 29, "struct P", ""),
        ("Circle.~Circle", "method", 31, 31, 31, "Circle::~Circle()", ""),
        ("operator==", "function", 32, 32, 32, "bool operator==(const P& a, const P& b)", ""),
    ),
    edges=(
        ("", "import", "vector", 1),
        ("", "contain", "geo", 3),
        ("geo", "contain", "geo.Circle", 6),
        ("geo.Circle", "contain", "geo.Circle.Circle", 8),
        ("geo.Circle", "contain", "geo.Circle.area", 9),
        ("geo.Circle.area", "invoke", "square", 9),
        ("geo", "contain", "geo.clamp", 16),
        ("geo.clamp", "invoke", "max", 18),
        ("geo.clamp", "invoke", "min", 18),
        ("geo", "contain", "geo.Circle.grow", 22),
        ("geo.Circle.grow", "invoke", "clamp", 23),
        ("", "contain", "a.b", 28),
        ("a.b", "contain", "a.b.P", 29),
        ("", "contain", "Circle.~Circle", 31),
        ("Circle.~Circle", "invoke", "Circle", 31),
        ("", "contain", "operator==", 32),
    ),
    statements=((16, 17),),
    task="Circle.grow() lets the radius go negative",
    answer="geo.Circle.grow",
    neighbour=("geo/util.cpp", "double square(double x) { return x * x; }\n"),
)

GO = Case(
    "go", "geo/geo.go", """\
// Package geo does geometry.
package geo

import (
    "fmt"
    m "math"
)

// Point is a point.
type Point struct {
    X, Y float64
}

type Shape interface {
    Area() float64
}

// Dist returns the distance
// between two points.
//
// It is symmetric.
func (p *Point) Dist(q Point,
    scale float64) float64 {
    return m.Sqrt(square(p.X-q.X) + square(p.Y-q.Y))
}

func (l *List[T]) Push(v T) { l.items = append(l.items, v) }

func square(x float64) float64 { return x * x }

func main() {
    switch {
    case true:
        fmt.Println(New[int]().String())
    }
}
""",
    nodes=(
        ("Point", "struct", 10, 12, 10, "type Point struct", "Point is a point."),
        ("Shape", "interface", 14, 16, 14, "type Shape interface", ""),
        ("Point.Dist", "method", 22, 25, 23,
         "func (p *Point) Dist(q Point, scale float64) float64",
         "Dist returns the distance between two points."),
        ("List.Push", "method", 27, 27, 27, "func (l *List[T]) Push(v T)", ""),
        ("square", "function", 29, 29, 29, "func square(x float64) float64", ""),
        ("main", "function", 31, 36, 31, "func main()", ""),
    ),
    edges=(
        ("", "import", "fmt", 5),
        ("", "import", "math", 6),
        ("", "contain", "Point", 10),
        ("", "contain", "Shape", 14),
        ("", "contain", "Point.Dist", 22),
        ("Point.Dist", "invoke", "Sqrt", 24),
        ("Point.Dist", "invoke", "square", 24),
        ("", "contain", "List.Push", 27),
        ("List.Push", "invoke", "append", 27),
        ("", "contain", "square", 29),
        ("", "contain", "main", 31),
        ("main", "invoke", "Println", 34),
        ("main", "invoke", "String", 34),
    ),
    # The import group, the interface (whole: it holds no block), Dist's header.
    statements=((4, 7), (14, 16), (22, 23)),
    task="Point.Dist returns the wrong distance when scale is not 1",
    answer="Point.Dist",
    neighbour=("geo/clamp.go", "package geo\n\nfunc Clamp(v, lo, hi float64) float64 {\n"
               "    if v < lo {\n        return lo\n    }\n    return v\n}\n"),
)

JAVA = Case(
    "java", "shop/Cart.java", """\
package shop;

import java.util.List;
import static java.util.Objects.requireNonNull;
import java.util.*;

/**
 * A shopping cart.
 *
 * More text.
 */
public class Cart extends Base implements Totalled {
    private final List<Item> items = new ArrayList<>();

    public Cart(List<Item> items) {
        this.items.addAll(requireNonNull(items));
    }

    /** The total, in cents. */
    @Override
    public double total() {
        return items.stream().mapToDouble(Item::price).sum();
    }

    enum Kind { BOOK, FOOD }

    interface Visitor {
        void visit(Item item);
    }

    record Pair(int a, int b) {}
}
""",
    nodes=(
        ("Cart", "class", 12, 32, 12, "public class Cart extends Base implements Totalled",
         "A shopping cart."),
        ("Cart.Cart", "method", 15, 17, 15, "public Cart(List<Item> items)", ""),
        ("Cart.total", "method", 20, 23, 21, "@Override public double total()",
         "The total, in cents."),
        ("Cart.Kind", "enum", 25, 25, 25, "enum Kind", ""),
        ("Cart.Visitor", "interface", 27, 29, 27, "interface Visitor", ""),
        ("Cart.Visitor.visit", "method", 28, 28, 28, "void visit(Item item)", ""),
        ("Cart.Pair", "class", 31, 31, 31, "record Pair(int a, int b)", ""),
    ),
    edges=(
        ("", "import", "java.util.List", 3),
        ("", "import", "java.util.Objects.requireNonNull", 4),
        ("", "import", "java.util", 5),
        ("", "contain", "Cart", 12),
        ("Cart", "invoke", "Base", 12),  # the tags query's class reference
        ("Cart", "contain", "Cart.Cart", 15),
        ("Cart.Cart", "invoke", "addAll", 16),
        ("Cart.Cart", "invoke", "requireNonNull", 16),
        ("Cart", "contain", "Cart.total", 20),
        ("Cart.total", "invoke", "mapToDouble", 22),
        ("Cart.total", "invoke", "stream", 22),
        ("Cart.total", "invoke", "sum", 22),
        ("Cart", "contain", "Cart.Kind", 25),
        ("Cart", "contain", "Cart.Visitor", 27),
        ("Cart.Visitor", "contain", "Cart.Visitor.visit", 28),
        ("Cart", "contain", "Cart.Pair", 31),
    ),
    # The annotated header; the doc comment is a comment, not a statement.
    statements=((20, 21),),
    task="Cart.total() returns the wrong sum for an empty cart",
    answer="Cart.total",
    neighbour=("shop/Item.java", "package shop;\n\npublic record Item(double price) {}\n"),
)

JAVASCRIPT = Case(
    "javascript", "src/config.js", """\
import { readFile } from 'fs';
const path = require("path");

/**
 * Loads the config.
 * @param {string} name
 */
export async function loadConfig(name) {
  return readFile(path.join(dir, name));
}

// A cache of things.
class Cache extends Base {
  constructor(size) {
    super();
    this.size = size;
  }
  // Get a value.
  get(key) { return this.map.get(key); }
}

const handler = (req,
                 res) => {
  const inner = () => res.send(render(req));
  return inner();
};
""",
    nodes=(
        ("loadConfig", "function", 8, 10, 8, "export async function loadConfig(name)",
         "Loads the config."),
        ("Cache", "class", 13, 20, 13, "class Cache extends Base", "A cache of things."),
        ("Cache.constructor", "method", 14, 17, 14, "constructor(size)", ""),
        ("Cache.get", "method", 19, 19, 19, "get(key)", "Get a value."),
        # The arrow function inside handler is part of its body.
        ("handler", "function", 22, 26, 23, "const handler = (req, res) =>", ""),
    ),
    edges=(
        ("", "import", "fs", 1),
        ("", "import", "path", 2),
        ("", "contain", "loadConfig", 8),
        ("loadConfig", "invoke", "join", 9),
        ("loadConfig", "invoke", "readFile", 9),
        ("", "contain", "Cache", 13),
        ("Cache", "contain", "Cache.constructor", 14),
        ("Cache", "contain", "Cache.get", 19),
        ("Cache.get", "invoke", "get", 19),
        ("", "contain", "handler", 22),
        ("handler", "invoke", "render", 24),
        ("handler", "invoke", "send", 24),
        ("handler", "invoke", "inner", 25),
    ),
    statements=((22, 23),),
    task="loadConfig fails when the file name has spaces",
    answer="loadConfig",
    neighbour=("src/util.js", "module.exports = { slug: (s) => s.toLowerCase() };\n"),
)

TYPESCRIPT = Case(
    "typescript", "src/api.ts", """\
import type { Req } from "./req";
import fs = require("fs");

/** Something with an id. */
export interface Entity {
  id: string;
  describe(verbose: boolean): string;
}

export enum Level { Low, High }

export namespace Util {
  export function slug(s: string): string {
    return s.toLowerCase().replace(/ /g, "-");
  }
}

export abstract class Repo<T extends Entity> implements Store {
  abstract find(id: string): T | undefined;

  @cached()
  async save(
    item: T,
  ): Promise<void> {
    await this.db.put(Util.slug(item.id), item);
  }
}

export const handler = async (req: Req): Promise<number> => {
  return new Repo().count(req);
};

function overload(a: string): void;
function overload(a: any) {}
""",
    nodes=(
        ("Entity", "interface", 5, 8, 5, "export interface Entity", "Something with an id."),
        ("Entity.describe", "method", 7, 7, 7, "describe(verbose: boolean): string", ""),
        ("Level", "enum", 10, 10, 10, "export enum Level", ""),
        ("Util", "namespace", 12, 16, 12, "export namespace Util", ""),
        ("Util.slug", "function", 13, 15, 13, "export function slug(s: string): string", ""),
        ("Repo", "class", 18, 27, 18,
         "export abstract class Repo<T extends Entity> implements Store", ""),
        ("Repo.find", "method", 19, 19, 19, "abstract find(id: string): T | undefined", ""),
        # The decorator is part of the method's span, not of its signature.
        ("Repo.save", "method", 21, 26, 24, "async save( item: T, ): Promise<void>", ""),
        ("handler", "function", 29, 31, 29,
         "export const handler = async (req: Req): Promise<number> =>", ""),
        ("overload", "function", 33, 33, 33, "function overload(a: string): void", ""),
        ("overload", "function", 34, 34, 34, "function overload(a: any)", ""),
    ),
    edges=(
        ("", "import", "./req", 1),
        ("", "import", "fs", 2),
        ("", "contain", "Entity", 5),
        ("Entity", "contain", "Entity.describe", 7),
        ("", "contain", "Level", 10),
        ("", "contain", "Util", 12),
        ("Util", "contain", "Util.slug", 13),
        ("Util.slug", "invoke", "replace", 14),
        ("Util.slug", "invoke", "toLowerCase", 14),
        ("", "contain", "Repo", 18),
        ("Repo", "contain", "Repo.find", 19),
        ("Repo", "contain", "Repo.save", 21),
        ("Repo.save", "invoke", "cached", 21),
        ("Repo.save", "invoke", "put", 25),
        ("Repo.save", "invoke", "slug", 25),
        ("", "contain", "handler", 29),
        ("handler", "invoke", "Repo", 30),
        ("handler", "invoke", "count", 30),
        ("", "contain", "overload", 33),
        ("", "contain", "overload", 34),
    ),
    statements=((22, 24),),
    task="Repo.save() puts the item under the wrong id",
    answer="Repo.save",
    neighbour=("src/req.ts", "export interface Req { id: string }\n"),
)

PHP = Case(
    "php", "app/User.php", """\
<?php
namespace App\\Models {

use App\\Support\\Str;
use Illuminate\\Database\\{Model, Builder as B};
require 'boot.php';

/**
 * A user of the app.
 */
class User extends Model implements Authenticatable
{
    use HasName;

    // Full name.
    public function fullName(string $sep = ' '): string
    {
        return Str::title($this->first . $sep . $this->last);
    }
}

interface Named { public function name(): string; }

trait HasName {
    public function name(): string { return strtoupper($this->name); }
}

enum Suit: string { case Hearts = 'H'; }

function helper($x) { $x(); return new User(); }
}
""",
    nodes=(
        ("App.Models", "namespace", 2, 31, 2, "namespace App\\Models", ""),
        ("App.Models.User", "class", 11, 20, 11,
         "class User extends Model implements Authenticatable", "A user of the app."),
        ("App.Models.User.fullName", "method", 16, 19, 16,
         "public function fullName(string $sep = ' '): string", "Full name."),
        ("App.Models.Named", "interface", 22, 22, 22, "interface Named", ""),
        ("App.Models.Named.name", "method", 22, 22, 22, "public function name(): string", ""),
        ("App.Models.HasName", "trait", 24, 26, 24, "trait HasName", ""),
        ("App.Models.HasName.name", "method", 25, 25, 25, "public function name(): string",
         ""),
        ("App.Models.Suit", "enum", 28, 28, 28, "enum Suit: string", ""),
        ("App.Models.helper", "function", 30, 30, 30, "function helper($x)", ""),
    ),
    edges=(
        ("", "contain", "App.Models", 2),
        ("App.Models", "import", "App\\Support\\Str", 4),
        ("App.Models", "import", "Illuminate\\Database", 5),
        ("App.Models", "import", "boot.php", 6),
        ("App.Models", "contain", "App.Models.User", 11),
        ("App.Models.User", "contain", "App.Models.User.fullName", 16),
        ("App.Models.User.fullName", "invoke", "title", 18),
        ("App.Models", "contain", "App.Models.Named", 22),
        ("App.Models.Named", "contain", "App.Models.Named.name", 22),
        ("App.Models", "contain", "App.Models.HasName", 24),
        ("App.Models.HasName", "contain", "App.Models.HasName.name", 25),
        ("App.Models.HasName.name", "invoke", "strtoupper", 25),
        ("App.Models", "contain", "App.Models.Suit", 28),
        # `$x()` calls a variable, which names no function.
        ("App.Models", "contain", "App.Models.helper", 30),
        ("App.Models.helper", "invoke", "User", 30),
    ),
    statements=(),
    task="User.fullName() drops the sep between the first and last name",
    answer="App.Models.User.fullName",
    neighbour=("app/Str.php", "<?php\nclass Str { static function title($s) { return $s; } }\n"),
)

RUBY = Case(
    "ruby", "lib/store.rb", """\
require "json"
require_relative "base"

# Persistence helpers.
module Persist
  # A key-value store.
  #
  # Backed by a hash.
  class Store < Base
    def initialize(path)
      @data = load(path)
    end

    def fetch(key,
              default = nil)
      @data.fetch(key) { default }
    end

    def self.open(path) = new(path)

    def empty?; @data.empty?; end
  end

  def helper
    Store.new("x").fetch(:a)
  end
end
""",
    nodes=(
        ("Persist", "namespace", 5, 27, 5, "module Persist", "Persistence helpers."),
        ("Persist.Store", "class", 9, 22, 9, "class Store < Base", "A key-value store."),
        ("Persist.Store.initialize", "method", 10, 12, 10, "def initialize(path)", ""),
        ("Persist.Store.fetch", "method", 14, 17, 15, "def fetch(key, default = nil)", ""),
        ("Persist.Store.open", "method", 19, 19, 19, "def self.open(path) =", ""),
        ("Persist.Store.empty?", "method", 21, 21, 21, "def empty?", ""),
        # A module's functions are methods: modules are mixins.
        ("Persist.helper", "method", 24, 26, 24, "def helper", ""),
    ),
    edges=(
        ("", "import", "json", 1),
        ("", "invoke", "require", 1),
        ("", "import", "base", 2),
        ("", "invoke", "require_relative", 2),
        ("", "contain", "Persist", 5),
        ("Persist", "contain", "Persist.Store", 9),
        ("Persist.Store", "contain", "Persist.Store.initialize", 10),
        ("Persist.Store.initialize", "invoke", "load", 11),
        ("Persist.Store", "contain", "Persist.Store.fetch", 14),
        ("Persist.Store.fetch", "invoke", "fetch", 16),
        ("Persist.Store", "contain", "Persist.Store.open", 19),
        ("Persist.Store.open", "invoke", "new", 19),
        ("Persist.Store", "contain", "Persist.Store.empty?", 21),
        ("Persist.Store.empty?", "invoke", "empty?", 21),
        ("Persist", "contain", "Persist.helper", 24),
        ("Persist.helper", "invoke", "Store", 25),
        ("Persist.helper", "invoke", "fetch", 25),
        ("Persist.helper", "invoke", "new", 25),
    ),
    statements=((14, 15),),
    task="Store.fetch ignores the default value",
    answer="Persist.Store.fetch",
    neighbour=("lib/base.rb", "class Base\n  def load(path)\n    File.read(path)\n  end\nend\n"),
)

RUST = Case(
    "rust", "src/lib.rs", """\
//! The crate docs.
use std::collections::HashMap;
use crate::util::{self, helper};
extern crate serde;
mod util;

/// A counter of words.
#[derive(Debug, Default)]
pub struct Counter {
    counts: HashMap<String, usize>,
}

pub enum Mode { Fast, Slow }

pub trait Count {
    fn count(&mut self, word: &str);
    fn total(&self) -> usize { 0 }
}

impl Counter {
    /// Make one.
    pub fn new() -> Self {
        Self::default()
    }
}

impl<'a> Count for Counter
where
    Self: Sized,
{
    fn count(&mut self, word: &str) {
        *self.counts.entry(word.to_string()).or_insert(0) += 1;
        helper(word);
    }
}

mod inner {
    pub fn run() { println!("{}", super::Counter::new().total()); }
}
""",
    nodes=(
        ("Counter", "struct", 8, 11, 9, "pub struct Counter", "A counter of words."),
        ("Mode", "enum", 13, 13, 13, "pub enum Mode", ""),
        ("Count", "trait", 15, 18, 15, "pub trait Count", ""),
        ("Count.count", "method", 16, 16, 16, "fn count(&mut self, word: &str)", ""),
        ("Count.total", "method", 17, 17, 17, "fn total(&self) -> usize", ""),
        ("Counter", "impl", 20, 25, 20, "impl Counter", ""),
        ("Counter.new", "method", 22, 24, 22, "pub fn new() -> Self", "Make one."),
        ("Counter", "impl", 27, 35, 29, "impl<'a> Count for Counter where Self: Sized,", ""),
        ("Counter.count", "method", 31, 34, 31, "fn count(&mut self, word: &str)", ""),
        ("inner", "namespace", 37, 39, 37, "mod inner", ""),
        ("inner.run", "function", 38, 38, 38, "pub fn run()", ""),
    ),
    edges=(
        ("", "import", "std::collections::HashMap", 2),
        ("", "import", "crate::util::{self, helper}", 3),
        ("", "import", "serde", 4),
        ("", "import", "util", 5),
        ("", "contain", "Counter", 8),
        ("", "contain", "Mode", 13),
        ("", "contain", "Count", 15),
        ("Count", "contain", "Count.count", 16),
        ("Count", "contain", "Count.total", 17),
        ("", "contain", "Counter", 20),
        ("Counter", "contain", "Counter.new", 22),
        ("Counter.new", "invoke", "default", 23),
        ("", "contain", "Counter", 27),
        ("Counter", "contain", "Counter.count", 31),
        ("Counter.count", "invoke", "entry", 32),
        ("Counter.count", "invoke", "or_insert", 32),
        ("Counter.count", "invoke", "to_string", 32),
        ("Counter.count", "invoke", "helper", 33),
        ("", "contain", "inner", 37),
        ("inner", "contain", "inner.run", 38),
        # A macro's arguments are tokens to tree-sitter: only the macro is seen.
        ("inner.run", "invoke", "println", 38),
    ),
    statements=((27, 29),),
    task="Counter.new() starts with words already counted",
    answer="Counter.new",
    neighbour=("src/util.rs", "pub fn helper(word: &str) -> usize {\n    word.len()\n}\n"),
)

CASES = {case.language: case for case in (C, CPP, GO, JAVA, JAVASCRIPT, TYPESCRIPT, PHP, RUBY,
                                          RUST)}


def qualified(case: Case, name: str) -> str:
    module = module_qualname(case.path)
    return f"{module}.{name}" if name else module


def parse(language: str, path: str, text: str) -> ParsedFile | None:
    parsed: ParsedFile | None = plugin_manager(only=[language]).hook.parse_file(
        path=path, text=text, settings=Settings()
    )
    return parsed


def parsed_case(language: str) -> tuple[Case, ParsedFile]:
    case = CASES[language]
    parsed = parse(language, case.path, case.source)
    assert parsed is not None
    return case, parsed


@pytest.mark.parametrize("language", LANGUAGES)
def test_nodes_of_a_realistic_file(language: str) -> None:
    case, parsed = parsed_case(language)

    module = module_qualname(case.path)
    lines = case.source.count("\n")
    assert parsed.language == language
    assert parsed.error_lines == ()
    assert parsed.nodes == (
        Node(module, module.rsplit(".", 1)[-1], "module", Span(case.path, 1, lines), 0, "", ""),
        *(
            Node(qualified(case, name), name.rsplit(".", 1)[-1], kind,
                 Span(case.path, first, last), header_end, signature, docstring)
            for name, kind, first, last, header_end, signature, docstring in case.nodes
        ),
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_edges_of_a_realistic_file(language: str) -> None:
    case, parsed = parsed_case(language)

    assert parsed.edges == tuple(
        Edge(qualified(case, source), kind,
             qualified(case, target) if kind == "contain" else target, line)
        for source, kind, target, line in case.edges
    )
    spans = {}
    for node in parsed.nodes:
        spans.setdefault(node.qualname, []).append(node.span)
    assert all(
        any(s.start_line <= edge.line <= s.end_line for s in spans[edge.source])
        for edge in parsed.edges
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_multiline_statements_of_a_realistic_file(language: str) -> None:
    case, parsed = parsed_case(language)

    assert parsed.multiline_statements == case.statements


COMPOUND = """\
function build(a,
               b) {
  // comment before the body
  if (a &&
      b) {
    return 1;
  } else if (a ||
             b) {
    return 2;
  }
  const value = {
    x: 1,
  };
  describe("x", () => {
    it("works", () => {
      check(
        value);
    });
  });
  switch (a) {
    case 1:
      return f(
        a);
  }
}
"""


def test_compound_statements_keep_only_their_headers() -> None:
    parsed = parse("javascript", "m.js", COMPOUND)

    assert parsed is not None
    assert parsed.multiline_statements == (
        (1, 2),  # the function's header
        (4, 5),  # an if's header, without its block
        (7, 8),  # an else-if's header
        (11, 13),  # a statement without a block, whole
        (16, 17),  # inside a callback's block
        (22, 23),  # inside a case
    )


@pytest.mark.parametrize(
    ("language", "path", "text", "names", "error_lines"),
    [
        ("go", "bad.go",
         "package p\n\nfunc ok() int { return 1 }\n\nfunc broken( {\n\treturn\n}\n\n"
         "func later() { ok() }\n",
         ["bad", "bad.ok", "bad.broken", "bad.later"], (5,)),
        ("typescript", "bad.ts",
         "export function ok(): number { return 1 }\n\nclass Broken {\n  method( { }\n}\n\n"
         "function later() { return ok() }\n",
         ["bad", "bad.ok", "bad.Broken", "bad.later"], (4,)),
        # A missing `;` is a MISSING node, not an ERROR.
        ("c", "bad.c", "int f() { return 1 }\nint g() { return f(); }\n",
         ["bad", "bad.f", "bad.g"], (1,)),
    ],
)
def test_a_file_with_syntax_errors_keeps_its_nodes(
    language: str, path: str, text: str, names: list[str], error_lines: tuple[int, ...]
) -> None:
    parsed = parse(language, path, text)

    assert parsed is not None
    assert [n.qualname for n in parsed.nodes] == names
    assert parsed.error_lines == error_lines


def test_error_lines_are_the_first_twenty() -> None:
    parsed = parse("c", "many.c", "int f( {\n" * 30)

    assert parsed is not None
    assert len(parsed.error_lines) <= 20
    assert parsed.error_lines == tuple(sorted(parsed.error_lines))
    assert parsed.error_lines[0] == 1


@pytest.mark.parametrize("language", LANGUAGES)
def test_files_of_other_languages_are_left_to_other_parsers(language: str) -> None:
    pm = plugin_manager(only=[language])

    [globs] = pm.hook.source_globs()
    assert "*.py" not in globs
    for path in ("a.py", "README.md", "a.unknown", "Makefile"):
        assert pm.hook.parse_file(path=path, text="x = 1\n", settings=Settings()) is None


@pytest.mark.parametrize(
    ("language", "globs"),
    [
        ("c", ["*.c", "*.h"]),
        ("cpp", ["*.cc", "*.cpp", "*.cxx", "*.hpp", "*.hh", "*.hxx"]),
        ("go", ["*.go"]),
        ("java", ["*.java"]),
        ("javascript", ["*.js", "*.jsx", "*.mjs", "*.cjs"]),
        ("typescript", ["*.ts", "*.tsx", "*.mts", "*.cts"]),
        ("php", ["*.php"]),
        ("ruby", ["*.rb", "*.rake", "Rakefile"]),
        ("rust", ["*.rs"]),
    ],
)
def test_each_language_is_its_own_plugin(language: str, globs: list[str]) -> None:
    assert plugin_manager(only=[language]).hook.source_globs() == [globs]
    # Disabling one language leaves its files to nobody, and the others parsed.
    pm = plugin_manager(disable=[language])
    assert globs[0] not in {g for found in pm.hook.source_globs() for g in found}


def test_headers_are_parsed_by_the_c_plugin_with_the_cpp_grammar() -> None:
    text = "namespace n {\nclass A { void f() { g(); } };\n}\nint plain(void);\n"
    parsed = parse("c", "inc/a.h", text)

    assert parsed is not None
    assert parsed.language == "c"
    assert parsed.error_lines == ()
    assert [(n.qualname, n.kind) for n in parsed.nodes] == [
        ("inc.a", "module"), ("inc.a.n", "namespace"), ("inc.a.n.A", "class"),
        ("inc.a.n.A.f", "method"),
    ]
    assert parse("cpp", "inc/a.h", text) is None


def definitions(parsed: ParsedFile | None) -> list[tuple[str, str, int, int]]:
    assert parsed is not None
    return [(n.qualname, n.kind, n.span.start_line, n.span.end_line) for n in parsed.nodes]


def test_a_class_template_specialization_is_a_type_with_its_methods() -> None:
    text = (
        "template <typename T> struct formatter;\n"
        "template <typename T>\n"
        "struct formatter<std::vector<T>, char> {\n"
        "  auto parse(int ctx) -> int { return ctx; }\n"
        "};\n"
    )
    assert definitions(parse("cpp", "fmt/ranges.hpp", text)) == [
        ("fmt.ranges", "module", 1, 5),
        ("fmt.ranges.formatter", "struct", 2, 5),
        ("fmt.ranges.formatter.parse", "method", 4, 4),
    ]


# Unexpanded, FMT_BEGIN_NAMESPACE ran into the enum: the file parsed as one
# function "print" spanning both definitions.
_LONE_MACROS = (
    "#include <cstdint>\n"
    "FMT_BEGIN_NAMESPACE\n"
    "enum class color : uint32_t {\n"
    "  red = 1,\n"
    "  LAST_COLOR\n"
    "};\n"
    "FMT_NODISCARD\n"
    "int print(int c) { return c; }\n"
    "FMT_END_NAMESPACE\n"
)
# Read as a type, FMT_CONSTEXPR made the constructor a broken declaration,
# and the struct ran on over every definition after it (fmt's format.h). An
# upper-case type before a name alone stays the type.
_SPECIFIER_MACROS = (
    "template <typename Char> struct write_int_data {\n"
    "  size_t size;\n"
    "  FMT_CONSTEXPR write_int_data(int n, unsigned prefix)\n"
    "      : size(prefix + n) {}\n"
    "};\n"
    "template <typename T, FMT_ENABLE_IF(std::is_integral<T>::value &&\n"
    "                                    (sizeof(T) > 1))>\n"
    "FMT_CONSTEXPR FMT_INLINE auto write(T value) -> int {\n"
    "  return value;\n"
    "}\n"
    "class FMT_API format_error : public std::runtime_error {\n"
    "  friend FMT_CONSTEXPR20 int compare(const int& a) { return a; }\n"
    "};\n"
    "YY_BUFFER_STATE yy_create_buffer(FILE *file, int size) { return 0; }\n"
)


@pytest.mark.parametrize(
    ("path", "text", "expected", "signature"),
    [
        ("include/color.h", _LONE_MACROS, [
            ("include.color", "module", 1, 9),
            ("include.color.color", "enum", 3, 6),
            ("include.color.print", "function", 8, 8),
        ], (1, "enum class color : uint32_t")),
        ("include/fmt/format.h", _SPECIFIER_MACROS, [
            ("include.fmt.format", "module", 1, 14),
            ("include.fmt.format.write_int_data", "struct", 1, 5),
            ("include.fmt.format.write_int_data.write_int_data", "method", 3, 4),
            ("include.fmt.format.write", "function", 6, 10),
            ("include.fmt.format.format_error", "class", 11, 13),
            ("include.fmt.format.format_error.compare", "method", 12, 12),
            ("include.fmt.format.yy_create_buffer", "function", 14, 14),
        ], (3, "template <typename T, FMT_ENABLE_IF(std::is_integral<T>::value && "
               "(sizeof(T) > 1))> FMT_CONSTEXPR FMT_INLINE auto write(T value) -> int")),
    ],
    ids=["alone on a line", "standing for specifiers"],
)
def test_macros_are_no_code(
    path: str, text: str, expected: list[tuple[str, str, int, int]], signature: tuple[int, str]
) -> None:
    parsed = parse("c", path, text)

    assert definitions(parsed) == expected
    assert parsed.error_lines == ()
    # The signature is the file's text: nothing blanked shows.
    node, shown = signature
    assert parsed.nodes[node].signature == shown


@pytest.mark.parametrize(
    ("language", "path", "text", "names"),
    [
        ("typescript", "ui/App.tsx",
         "export function App(p: Props) {\n  return <div onClick={() => go(p)}>hi</div>;\n}\n",
         ["ui.App", "ui.App.App"]),
        ("javascript", "ui/app.jsx", "const App = () => <b>{title()}</b>;\n",
         ["ui.app", "ui.app.App"]),
        ("ruby", "Rakefile", "def build\n  sh 'make'\nend\n", ["Rakefile", "Rakefile.build"]),
        ("ruby", "lib/tasks/db.rake", "def migrate; end\n",
         ["lib.tasks.db", "lib.tasks.db.migrate"]),
        ("typescript", "a.mts", "export function m(): void {}\n", ["a", "a.m"]),
    ],
)
def test_every_glob_reaches_a_grammar_that_reads_it(
    language: str, path: str, text: str, names: list[str]
) -> None:
    parsed = parse(language, path, text)

    assert parsed is not None
    assert parsed.error_lines == ()
    assert [n.qualname for n in parsed.nodes] == names


def test_a_header_ends_at_the_body_not_at_a_brace_in_its_types() -> None:
    text = (
        "export interface Api {\n"
        "  call(opts: { retries: number }): Promise<void>;\n"
        "}\n"
        "declare function configure(o: { a: string }): void;\n"
        "export const make = (o: { a: string }) => ({\n"
        "  a: o.a,\n"
        "});\n"
    )
    parsed = parse("typescript", "s.ts", text)

    assert parsed is not None
    assert [(n.qualname, n.header_end, n.signature) for n in parsed.nodes[1:]] == [
        ("s.Api", 1, "export interface Api"),
        ("s.Api.call", 2, "call(opts: { retries: number }): Promise<void>"),
        ("s.configure", 4, "declare function configure(o: { a: string }): void"),
        ("s.make", 5, "export const make = (o: { a: string }) =>"),
    ]


def test_docstring_is_the_first_paragraph_folded_and_capped() -> None:
    long = "word " * 60
    text = f"// {long}\n// more of it\n//\n// Second paragraph.\nfunc f() {{}}\n"
    parsed = parse("go", "d.go", "package d\n\n" + text)

    assert parsed is not None
    assert parsed.nodes[1].docstring == f"{long}more of it"[:200].rstrip()


def test_a_comment_after_code_or_apart_from_the_definition_is_no_docstring() -> None:
    text = "const X: u8 = 1; // trailing\nfn f() {}\n\n// apart\n\nfn g() {}\n//! in\nfn h() {}\n"
    parsed = parse("rust", "d.rs", text)

    assert parsed is not None
    assert [n.docstring for n in parsed.nodes] == ["", "", "", ""]


def test_output_is_deterministic() -> None:
    case = CASES["typescript"]

    assert parse("typescript", case.path, case.source) == parse(
        "typescript", case.path, case.source
    )


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_function_a_task_names_ranks_first(language: str, tmp_path: Path) -> None:
    case = CASES[language]
    root = make_git_repo(tmp_path / "repo", {case.path: case.source,
                                             case.neighbour[0]: case.neighbour[1]})

    result = retrieve(case.task, root)

    [(first, last)] = [(row[2], row[3]) for row in case.nodes if row[0] == case.answer]
    top = result.candidates[0].candidate
    assert (top.qualname, top.span) == (qualified(case, case.answer), Span(case.path, first, last))


def test_a_file_that_parses_in_part_is_indexed_and_listed(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "r", {
        "geo/point.go": "package geo\n\nfunc Dist() int {\n\treturn 1\n}\n\nfunc (\n",
    })
    result = retrieve("Dist returns the wrong distance", root)
    assert result.index.failures == (
        ("geo/point.go", "partial", "indexed around code that does not parse at line(s) 7"),
    )
    top = result.candidates[0].candidate
    assert (top.qualname, top.span.start_line, top.span.end_line) == ("geo.point.Dist", 3, 5)
