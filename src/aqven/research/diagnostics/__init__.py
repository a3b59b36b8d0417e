"""`aqven check` for research files: experiments, their cases, and findings."""
