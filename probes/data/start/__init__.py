"""Data of probes.start_fragments: words a reply may open with in lower case, per locale."""
