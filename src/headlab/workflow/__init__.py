"""What the Snakefile calls (the top layer, beside :mod:`headlab.cli`).

``config_types``  gives ``--config`` values the types of ``config/schema.yaml``
``config_check``  checks a config while the DAG is built (one error naming the key)
``publish``       copies a finished study into ``results/published/`` with provenance
``hints``         what to raise when a job hit its memory limit (``onerror``)
``runlock``       ``make run``'s guard rails: a dead run's lock cleared, failed jobs listed
``bundle``        ``headlab gpu-bundle``: one GPU sitting's folder, built from the shipped config
``gpu_runner``    the sitting itself (``run.py``, standard library only): deadline, status, packing
``sitting``       its evaluation and publication (each model at its best validation checkpoint,
                sacreBLEU, provenance; results/published/<slice>/<sitting>/)
``sitting_clock`` each training of a sitting, timed from inside (``headlab.engine.steptime``)
``gpu_plan``      config/gpu-plan.yaml: the queue of slices and the next one to bundle
``rehearsal``     ``make gpu-rehearsal``: the sitting on a CPU, in a venv of the GPU machine's packages
``code_digest``   the code behind a study's rendering or a scorer, as a param: a change reruns what it renders

Model naming (paths, grids, fine-tune segments) is :mod:`headlab.naming`, below every
layer, since the engine, studies and report name models too.
"""
