"""A learning study's folder: what `envforge learn --out STUDY` writes where.

    STUDY/study.json                 the study's settings (resume checks them)
    STUDY/runs/<env>/baseline/       the baseline candidate's pool
    STUDY/runs/<env>/<method>/       one method's pool on one environment
    STUDY/report/                    the report written from the results
"""
from __future__ import annotations

STUDY_JSON, RUNS, REPORT, BASELINE = "study.json", "runs", "report", "baseline"
