"""A report's lines that the repository's issue template wrote are not searched."""

from __future__ import annotations

from pathlib import Path

from conftest import SHOP, make_git_repo

from ctx04_core import retrieve
from ctx04_core.stages.templates import normalized, template_paths, without_template_lines
from ctx04_core.types import Diagnostic

FORM = """name: Bug report
description: Something in the shop is wrong
body:
  - type: checkboxes
    attributes:
      label: Checklist
      options:
        - label: "I searched the **existing issues** for this bug"
          required: true
  - type: textarea
    attributes:
      label: Reproduction
      value: |
        from shop.inventory import Inventory
        # your code here
  - type: input
    attributes:
      label: Version
"""

# As GitHub writes a report filed through FORM.
REPORT = """Cart.total() rounds the discounted subtotal wrongly

### Checklist

- [X] I searched the **existing issues** for this bug

### Reproduction

```python
from shop.inventory import Inventory
# your code here
cart = Cart(Inventory({}, {}))
```

### Version

1.2
"""


def test_a_line_is_compared_without_its_markup() -> None:
    assert normalized('        - label: "I searched the **existing issues** for this bug"') == (
        "i searched the **existing issues** for this bug"
    )
    assert normalized("- [X] I searched the **existing issues** for this bug") == (
        "i searched the **existing issues** for this bug"
    )
    assert normalized("      label: Reproduction") == normalized("### Reproduction")
    assert normalized("**Reproduction**") == "reproduction"
    assert normalized("      value: |") == ""
    assert normalized("---") == normalized("- [ ]") == normalized("1.2") == ""


def test_the_template_s_lines_are_emptied_the_title_and_fences_kept() -> None:
    template = frozenset(filter(None, map(normalized, FORM.splitlines())))
    searched, dropped = without_template_lines(REPORT, template)
    assert dropped == 6
    assert searched == (
        "Cart.total() rounds the discounted subtotal wrongly\n\n\n\n\n\n\n\n```python\n"
        "\n\ncart = Cart(Inventory({}, {}))\n```\n\n\n\n1.2\n"
    )
    # A title that a template also holds is still the title.
    assert without_template_lines("Checklist\nChecklist\n", template) == ("Checklist\n\n", 1)


def test_a_report_filed_through_the_form_searches_what_the_reporter_wrote(
    tmp_path: Path,
) -> None:
    shop = make_git_repo(tmp_path / "shop", {**SHOP, ".github/ISSUE_TEMPLATE/bug.yml": FORM})
    plain = make_git_repo(tmp_path / "plain", SHOP)

    result = retrieve(REPORT, shop)
    without_form = retrieve(REPORT, plain)

    assert template_paths(shop) == [".github/ISSUE_TEMPLATE/bug.yml"]
    # The form's prefilled import is no search term; the reporter's own use
    # of Inventory still is.
    assert result.query.identifiers == without_form.query.identifiers == (
        "Cart.total", "Cart", "Inventory", "total", "subtotal",
    )
    assert (result.query.unresolved, without_form.query.unresolved) == ((), ("shop.inventory",))
    assert Diagnostic(
        "omitted", "issue template", detail="6 task lines not searched"
    ) in result.diagnostics
    assert result.context.text.endswith(
        "Coverage: omitted 1 (issue template: 6 task lines not searched); "
        "recall is not exhaustive.\n"
    )
    assert result.candidates[0].candidate.qualname == "shop.cart.Cart.total"


def test_a_template_folder_that_leads_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "bug.yml").write_text(FORM)
    shop = make_git_repo(tmp_path / "shop", SHOP)
    (shop / ".github").mkdir()
    (shop / ".github/ISSUE_TEMPLATE").symlink_to(outside, target_is_directory=True)
    (shop / "ISSUE_TEMPLATE.md").symlink_to(outside / "bug.yml")

    result = retrieve(REPORT, shop)

    assert result.query.unresolved == ("shop.inventory",)
    assert not [d for d in result.diagnostics if d.reason == "issue template"]
    assert Diagnostic(
        "excluded", "outside the repository", ".github/ISSUE_TEMPLATE/bug.yml"
    ) in result.diagnostics
