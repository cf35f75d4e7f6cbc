"""Running one study (see `studies`): its steps timed in this process, each beside its
reference, profiled under one Nsight Compute run with the study's counters, or run for
seconds beside the reference with the clock and power sampled."""
from __future__ import annotations

from gemm_kernels.measure import clocks, ncu, profile, record, studies


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
