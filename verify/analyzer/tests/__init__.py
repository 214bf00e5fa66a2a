# Unit tests of the analyzer's layers (no build needed): python3 -m pytest -q verify/analyzer/tests
