"""The quarantine's adapters: where its pure core meets Prefect and SQL.

store      the state block per model (revision-checked writes under a lock)
incidents  runtime incident exclusions (a Prefect Variable per model)
locking    the per-model lock (a Prefect global concurrency limit)
ledger     probe outcomes and decisions in SQL (pandas frames for analysts)
ignore     reading the three exclusion layers and merging them
admin      status, lift and exclusions as functions of a model and `now`
retention  the ledger's rows older than a window deleted by time, every prune recorded
"""
