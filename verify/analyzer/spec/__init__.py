# The spec: the kernel entries, the deployment's shapes and the known gaps (.toml), and their loader.
