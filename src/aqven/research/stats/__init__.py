"""Statistics a series decides on: intervals, betting bounds, sequences, judge correction, planning, verdicts."""
