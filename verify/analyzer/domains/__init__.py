# The abstract domains: intervals, thread values, labels, pointer roots, and the symbolic values.
