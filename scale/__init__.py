"""Scale-out that has run: a throwaway PostgreSQL cluster (`scale.postgres`) and the scale test
(`python -m scale.slot_test`, `make scale-test`): a Prefect server and the ledger on
PostgreSQL, a process work pool with two `prefect worker` processes, one round deployment per
model rendered by `deployments.render`, and one scheduled slot of N models x M endpoints on
the fleet, then its per-round costs (`scale.costs`: CPU from /proc, PostgreSQL's counters,
the ledger's footprint); `scale.model` turns those into the capacity model of
docs/SCALE.md. Not part of `make test`."""
