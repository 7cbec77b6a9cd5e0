"""``headlab study-table``: one output of a study (a table, a figure or its README), rendered.

A study builds data (a :class:`headlab.studies.tables.Table`, or a tidy frame and plot
keywords, its judged claims, or README text); this module writes it (``PREFIX.csv/md/tex``,
``.png/pdf/csv``, ``effects.csv`` or ``.md``). The generic rules of ``rules/tables.smk`` call it for every study output.
"""
from __future__ import annotations

import argparse

from headlab import studies
from headlab.io import atomic_write
from headlab.report.figures import plot, save
from headlab.report.tables import write_table


def main(argv: list[str]) -> int:
    """``headlab study-table --study S --name N --results DIR --config-json JSON --out PREFIX``."""
    parser = argparse.ArgumentParser(prog="headlab study-table")
    parser.add_argument("--study", required=True, choices=sorted(studies.STUDIES), help="the study whose output is built")
    parser.add_argument("--name", required=True, help="a table, a figure, or README")
    parser.add_argument("--results", required=True, help="the workflow's results folder")
    parser.add_argument("--config-json", required=True, action="append",
                        help="the config, or slices of it (repeatable; see config_slices)")
    parser.add_argument("--out", required=True, help="output prefix (PREFIX.csv/md/tex, .png/pdf/csv, or .md)")
    args = parser.parse_args(argv)
    config = studies.merge_config(args.config_json)
    study = studies.STUDIES[args.study]
    if args.name == "README":
        files = study.files(config, config["studies"][args.study], args.results)
        with atomic_write(args.out + ".md") as handle:
            provenance = {**studies.provenance(config), **studies.data_provenance(config, args.study, args.results)}
            handle.write(study.readme(files, provenance))
    elif args.name == studies.EFFECTS:
        frame = studies.builder(config, args.study, args.name, args.results)[1]()
        with atomic_write(args.out + ".csv") as handle:
            frame.to_csv(handle, index=False)
    elif args.name in study.tables:
        table, tidy = studies.builder(config, args.study, args.name, args.results)[1]()
        write_table(table, args.out)
        with atomic_write(args.out + ".tidy.csv") as handle:      # one row per run (seed)
            tidy.to_csv(handle, index=False)
    else:
        tidy, style = studies.builder(config, args.study, args.name, args.results)[1]()
        with atomic_write(args.out + ".csv") as handle:
            tidy.to_csv(handle, index=False)
        save(plot(tidy, **style), args.out)
    return 0
