"""Data files of probes.language / probes.integrity (marker word lists, common Han characters)."""
