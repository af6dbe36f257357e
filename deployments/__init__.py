"""How the flows are scheduled and served: `local.py` serves them from one
process (`canary serve`); `render.py` writes `prefect.yaml` for work pools."""
