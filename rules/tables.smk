# Tables: one generic rule; each study's builder lives in src/headlab/studies/.
from headlab.studies import STUDIES


rule table:
    input:
        lambda w: STUDIES[w.study].inputs(config, w.study, SCORES),
    output:
        csv=f"{TABLES}/{{study}}.csv",
        md=f"{TABLES}/{{study}}.md",
        tex=f"{TABLES}/{{study}}.tex",
    wildcard_constraints:
        study="|".join(STUDIES),
    params:
        # the resolved config travels with the job (and a change to it reruns the table)
        config=json.dumps(config, sort_keys=True),
    log:
        f"{LOGS}/tables/{{study}}.log",
    conda:
        "../envs/eval.yaml"
    shell:
        "headlab study-table --study {wildcards.study} --scores {SCORES} "
        "--out {TABLES}/{wildcards.study} --config-json {params.config:q} 2> {log}"
