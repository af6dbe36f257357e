"""Reports from the ledger: health over time per model (frames with pandas, figures with
matplotlib, a self-contained HTML page). Sits above the quarantine adapters (it reads the
ledger) and below flows (the daily report flow) and the CLI (`canary report`)."""
