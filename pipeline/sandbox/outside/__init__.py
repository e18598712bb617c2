"""The sandbox seen from envforge's own process (trusted, holds the keys): every module here runs
outside the worker and treats what comes back from it as hostile input.

  client        the typed EnvClient/AgentClient: one method per operation, every reply checked
  process       WorkerProcess: start a confined worker process, kill it, classify its death;
                Worker: the protocol over it (start-up handshake, load, calls, the worker's requests)
  channel       the pipes to one worker: bounded request and reply lines, its output counted
  pool          WorkerPool: reuse loaded workers per folder
  executor      where workers run: this machine or a Ray cluster (the --executor flag)
  remote        RayWorker: a Worker on a Ray node, the folder shipped as a tar
  folder        the sandbox's link-free, bounded copy of an environment folder
  quota         a worker's disk quota, watched from here (a thread, and a look after each call)
  replies       bounded, validated reading of a worker's reply
  failures      SandboxFailure and its kinds; WorkerStartFailed (an infrastructure fault)
  capabilities  the confinement ladder: which rung workers get here, and why
  userns        root's userns rung: a user namespace whose uid 1 is the worker's own uid
"""
