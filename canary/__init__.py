"""provider-canary: shared settings and the `canary` command line."""
