"""Built-in reconcilers, one module per kind (`<Kind>Reconciler` in `reconcilers/kinds/<kind>.py`)."""
