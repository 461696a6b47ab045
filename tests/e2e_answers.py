"""Scripted model answers for the e2e tests (tests/test_e2e.py): what a model might write."""

from __future__ import annotations

# calc-1 with ctx04's slice: a search/replace block in a fence, with prose around it.
DIVIDE_BLOCKS = '''The divisor is never checked. Here is the fix:

calc/ops.py
```python
<<<<<<< SEARCH
    """Divide a by b."""
    return round(a / b, PRECISION)
=======
    """Divide a by b."""
    if b == 0:
        return 0.0
    return round(a / b, PRECISION)
>>>>>>> REPLACE
```
'''
# calc-1 with the oracle slice: a unified diff whose line numbers and counts are wrong.
DIVIDE_DIFF = '''```diff
--- a/calc/ops.py
+++ b/calc/ops.py
@@ -1,3 +1,9 @@
 def divide(a, b):
     """Divide a by b."""
+    if not b:
+        return 0.0
     return round(a / b, PRECISION)
```
'''
# calc-1 without context: the model guesses the code, and the guess is not in the file.
GUESSED = '''calc/ops.py
<<<<<<< SEARCH
def divide(x, y):
    return x / y
=======
def divide(x, y):
    return x / y if y else 0.0
>>>>>>> REPLACE
'''
# calc-2 without context: two blocks in one file, the second after the first.
MEAN_BLOCKS = '''calc/ops.py
<<<<<<< SEARCH
PRECISION = 2
=======
PRECISION = 4
>>>>>>> REPLACE

calc/ops.py
<<<<<<< SEARCH
        total = sum(values)
        return total / len(values)
=======
        if not values:
            return 0.0
        total = sum(values)
        return total / len(values)
>>>>>>> REPLACE
'''
