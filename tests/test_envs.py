"""The per-rule conda environments (`--sdm conda`, envs/*.yaml) hold everything their rules'
commands import: every `headlab COMMAND` of a rule is followed through headlab's own modules
(imports inside functions included), and each third-party module it reaches must come from
a package of the rule's env file or its post-deploy script."""
from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

import pytest
import yaml

from headlab.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
# import name's distribution -> the name conda-forge/pytorch channels give it
CONDA_NAMES = {"torch": "pytorch"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def rule_commands() -> dict[str, tuple[str, set[str]]]:
    """rule -> (its env file, the headlab subcommands its shell command runs)."""
    rules = {}
    for smk in sorted((ROOT / "rules").glob("*.smk")):
        for block in re.split(r"^(?=rule \w+:)", smk.read_text(), flags=re.M)[1:]:
            name = re.match(r"rule (\w+):", block)[1]
            env = re.search(r'^\s+conda:\s*\n\s+"\.\./(envs/[\w.-]+\.yaml)"', block, re.M)
            commands = set(re.findall(r"\bheadlab ([a-z][a-z-]*)", block.split("shell:", 1)[-1]))
            if commands or env:
                rules[name] = (env[1] if env else None, commands)
    return rules


def _module_file(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec and spec.origin and spec.origin.endswith(".py") else None


def third_party_imports(module: str, seen: set[str] | None = None) -> set[str]:
    """Top-level names of the non-headlab modules that `module` imports, following headlab's
    own modules (their packages' __init__ included)."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    found: set[str] = set()
    parts = module.split(".")
    for i in range(1, len(parts)):  # importing a.b.c runs a/__init__ and a/b/__init__
        found |= third_party_imports(".".join(parts[:i]), seen)
    path = _module_file(module)
    if path is None:
        return found
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            top = name.split(".")[0]
            if top == "headlab":
                if _module_file(name):
                    found |= third_party_imports(name, seen)
            elif top and top not in sys.stdlib_module_names and top != "__future__":
                found.add(top)
    return found


def env_packages(env_file: str) -> set[str]:
    """Package names an env provides: its conda and pip dependencies, and what its
    post-deploy script pip-installs."""
    env = yaml.safe_load((ROOT / env_file).read_text())
    names = set()
    for dep in env["dependencies"]:
        for spec in dep["pip"] if isinstance(dep, dict) else [dep]:
            names.add(_norm(re.split(r"[<>=!~ \[]", spec, maxsplit=1)[0]))
    post = ROOT / env_file.replace(".yaml", ".post-deploy.sh")
    if post.exists():
        for line in post.read_text().splitlines():
            if "pip install" in line:
                names |= {_norm(spec.split("==")[0]) for spec in re.findall(r"\b([A-Za-z][\w.-]*==[\w.]+)", line)}
    return names


@functools.cache
def _packages_distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def distributions(top: str) -> list[str]:
    return _packages_distributions().get(top, [])


RULES = rule_commands()


def test_rule_commands_found():
    assert RULES["train"] == ("envs/onmt.yaml", {"train"})
    assert RULES["bleu"][0] == "envs/eval.yaml" and "bleu" in RULES["bleu"][1]
    assert all(command in COMMANDS for _, commands in RULES.values() for command in commands)


def test_import_scan_follows_headlab_modules_into_functions():
    # onmt_run -> plugin -> compat imports torch and onmt; eval.bleu imports sacrebleu
    assert {"torch", "onmt"} <= third_party_imports("headlab.engine.run")
    assert "sacrebleu" in third_party_imports("headlab.eval.bleu")


@pytest.mark.parametrize("rule", sorted(r for r, (env, commands) in RULES.items() if commands))
def test_env_file_lists_what_the_rule_imports(rule):
    env_file, commands = RULES[rule]
    assert env_file, f"rule {rule} runs headlab but has no conda env"
    provided = env_packages(env_file) | {"headlab"}
    missing = {}
    for command in commands:
        for top in third_party_imports(COMMANDS[command][0]):
            dists = distributions(top)
            assert dists, f"{top} (imported by headlab {command}) is not installed here"
            if not any(_norm(CONDA_NAMES.get(d, d)) in provided or _norm(d) in provided for d in dists):
                missing[top] = dists
    assert not missing, f"rule {rule} ({env_file}) imports modules of packages its env does not list: {missing}"


# -- channels and names, statically (no network) -----------------------------------------

ENV_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "envs").glob("*.yaml"))
#: conda package names each channel publishes, for the names the env files use (checked by
#: hand on the channel; add a name here when an env file gains a conda dependency)
CHANNEL_PACKAGES = {
    "conda-forge": {"python", "pip", "numpy", "pandas", "matplotlib", "seaborn", "pyyaml", "pytorch",
                    "pytorch-cpu", "pytorch-gpu", "scipy", "nltk", "spacy", "sacrebleu", "sacremoses"},
}
#: channels whose packages need `defaults` (the `pytorch` channel's builds link against MKL and
#: friends from `defaults`, and it stopped publishing at torch 2.5)
NEED_DEFAULTS = {"pytorch", "anaconda"}


def _env(env_file):
    return yaml.safe_load((ROOT / env_file).read_text())


def _conda_names(env) -> list[str]:
    return [re.split(r"[<>=!~ \[]", dep, maxsplit=1)[0] for dep in env["dependencies"] if isinstance(dep, str)]


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_channels_are_consistent(env_file):
    channels = _env(env_file)["channels"]
    assert channels and channels[0] == "conda-forge", f"{env_file}: conda-forge first (strict priority)"
    if "nodefaults" in channels:
        bad = [c for c in channels if c == "defaults" or c in NEED_DEFAULTS]
        assert not bad, f"{env_file}: channel(s) {bad} need `defaults`, which `nodefaults` excludes"
    assert not NEED_DEFAULTS & set(channels), f"{env_file}: torch comes from conda-forge's pytorch"


@pytest.mark.parametrize("env_file", ENV_FILES)
def test_every_conda_package_is_on_a_listed_channel(env_file):
    env = _env(env_file)
    known = set().union(*(CHANNEL_PACKAGES.get(c, set()) for c in env["channels"]))
    missing = [name for name in _conda_names(env) if name not in known]
    assert not missing, f"{env_file}: {missing} not published (by that name) on {env['channels']}"


def test_every_env_file_is_used_by_a_rule():
    used = {env for env, _ in RULES.values() if env}
    assert used == set(ENV_FILES), f"unused: {set(ENV_FILES) - used}, missing: {used - set(ENV_FILES)}"


def test_torch_from_conda_forge_in_the_envs_that_import_it():
    for env_file in ENV_FILES:
        env = _env(env_file)
        imports = set().union(*(third_party_imports(COMMANDS[c][0]) for r, (e, cs) in RULES.items()
                                if e == env_file for c in cs))
        if "torch" in imports:
            assert "pytorch" in _conda_names(env) and "conda-forge" in env["channels"], env_file
