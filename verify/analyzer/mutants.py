# The analyzer's kill table (mutants/kill_table.py): the planted violations must all be rejected.
#   python3 verify/analyzer/mutants.py [--build build]
# The same as `python3 -m analyzer.mutants` with verify/ on the path.
import os
import sys

sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # verify/: the package's parent

from analyzer.mutants.kill_table import main  # noqa: E402

sys.exit(main())
