# The two set-up commands of the README. Each creates .venv on first use and installs the
# package with every extra, pinned by constraints.txt (torch==2.13.0 is the local CPU wheel).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test bench clean

$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

demo: $(VENV)/.installed  ## the main job on its built-in default
	$(VENV)/bin/rlmesh-gym eval

test: $(VENV)/.installed  ## the whole test suite: notebooks, docstring examples, ruff and mypy included
	$(PY) -m pytest -q

bench: $(VENV)/.installed  ## every benchmark script
	for script in benchmarks/*.py; do $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache
