"""Ingest: real sources into one typed item schema. One module per source format."""
