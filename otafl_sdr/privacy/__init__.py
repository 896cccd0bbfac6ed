"""Accountants and the privacy ledger. Importing registers the accountants by name."""
