"""API benchmark: p50/p95 of resource pages and the transitions feed with 10k resources and 1M transitions."""
