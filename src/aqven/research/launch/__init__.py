"""Launch plans: what a series will run, how precise it can be, under which cap."""
