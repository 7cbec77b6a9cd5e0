"""Study table builders: study name -> (inputs(config, name), build(config, name, inputs, prefix)).

One generic Snakemake rule renders every study; a study = one module here + one entry.
"""
from __future__ import annotations

from headlab.studies import baseline

STUDIES = {
    "baseline": baseline,
}


def main(argv: list[str]) -> int:
    """``headlab study-table --study NAME --scores DIR --out PREFIX --config-json JSON``."""
    import argparse
    import json

    from headlab.report.tables import write_table

    parser = argparse.ArgumentParser(prog="headlab study-table")
    parser.add_argument("--study", required=True, choices=sorted(STUDIES))
    parser.add_argument("--scores", required=True)
    parser.add_argument("--out", required=True, help="output prefix: writes PREFIX.{csv,md,tex}")
    parser.add_argument("--config-json", required=True)
    args = parser.parse_args(argv)
    config = json.loads(args.config_json)
    module = STUDIES[args.study]
    table = module.table(config, args.study, args.scores)
    write_table(table, args.out)
    return 0
