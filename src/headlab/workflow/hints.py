"""Hints for a failed workflow run: which rule hit its memory limit and what to raise.

Called from the Snakefile's ``onerror`` (:func:`print_memory_hints`)."""
from __future__ import annotations

import re
import sys


# what SLURM (and the kernel) write when a job is killed at its memory limit
_OUT_OF_MEMORY = ("exceeded memory limit", "Exceeded job memory limit", "OUT_OF_MEMORY", "oom-kill",
                  "Out Of Memory")


def memory_hints(log_text: str, read=lambda path: open(path, errors="replace").read()) -> list[str]:
    """One line per failed job of a snakemake log that was killed at its memory limit:
    the rule and the resource to raise. The SLURM executor's own message says only
    ``FAILED``; the evidence is in the job's logs (listed on the ``log:`` line of each
    ``Error in rule`` block) or in the SLURM state (``OUT_OF_MEMORY`` with cgroups)."""
    hints = []
    for block in re.split(r"^(?=Error in rule )", log_text, flags=re.M)[1:]:
        rule = re.match(r"Error in rule (\S+?):", block)[1]
        block = block.split("\n\n", 1)[0]
        texts = [block]
        logs = re.search(r"^\s*log: (.*?)(?: \(check log file\(s\) for error details\))?$", block, re.M)
        for path in (logs[1].split(", ") if logs else []):
            try:
                texts.append(read(path.strip()))
            except OSError:
                pass
        if any(marker in text for text in texts for marker in _OUT_OF_MEMORY):
            jobid = re.search(r"^\s*jobid: (\d+)$", block, re.M)
            mem = jobid and re.search(rf"^\s*jobid: {jobid[1]}\n(?:\s+\w+: .*\n)*?\s+resources: .*\bmem_mb=(\d+)",
                                      log_text, re.M)
            limit = f" (mem_mb={mem[1]})" if mem else ""
            # not `--set-resources` on the command line: it replaces the profile's set-resources
            hints.append(f"headlab: rule {rule} exceeded its memory limit{limit}: raise mem_mb for it "
                         f"in the profile (`set-resources: {rule}: mem_mb: …`)")
    return hints


def print_memory_hints(logs) -> None:
    """``onerror``: the hints of ``memory_hints`` for snakemake's log file(s), on stderr."""
    text = "".join(open(path, errors="replace").read() for path in ([logs] if isinstance(logs, str) else logs))
    for hint in memory_hints(text):
        print(hint, file=sys.stderr)
