# python3 -m analyzer.mutants (with verify/ on the path): the same as verify/analyzer/mutants.py.
import sys

from .kill_table import main

sys.exit(main())
