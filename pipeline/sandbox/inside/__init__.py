"""The sandbox worker's side: every module here runs inside the confined worker process, in the
same process as model-written code, and holds no key. Nothing here imports outside/; outside/
imports from here only kernel probes (syscalls.seccomp_available and DENIED, landlock.landlock_abi).

  worker      the entry point (`python -m pipeline.sandbox.inside.worker`): confine, then answer requests
  confine     the confinement each rung applies before any environment code loads
  enter_userns  root's userns worker's first step: a user namespace envforge maps (a script, run before confinement)
  syscalls    the seccomp filter (and whether libseccomp is here)
  landlock    Landlock file and network rules for the landlock rung
  host        EnvHost: loads an environment and answers reset/step/snapshot/search/... requests
  agent_host  AgentHost: runs a learned agent, asking the parent for model calls
  search      the one search over snapshots (verify's max rewards, the planner agent)
  snapshots   the snapshots a worker holds of its environment, sharing what has not changed
  adapters    the accepted shapes of an environment's validator and generator
  faults      a failure inside the env's code as a reply naming file:line
  rngs        reseeding the global random generators on each reset
"""
