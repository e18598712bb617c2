"""`envforge learn`: component-centric agent learning over environments (AutoEnv §4, Algorithm 2).

    candidates.py    Candidate (components: prompt, agent_code; parent, iteration, evaluations), Pool (pool.json)
    selection.py     best, pareto: pure functions over (reward, cost)
    methods.py       Method = (selection, signal, component); the paper's eight (ALL)
    optimization.py  signal (dynamics analysis / instruction diagnosis) -> analysis -> rewrite; code check
    evaluation.py    fresh training levels per iteration, the fixed test levels; candidates over pipeline.evaluate
    agent_code_check.py  the check new agent code passes in the sandbox before it is evaluated
    calls.py         the (theme, stage) of every model call of a run, numbered for replay and resume
    learner.py       the loop of one environment and one method (Algorithm 2); the baseline c0
    study.py         every method on every environment, the study folder, resume
    results.py       the numbers: test scores, costs, upper bounds, adaptive selection, Figure 3 data
    upper_bound.py   per-environment upper bound, UpperBound(best / pareto / all), top-k gain, bound vs M
    adaptive.py      environment-adaptive method choice by successive halving
    report.py        Table 5 (Markdown, CSV) and Figure 3 (PNG)
    export.py        the best candidate for `envforge evaluate --agent learned:PATH`
"""
from envforge.learning.candidates import Candidate, Components, Metrics, Pool
from envforge.learning.methods import ALL, Method
from envforge.learning.settings import Settings

__all__ = ["ALL", "Candidate", "Components", "Method", "Metrics", "Pool", "Settings"]
