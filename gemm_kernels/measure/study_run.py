"""Running one study (see `studies`): its steps timed in this process, each beside its
reference, profiled under one Nsight Compute run with the study's counters, or run for
seconds beside the reference with the clock and power sampled."""
from __future__ import annotations

from gemm_kernels.measure import check, clocks, ncu, profile, record, studies


def check_steps(name: str, shapes=None, log=print) -> list[str]:
    """Each distinct configuration of study `name` checked (`check.check_all`: plain and
    general alpha/beta) on the ragged shapes, or on `shapes`, before anything of it is
    timed: a study must not time a wrong kernel. The failures, one line each; a shape a
    kernel refuses is not a failure (it would not be timed there either)."""
    failed, seen = [], set()
    for step, full, _ in studies.launches(studies.get(name)):
        kernel = studies.step_kernel(step)
        key = (kernel.name, repr(sorted(full.items())))
        if key in seen:
            continue
        seen.add(key)
        results = check.check_all(kernel, full, shapes)
        bad = [r for r in results if r.ok is False]
        log(f"  {name} {step.label}: {len(results) - len(bad)} of {len(results)} checks "
            f"right or refused" + "".join(f"\n    WRONG {r.shape}: {r.message}" for r in bad))
        failed += [f"{step.label} at {r.shape}: {r.message}" for r in bad]
    return failed


def study_rows(name: str, log=print) -> list[dict]:
    """Every step of one study in this process: timed (each row with its reference),
    profiled under one ncu run with the study's counters, or run for seconds with its
    clock sampled (each row with its reference, run the same way)."""
    study = studies.get(name)
    bad = studies.problems(study)
    if bad:
        raise ValueError("; ".join(bad))
    if study.kind == "ncu":
        metrics = studies.pick_metrics(study.metrics, ncu.known_metrics())
        log(f"{name}: {len(metrics)} counters over {len(study.steps)} steps")
        return profile.run(name, metrics)
    if study.kind == "time":
        wrong = check_steps(name, log=log)
        if wrong:
            raise ValueError(f"{name}: not timed, wrong results: " + "; ".join(wrong))
    # registry kernels compile in parallel first; a timed variant compiles at its launch
    record.warm([(step.kernel, full) for step, full, _ in studies.launches(study)
                 if step.variant is None])
    rows = []
    for step, full, shape in studies.launches(study):
        kernel = studies.step_kernel(step) if step.variant else step.kernel
        if study.kind == "clocks":
            rows.append(record.stamp({**clocks.measure(kernel, shape, full), "study": name}))
            log(f"  {name} {'x'.join(map(str, shape))} {step.label}: "
                f"{clocks.text(rows[-1])}")
            continue
        rows.append(record.measure(kernel, shape, full))
        log(f"  {name} {'x'.join(map(str, shape))} {step.label}: {record.rate_text(rows[-1])}")
    for shape in study.shapes:
        for ref in study.references:
            rows.append(record.measure(ref, shape))
            log(f"  {name} {'x'.join(map(str, shape))} {ref}: {record.rate_text(rows[-1])}")
    return rows
