"""Console benchmark: server time of the overview, a resources page and a detail page with 10k resources and
1M transitions on PostgreSQL."""
