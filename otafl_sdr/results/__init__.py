"""A results folder: its files and their contract (files, run_folder, folders, safe_files), its figures
(run_plots, style), its tracking (tracking) and its tidy DataFrames (tidy)."""
