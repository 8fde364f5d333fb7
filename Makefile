# `make test` is exactly what CI runs (.ci/run). `make run` is the main job, on a GPU host.
PY ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

$(BIN)/python:
	$(PY) -m venv $(VENV)

.PHONY: test run lint
test: $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints-cpu.txt -e '.[test]' && sh .ci/chromium && $(BIN)/python -m pytest

run: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[gpu]' && $(BIN)/hgemm optimize 1024 1024 1024

lint: $(BIN)/python
	$(BIN)/ruff check .
