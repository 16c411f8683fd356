"""Other machines: runs placed on hosts reached over OpenSSH, each running the same
`actors` with its own state root (docs/hosts.md).

Nothing here listens on a port. Every exchange with a host goes over the user's own ssh
(config, keys, agent) through one ControlMaster per host (runtime.hosts.ssh); a remote
run's verbs are the remote `actors`'s own verbs (runtime.hosts.remote), and its
follow-ups come back over one long-lived channel (runtime.hosts.link).
"""
