"""Console views: thin, each reads through the selectors and acts through the services the API uses."""
