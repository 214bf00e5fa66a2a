# python3 -m analyzer (with verify/ on the path): the same as verify/analyzer/vosti-analyze.
import sys

from .cli import main

sys.exit(main(sys.argv[1:]))
