# The checks: information flow per kernel, and the comparisons of the paths a batch may choose.
