# offloadkit: `make lab` runs the kit, `make test` runs the tests.
# make lab ARGS="--port 8899 --no-browser"   passes Jupyter options; as root --allow-root is added.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGS   ?=
APT_TOOLS := tcpdump tshark iperf3 chromium ethtool iproute2 iptables
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
export NUMBA_NUM_THREADS ?= 1

.PHONY: lab test test-fast test-browser lint wheel wheel-check reproduce warmup bench fuzz system-tools clean docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# `make lab` needs the kit and JupyterLab/Voila; `make test` adds the test, browser, docs and dask extras.
# An editable install does not lay down the wheel's data files (the Voila template and the
# config that makes it the default): link them into the venv where the wheel installs them.
define link-jupyter-data
	mkdir -p $(VENV)/share/jupyter/voila/templates $(VENV)/etc/jupyter
	ln -sfn $(CURDIR)/offloadkit/ui/jupyter/voila/templates/offloadkit $(VENV)/share/jupyter/voila/templates/offloadkit
	ln -sfn $(CURDIR)/offloadkit/ui/jupyter/config/voila.json $(VENV)/etc/jupyter/voila.json
endef

$(VENV)/.installed-lab: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[lab]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(link-jupyter-data)
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[lab,test,browser,docs,dask]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(link-jupyter-data)
	touch $@ $(VENV)/.installed-lab

# Debian tools the tests use (real tcpdump/tshark oracles, the kernel lab, the browser).
# Installed only when running as root and something is missing; otherwise those tests skip.
system-tools:
	@missing=""; for t in tcpdump tshark iperf3 chromium ethtool ip iptables; do \
	  command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian packages for:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_TOOLS) >/dev/null; \
	fi

warmup: $(VENV)/.installed-lab
	$(BIN)/offloadkit warmup

lab: $(VENV)/.installed-lab
	$(BIN)/offloadkit warmup
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT) $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

# The unit, property, oracle and browser tests in the checkout, then the installed wheel
# (reproduce, dashboards, the notebooks under nbval) in a fresh venv outside it. The wheel's
# build, venv and warmup run beside the checkout's warmup (each takes one core); its log is
# shown after. Nothing runs beside the suite: its kernel-lab tests are timing-sensitive.
WHEEL_WORK = $(or $(TMPDIR),/tmp)/offloadkit-wheel-$(shell printf %s '$(CURDIR)' | cksum | cut -d' ' -f1)
test: $(VENV)/.installed-test system-tools lint
	bash .ci/wheel-check --prepare $(WHEEL_WORK) $(BIN)/python >$(WHEEL_WORK).log 2>&1 & prep=$$!; \
	  $(BIN)/offloadkit warmup || { kill $$prep; exit 1; }; \
	  wait $$prep || { tail -40 $(WHEEL_WORK).log; exit 1; }; cat $(WHEEL_WORK).log
	$(BIN)/python -m pytest tests -p no:cacheprovider
	bash .ci/wheel-check --check $(WHEEL_WORK) $(BIN)/python

# Mutated captures through the reader, gro, segment, doctor; random export command lines:
# 10,000 cases per verb, counts of exits and tracebacks; failing inputs kept in fuzz-failures/.
fuzz: $(VENV)/.installed-test
	$(BIN)/python tests/fuzz/harness.py --cases 10000 --keep fuzz-failures

test-browser: $(VENV)/.installed-test system-tools
	$(BIN)/python -m pytest tests/browser -p no:cacheprovider

test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests -m "not kernel and not browser" -x -q

wheel: $(VENV)/.installed-test
	$(BIN)/python -m build --outdir dist .

wheel-check: $(VENV)/.installed-test
	bash .ci/wheel-check $(BIN)/python

reproduce: $(VENV)/.installed-lab
	$(BIN)/offloadkit reproduce

# The static site (offline HTML: notebooks with their stored outputs, API, CLI, instructor guide) in build/docs/html.
docs: $(VENV)/.installed-test
	$(BIN)/python docs/build.py build/docs

bench: $(VENV)/.installed-test
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build dist *.egg-info
	find . -name __pycache__ -prune -exec rm -rf {} +
