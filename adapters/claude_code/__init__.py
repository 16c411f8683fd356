"""Claude Code: the hook-driven adapter and the agent-teams inbox adapter."""
