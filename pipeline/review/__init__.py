"""`envforge review`: what a generate run made and why, and what a person does about it.

    catalog.py   the run's environments: database rows joined with their folders; filter, sort
    history.py   the coding agent's attempts, read back from trajectory.jsonl
    edits.py     which files a person changed after the model wrote them
    details.py   everything about one environment, for `show` and the report
    show.py      the text views (table, explanation)
    actions.py   accept / reject by hand, retry from a stage
    report.py    the static HTML site (templates/report/), with highlight.py, plots.py, previews.py
"""
