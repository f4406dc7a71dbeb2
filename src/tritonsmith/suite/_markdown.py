"""Markdown for suite reports and comparisons."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from tritonsmith.suite._report_model import BASELINES, FAST_P, Metrics, SuiteReport, problem_row
from tritonsmith.suite.results import ProblemRecord

_BASELINE_NAMES = {"eager": "eager PyTorch", "compile": "torch.compile"}


def report_markdown(report: SuiteReport, plots: Sequence[str]) -> str:
    m = report.manifest
    lines = [f"# tritonsmith suite report: `{report.run_dir}`", ""]
    if m:
        what = (f"optimize with generator `{m.generator or 'default'}`, {m.iterations} iterations" if m.mode == "optimize"
                else "eval-only (given kernels scored once)")
        lines.append(f"- run: {what}; device `{m.device}`; started {m.created}")
    devices = sorted({r.result.device_name for r in report.records if r.result})
    if devices:
        lines.append(f"- hardware: {', '.join(devices)}")
    total = len(m.problems) if m else len(report.records)
    lines.append(f"- problems finished: {total - len(report.unfinished)} of {total}")
    lines += ["", "## Summary", ""]
    timed = report.summary.timed > 0
    for base in BASELINES:
        lines += [f"### vs {_BASELINE_NAMES[base]}", "", *_metrics_table(report, base, timed), ""]
    lines += _notes(report, timed)
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    else:
        lines += ["## Plots", "", "No plots: they show speedups, and nothing in this run was timed on a GPU.", ""]
    lines += ["## Problems", "", *_problem_table(report), ""]
    return "\n".join(lines)


def _metrics_table(report: SuiteReport, base: str, timed: bool) -> list[str]:
    heads = ["scope", "problems", "correct"] + [f"fast_{p:g}" for p in FAST_P] + ["geomean speedup (n)"]
    rows = [_metrics_row("all", report.summary, base)]
    if len(report.levels) > 1:  # a single level (or none) would repeat the row above
        rows += [_metrics_row(name, lm, base) for name, lm in report.levels.items()]
    return [_row(heads), _row(["---"] * len(heads)), *rows]


def _metrics_row(name: str, m: Metrics, base: str) -> str:
    fast = [_pct(m.fast_p[base][f"{p:g}"]) for p in FAST_P]
    gm = m.geomean[base]
    gm_text = f"{gm:.2f}x ({m.timed})" if gm is not None else "n/a (no timing)"
    return _row([name, str(m.problems), f"{m.correct} ({_pct(m.correctness_rate)})", *fast, gm_text])


def _notes(report: SuiteReport, timed: bool) -> list[str]:
    notes = []
    if not timed:
        notes.append("No speedups: nothing was timed on a GPU (the CPU interpreter checks correctness only), "
                     "so fast_p for p > 0 and the geometric means are n/a.")
    if report.summary.no_compile_baseline:
        notes.append(f"{report.summary.no_compile_baseline} correct problems had no torch.compile baseline; "
                     "they never count as fast against it.")
    if report.summary.runner_errors:
        notes.append(f"{report.summary.runner_errors} problems failed inside the runner (status `error`, counted "
                     "as failures here); rerunning the bench command retries them.")
    if report.summary.stopped:
        notes.append(f"{report.summary.stopped} problems were stopped (status `stopped`: the run's hard stop or "
                     "Ctrl-C came before their first verdict; counted as not verified here); rerunning the bench "
                     "command retries them.")
    if report.unfinished:
        notes.append(f"{len(report.unfinished)} problems not finished (time budget or interrupted): "
                     + ", ".join(f"`{k}`" for k in report.unfinished[:20]) + (" ..." if len(report.unfinished) > 20 else ""))
    if report.invalid:
        notes.append(f"{len(report.invalid)} reference problems are malformed and left out of every metric: "
                     + ", ".join(f"`{k}`" for k in report.invalid))
    slower = [r for r in report.records if r.ok and r.slower]
    if slower:
        notes.append(f"{len(slower)} verified kernels are slower than torch.compile beyond noise (no faster "
                     "variant was verified): " + "; ".join(f"`{r.key}`: {r.slower}" for r in slower[:20])
                     + (" ..." if len(slower) > 20 else ""))
    scaled = sum(1 for r in report.records if r.scaling_note or (r.result and r.result.scaling_note))
    if scaled:
        notes.append(f"{scaled} problems ran with shapes scaled down (see report.json).")
    versions = Counter(r.version for r in report.records)
    if len(versions) > 1:
        notes.append("the problems were run by different tritonsmith versions (the run was resumed after the code "
                     "changed): " + ", ".join(f"`{v}` ({n})" for v, n in versions.items())
                     + "; compare like with like, or rerun into a new directory.")
    d = report.to_dict()["totals"]
    if d["input_tokens"] or d["output_tokens"]:
        cost = f", ${d['cost_usd']:.4f}" if d["cost_usd"] is not None else ""
        notes.append(f"tokens: {d['input_tokens']} in, {d['output_tokens']} out{cost}.")
    if d["overhead_median_s"] is not None:
        notes.append(f"runner overhead per problem (outside optimize/evaluate): median {d['overhead_median_s']:.3f} s, "
                     f"max {d['overhead_max_s']:.3f} s.")
    return (["## Notes", ""] + [f"- {n}" for n in notes] + [""]) if notes else []


def _problem_table(report: SuiteReport) -> list[str]:
    heads = ["problem", "level", "status", "vs eager", "vs compile", "candidate ms", "iters", "tokens", "cost",
             "wall s"]
    out = [_row(heads), _row(["---"] * len(heads))]
    for r in report.records:
        row = problem_row(r)
        tokens = row["input_tokens"] + row["output_tokens"]
        untimed = _untimed(r)
        out.append(_row([f"`{r.key}`", str(r.level if r.level is not None else ""), _status(r.status, r.message),
                         _x(row["speedup_vs_eager"]) or untimed, _x(row["speedup_vs_compile"]) or untimed,
                         f"{row['candidate_ms']:.4f}" if row["candidate_ms"] is not None else untimed,
                         str(r.iterations), str(tokens) if tokens else "",
                         f"${r.cost_usd:.4f}" if r.cost_usd is not None else "", f"{r.wall_s:.1f}"]))
    return out


def comparison_markdown(data: dict[str, Any]) -> str:
    lines = [f"# Comparison: A = `{data['run_a']}`, B = `{data['run_b']}`", "",
             f"- problems in both: {data['problems_in_both']}; same verdict: {data['same_verdict']}",
             f"- timed in both: {data['timed_in_both']}; speedups agree within measured noise: {data['speedups_agree']}",
             "", "| metric | A | B |", "| --- | --- | --- |"]
    sa, sb = data["summary_a"], data["summary_b"]
    lines.append(f"| correctness | {_pct(sa['correctness_rate'])} | {_pct(sb['correctness_rate'])} |")
    for base in BASELINES:
        for p in FAST_P:
            k = f"{p:g}"
            lines.append(f"| fast_{k} vs {base} | {_pct(sa['fast_p'][base][k])} | {_pct(sb['fast_p'][base][k])} |")
        lines.append(f"| geomean vs {base} | {_x(sa['geomean'][base])} | {_x(sb['geomean'][base])} |")
    lines += ["", "| problem | A | B | A vs eager | B vs eager | B/A | noise | agree |", "| --- " * 8 + "|"]
    for r in data["rows"]:
        agree = "" if r["speedups_agree"] is None else ("yes" if r["speedups_agree"] else "**no**")
        lines.append(_row([f"`{r['key']}`", r["status_a"] or "-", r["status_b"] or "-", _x(r["speedup_a"]),
                           _x(r["speedup_b"]), f"{r['ratio_b_over_a']:.2f}" if r["ratio_b_over_a"] else "",
                           f"{r['noise']:.1%}" if r["noise"] is not None else "", agree]))
    return "\n".join(lines) + "\n"


def _untimed(r: ProblemRecord) -> str:
    """What a speed cell says without a number: why there is none."""
    if not r.ok:
        return "-"
    return "unmeasured (CPU)" if r.device == "cpu" else "unmeasured"


def _status(status: str, message: str) -> str:
    if status == "correct":
        return "correct"
    short = message.replace("|", "\\|").replace("\n", " ")
    return f"{status}: {short[:60]}" + ("..." if len(short) > 60 else "")


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1%}"


def _x(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}x"
