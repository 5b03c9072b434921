# The two set-up commands of the README. Each creates .venv on first use and installs the
# package with every extra, pinned by constraints.txt (torch==2.13.0 is the local CPU wheel).
VENV ?= .venv
PY := $(VENV)/bin/python

# pytest-xdist workers, one per core (at most 8). Each test module and each page of the docs runs
# whole on one worker, pages sharing a fixed port together (--dist loadfile; see conftest.py).
PARALLEL ?= -n auto --maxprocesses 8 --dist loadfile

# The other supported Python versions (pyenv interpreters): one lean venv each with the `test`
# extra only (no torch, no notebooks), running every test that needs neither.
OTHER_PYTHONS ?= 3.10.13 3.12.1 3.13.0
PYENV_VERSIONS ?= $(HOME)/.pyenv/versions

.PHONY: demo test test-fast test-pythons bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

demo: $(VENV)/.installed  ## the main job on its built-in default
	$(VENV)/bin/rlmesh-gym eval

test: $(VENV)/.installed  ## the whole test suite: notebooks, docstring examples, ruff and mypy included
	$(PY) -m pytest -q $(PARALLEL)

test-fast: $(VENV)/.installed  ## a contributor's inner loop: the suite without the tests marked slow
	$(PY) -m pytest -q $(PARALLEL) -m "not slow"

test-pythons:  ## the suite without torch and notebooks on each of OTHER_PYTHONS
	for version in $(OTHER_PYTHONS); do \
		venv=.venv-$$version; \
		if [ ! -f $$venv/.installed ] || [ pyproject.toml -nt $$venv/.installed ] || [ constraints.txt -nt $$venv/.installed ]; then \
			$(PYENV_VERSIONS)/$$version/bin/python -m venv $$venv && \
			$$venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test]' && \
			touch $$venv/.installed || exit 1; \
		fi; \
		echo "== Python $$version"; \
		$$venv/bin/python -m pytest -q -p no:cacheprovider $(PARALLEL) tests || exit 1; \
	done

bench: $(VENV)/.installed  ## every benchmark script
	for script in benchmarks/[!_]*.py; do $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) .venv-* .pytest_cache .hypothesis .mypy_cache .ruff_cache
