"""What compiling buys each slice of the GPU plan, judged against the newest compiled probe
(:func:`headlab.workflow.gpu_measures.measured_compile`; docs/gpu-cluster.md, "Compiled
trainings").

- :func:`compile_gains`: the steps each ready slice's trainings would reach compiled over
  eager in one sitting; :func:`compile_wanted`: the mode each should train with (off until
  the CUDA suite has shown compiled models of the slice's kinds training as the eager ones:
  :func:`slices_unproven`);
- :func:`stale_compile`: a ``throughput stale`` line for each compile key of the plan
  (``sitting.compile``, a slice's ``compile``) that says otherwise;
- :func:`stale_compiled_figures`: the plan's ``throughput.compiled`` (what a compiled slice's
  steps are counted by) against the probe;
- :func:`compile_line`: the queue's ``compile:`` line.
"""
from __future__ import annotations

from collections.abc import Iterable

from headlab.workflow.gpu_measures import CompileMeasured
from headlab.workflow.gpu_plan import RERUN_MIN_GAIN, SPEED_TOLERANCE, Plan


def compile_gains(plan: Plan, measure: CompileMeasured) -> dict[str, float | None]:
    """Ready slice -> the steps its trainings would reach compiled over those they reach
    eager in one sitting (:meth:`CompileMeasured.steps_gain` over :attr:`Slice.steps_window_s`:
    the compile falls inside the window, after the first batch)."""
    return {found.name: measure.steps_gain(found.steps_window_s) for found in plan.slices if found.entry["ready"]}


def compile_pays(gains: dict[str, float | None]) -> bool | None:
    """Whether compiling pays in each of these slices' sittings: at least :data:`RERUN_MIN_GAIN`
    times the steps (what a rerun must add too; under it, a compile's risks buy too little).
    None: not known (a probe stopped while compiling, before a window would have run out)."""
    if not gains or any(gain is None for gain in gains.values()):
        return None
    return all(gain >= RERUN_MIN_GAIN for gain in gains.values())


def slices_unproven(plan: Plan, measure: CompileMeasured, slice_names: Iterable[str]) -> str | None:
    """Why the CUDA suites do not yet show that compiled models of these slices' kinds and
    mixers train as the eager ones on the GPU (:meth:`CompileMeasured.unproven`); None: they
    show it, or no slice is named. A name the plan lacks is a KeyError, not a proof."""
    slices = {found.name: found for found in plan.slices}
    kinds = set().union(*(slices[name].compiled_kinds for name in slice_names))
    return measure.unproven(kinds) if kinds else None


def _held(plan: Plan, measure: CompileMeasured, slice_names: Iterable[str]) -> tuple[list[str], str | None]:
    """(the slices whose kinds the CUDA suites do not show compiled, why)."""
    held = [name for name in slice_names if slices_unproven(plan, measure, [name]) is not None]
    return held, slices_unproven(plan, measure, held)


def compile_wanted(plan: Plan, measure: CompileMeasured | None) -> dict[str, str]:
    """Ready slice -> the ``-compile`` the newest compiled probe says its sitting should train
    with: the probe's mode where it pays in that slice's window, else off (no probe, or not
    known to pay: a mode is set only where a measure says it pays). Off until the CUDA suite
    has shown compiled models of the slice's kinds and mixers training as the eager ones on
    the GPU (:func:`slices_unproven`): a faster training of another function would publish
    rows of a model nobody asked for. Each slice is judged by its own kinds' cases, so a
    failure of paper C's kinds keeps C eager, not paper A's patterns."""
    if measure is None:
        return {found.name: "off" for found in plan.slices if found.entry["ready"]}
    return {name: measure.mode if compile_pays({name: gain}) and slices_unproven(plan, measure, [name]) is None
            else "off"
            for name, gain in compile_gains(plan, measure).items()}


def _gains_text(gains: dict[str, float | None]) -> str:
    return ", ".join(f"{name} {'?' if gain is None else f'{gain:.2f}x'}" for name, gain in gains.items())


