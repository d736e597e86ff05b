# rlrun: `make run` trains the default experiment, `make test` runs the whole suite.
# Both build .venv/ first when it is missing (Python 3.11; torch 2.13.0 CPU from this machine's disk).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := dev,launchers,optuna,report,video,torchsnapshot,mlflow,mujoco,export,atari,envpool,ray,offline,multiagent,docs

.PHONY: install run test lint format bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/rlrun +experiment=ppo

test: install
	$(BIN)/pytest -n 2 --dist loadgroup --durations=15

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install
	$(BIN)/python bench/run_all.py

docs: install  # site/: the pages of docs/, the reference generated from the code; a broken link fails
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build site *.egg-info
