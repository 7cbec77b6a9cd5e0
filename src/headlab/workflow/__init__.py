"""What the Snakefile calls (the top layer, beside :mod:`headlab.cli`).

``config_types``  gives ``--config`` values the types of ``config/schema.yaml``
``config_check``  checks a config while the DAG is built (one error naming the key)
``publish``       copies a finished study into ``results/published/`` with provenance
``hints``         what to raise when a job hit its memory limit (``onerror``)

Model naming (paths, grids, fine-tune segments) is :mod:`headlab.naming`, below every
layer, since the engine, studies and report name models too.
"""
