"""`actors dashboard`: the operator's local web view, and the `/metrics` it serves."""