def _compile_line(plan: Plan, key: str, mode: str, measure: CompileMeasured | None, gains: dict[str, float | None],
                  wanted: str, inherited: bool = False) -> str:
    """One ``throughput stale`` line: the plan's ``key`` says ``mode`` (``inherited``: by
    ``sitting.compile``, the key itself absent) where the measure says ``wanted`` (``gains``:
    the slices the key decides)."""
    said = f"{mode}, by sitting.compile" if inherited else mode
    if measure is None:
        return (f"{key}: the plan says {said}, and no published sitting's probe has compiled its model: "
                f"off until one has measured what it buys")
    if mode not in ("off", measure.mode):
        return f"{key}: the plan says {said}, and the newest compiled probe ({measure.sitting}) measured " \
               f"{measure.mode}: set {wanted}"
    held, why = _held(plan, measure, gains)
    # the slices the suites show compiled, which the line judges by their gains alone
    shown = [name for name in gains if name not in held]
    if measure.error is not None:
        verdict = "a compiled training would stop there"
    elif all(gain is None for gain in gains.values()):
        verdict = "whether it pays is not known" + (f", and {why}" if why else "")
    else:
        verdict = f"a sitting's trainings would reach {_gains_text(gains)} the steps they reach eager"
        if why is not None:
            verdict += f", but {why}" + (f" ({', '.join(held)})" if shown else "")
        if wanted == "off" and shown:
            # each slice with its own reason: one the suites hold back is not "under" anything
            verdict += (f", under {RERUN_MIN_GAIN:g}x" if why is None else
                        f", and {', '.join(shown)} under {RERUN_MIN_GAIN:g}x") + \
                (" or not known" if any(gains[name] is None for name in shown) else "")
    return f"{key}: the plan says {said}; {measure.described()}: {verdict}: set {wanted}"


def stale_compile(plan: Plan, measure: CompileMeasured | None) -> list[str]:
    """A line for each key of the plan whose ``-compile`` disagrees with the newest sitting's
    compiled probe in a ready slice's window (:func:`compile_wanted`): off where compiling pays,
    a mode that no probe measured as the newest, or one that does not pay or is not known to.
    ``sitting.compile`` is judged by the slices without their own ``compile``, and should say
    what most of them want (a tie: off); a line on it names the slices' keys that must then say
    otherwise, and a slice wanting other than ``sitting.compile`` says gets a line of its own.
    The plan's ``seconds_per_step`` are eager ones (:func:`measured_speed` leaves compiled
    trainings' clocks out); a compiled slice's steps are counted by ``throughput.compiled``
    (:attr:`Slice.compile_gain`, checked by :func:`stale_compiled_figures`)."""
    wanted = compile_wanted(plan, measure)
    gains = compile_gains(plan, measure) if measure is not None else {name: None for name in wanted}
    ready = [found for found in plan.slices if found.entry["ready"]]
    lines = [_compile_line(plan, found.compile_key, found.compile, measure, {found.name: gains[found.name]},
                           wanted[found.name])
             for found in ready if "compile" in found.entry and found.compile != wanted[found.name]]
    inheriting = [found for found in ready if "compile" not in found.entry]
    modes = [wanted[found.name] for found in inheriting]
    # the mode most of them want (a tie: off, the mode nothing has to pay back)
    most = max(dict.fromkeys(modes), key=lambda mode: (modes.count(mode), mode == "off"), default=plan.compile)
    if most != plan.compile:
        # the gains of the slices it decides; those that want otherwise are named after it
        line = _compile_line(plan, "sitting.compile", plan.compile, measure,
                             {found.name: gains[found.name] for found in inheriting if wanted[found.name] == most}, most)
        lines.append(line + "".join(f", and slices.{found.name}.compile: {wanted[found.name]} "
                                    f"({_gains_text({found.name: gains[found.name]})})"
                                    for found in inheriting if wanted[found.name] != most))
    else:
        lines += [_compile_line(plan, f"slices.{found.name}.compile", plan.compile, measure,
                                {found.name: gains[found.name]}, wanted[found.name], inherited=True)
                  for found in inheriting if wanted[found.name] != plan.compile]
    # a key that decides no ready slice (a slice not ready, sitting.compile where every ready
    # slice has its own) is not weighed; a mode on it is still one a probe must have measured
    idle = [(found.compile_key, found.compile) for found in plan.slices if not found.entry["ready"]
            and "compile" in found.entry] + ([] if inheriting else [("sitting.compile", plan.compile)])
    lines += [_compile_line(plan, key, mode, measure, {}, "off") for key, mode in idle
              if mode != "off" and (measure is None or measure.mode != mode)]
    return lines


