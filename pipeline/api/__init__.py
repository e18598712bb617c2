"""The library under the command line: one call per capability, each taking one typed options
class whose defaults are the only defaults (pipeline/api/options.py).

    evaluate.py  prepare/execute/evaluate(env_dirs, EvaluateOptions) -> Evaluation; find_targets
    generate.py  GenerateJob(GenerateOptions).run(client) / generate(options) -> (out, summary)
    verify.py    VerifyJob(env_dir, VerifyOptions).run() -> VerificationResult; model_checks
    learn.py     LearnJob(env_dirs, LearnOptions).run(client, say) -> the study's outcome
    probe.py     probe(env_dir, ProbeOptions) -> Probes; evaluate_probes(items, EvaluateOptions)
    reskin.py    ReskinJob(env_dir, ReskinOptions).run() / .run_with_model(client) -> Reskinned
    check.py     check(env_dir, CheckOptions) -> CheckReport
    play.py      play(env_dir, PlayOptions) in the terminal
    environment.py  Environment(path) / open(path): a folder as data, .session() to step it in a worker
    serve.py     serve(env_dirs, ServeOptions): the OpenEnv server (envforge-rl[openenv])
    export.py    export_verifiers(env_dirs, out): installable verifiers modules
    options.py   the Options base (from_args, from_keywords), LLMOptions, ExecutorOptions
    values.py    the checks of option values (whole numbers, seconds, folders, choices)

Two doors stand on it side by side and never import each other: the command layer
(pipeline/commands/: flags -> Options.from_args -> call -> print) and the Python API (envforge/:
keywords -> Options.from_keywords -> the same call). It lives under `pipeline`, not in `envforge`,
so that the commands do not import the public package and `envforge` stays the thin, documented
surface over it. Nothing here parses a command line; results are returned, not printed (play is
the terminal session itself; progress lines go to stderr or to the callback a call is given).
"""
