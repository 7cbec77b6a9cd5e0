"""Reporting: tables (CSV + Markdown + LaTeX) and figures (PNG + PDF) from tidy result CSVs."""
