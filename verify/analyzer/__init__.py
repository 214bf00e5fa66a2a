# The kernel analyzer (docs/VERIFICATION.md, "The kernel analyzer"; README.md: its layers).
