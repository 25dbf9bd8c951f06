"""healthcheck."""
