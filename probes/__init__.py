"""The canary's measuring library: discovery, the pinned streaming client and
the contracts (pure functions from transcripts to outcomes). No Prefect here."""