def compile_line(plan: Plan, measure: CompileMeasured | None) -> str:
    """The queue's line on compiled trainings: the newest measure, what it buys each ready
    slice's sitting and how the plan trains them."""
    ready = [found for found in plan.slices if found.entry["ready"]]
    trained: dict[str, list[str]] = {}
    for found in ready:
        trained.setdefault(found.compile, []).append(found.name)

    def how(mode: str) -> str:
        return "eager" if mode == "off" else f"compiled ({mode})"

    if all("compile" not in found.entry for found in ready):
        trains = "eager (sitting.compile off)" if plan.compile == "off" else how(plan.compile)
    else:
        trains = "; ".join(f"{', '.join(names)} {how(mode)}" for mode, names in trained.items())
    if measure is None:
        return f"compile: no published sitting's probe has compiled its model yet; the plan trains {trains}"
    if measure.error is not None:
        return f"compile: {measure.described()}: a compiled training would stop there; the plan trains {trains}"
    gains = compile_gains(plan, measure)
    # each slice's verdict: pays (True), not (False), not known (None: a probe stopped while compiling)
    verdicts = {name: compile_pays({name: gain}) for name, gain in gains.items()}
    if len(set(verdicts.values())) <= 1:
        verdict = {True: "pays", False: f"does not pay (under {RERUN_MIN_GAIN:g}x)",
                   None: "not known to pay"}[next(iter(verdicts.values()), None)]
    else:
        verdict = ", ".join(f"{label} {', '.join(name for name, said in verdicts.items() if said is value)}"
                            for value, label in ((True, "pays in"), (False, "not in"), (None, "not known in"))
                            if value in verdicts.values())
    held, why = _held(plan, measure, gains)
    if why is not None:
        verdict += f", but {why}" + (f" (kept eager: {', '.join(held)})" if len(held) < len(gains) else "")
    return (f"compile: {measure.described()}; a sitting's trainings would reach {_gains_text(gains)} the steps they "
            f"reach eager: {verdict}; the plan trains {trains}")


def stale_compiled_figures(plan: Plan, measure: CompileMeasured | None) -> list[str]:
    """A line where the plan's ``throughput.compiled`` (the steps a compiled slice's sitting
    reaches) is further than :data:`SPEED_TOLERANCE` (or 5 s of compile) from the newest
    compiled probe, or in another mode, or absent while a ready slice compiles in the probe's
    mode. Nothing to check against without a probe that stepped compiled (the compile lines
    say what to do then)."""
    figures = plan.throughput.get("compiled")
    if measure is None or measure.error is not None:
        return []
    if measure.speedup is None:
        # stopped while compiling: its compile_s is a lower bound, which written figures must reach
        if figures and figures["mode"] == measure.mode and \
                figures["compile_s"] < measure.compile_s - max(SPEED_TOLERANCE * measure.compile_s, 5.0):
            return [f"throughput.compiled: the plan says compile_s {figures['compile_s']:g}; {measure.described()}: "
                    f"write compile_s {measure.compile_s:.0f} at least"]
        return []
    compiles = any(found.entry["ready"] and found.compile == measure.mode for found in plan.slices)
    measured = f"mode: {measure.mode}, speedup: {measure.speedup:.2f}, compile_s: {measure.compile_s:.0f}"
    if figures is None:
        return [f"throughput.compiled: the plan says nothing, and a ready slice compiles in {measure.mode}; "
                f"{measure.described()}: write {{{measured}}}"] if compiles else []
    off = (figures["mode"] != measure.mode
           or abs(figures["speedup"] - measure.speedup) > SPEED_TOLERANCE * measure.speedup
           or abs(figures["compile_s"] - measure.compile_s) > max(SPEED_TOLERANCE * measure.compile_s, 5.0))
    if not off:
        return []
    written = f"mode: {figures['mode']}, speedup: {figures['speedup']:g}, compile_s: {figures['compile_s']:g}"
    return [f"throughput.compiled: the plan says {{{written}}}; {measure.described()}: write {{{measured}}}"]
