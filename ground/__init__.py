"""The ground floor: what every other package stands on and nothing of ours.

    settings        the one settings object (`CANARY_*`)
    db              opening SQL engines (ledger, routing events, tool store)
    prefect_server  the embedded local Prefect server and `use_api`
    clock           UTC normalisation
    slugs           model ids as name parts

This package imports nothing of the project (an import contract checks it).
"""
