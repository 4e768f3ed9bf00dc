# offloadkit: `make lab` runs the kit, `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
APT_TOOLS := tcpdump tshark iperf3 chromium ethtool iproute2 iptables
export NUMBA_NUM_THREADS ?= 1

.PHONY: lab test test-fast test-browser reproduce bench fuzz system-tools clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,browser,docs]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# Debian tools the tests use (real tcpdump/tshark oracles, the kernel lab, the browser).
# Installed only when running as root and something is missing; otherwise those tests skip.
system-tools:
	@missing=""; for t in tcpdump tshark iperf3 chromium ethtool ip iptables; do \
	  command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian packages for:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_TOOLS) >/dev/null; \
	fi

lab: $(STAMP)
	$(BIN)/python -m offloadkit.warmup
	$(BIN)/jupyter lab --notebook-dir=notebooks

test: $(STAMP) system-tools
	$(BIN)/python -m offloadkit.warmup
	$(BIN)/python -m pytest tests notebooks --nbval-lax -p no:cacheprovider

# Mutated captures through the reader, gro, segment, doctor; random export command lines:
# 10,000 cases per verb, counts of exits and tracebacks; failing inputs kept in fuzz-failures/.
fuzz: $(STAMP)
	$(BIN)/python tests/fuzz/harness.py --cases 10000 --keep fuzz-failures

test-browser: $(STAMP) system-tools
	$(BIN)/python -m pytest tests/browser -p no:cacheprovider

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not kernel and not browser" -x -q

reproduce: $(STAMP)
	$(BIN)/offloadkit reproduce

# The static site (offline HTML: notebooks with their stored outputs, API, CLI, instructor guide) in build/docs/html.
docs: $(STAMP)
	$(BIN)/python docs/build.py build/docs

bench: $(STAMP)
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build *.egg-info
	find . -name __pycache__ -prune -exec rm -rf {} +
