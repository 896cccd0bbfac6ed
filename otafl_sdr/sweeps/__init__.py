"""Many runs at once: grids of runs (sweep, engines, plots), mechanisms at equal privacy (compare, stats,
report) and the results pages generated from a compare folder (page)."""
