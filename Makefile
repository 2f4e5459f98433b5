# The two commands a user needs: `make train` and `make test`. Both create .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PRESET ?= tic_tac_toe
export JAX_PLATFORMS ?= cpu
export TURBOZERO_CACHE ?= $(HOME)/.cache/turbozero

.PHONY: train test check bench lint typecheck unit setup clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev,envs,solvers,engines]"
	touch $(STAMP)

setup: $(STAMP)

train: $(STAMP)
	$(BIN)/turbozero train $(PRESET)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy src

# (bytecode written even where PYTHONDONTWRITEBYTECODE is set: each worker and each subprocess
# would otherwise parse and rewrite every test file again, 3.4 s a process)
unit: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -m "not slow" -n 2 --dist loadfile --max-worker-restart 0

test: $(STAMP)
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory lint typecheck unit || exit $$?; \
	t=$$(( $$(date +%s) - start )); echo "make test: lint, typecheck and the suite in $$((t / 60)) min $$((t % 60)) s"

check: $(STAMP)
	command -v chromium >/dev/null || (apt-get update && apt-get install -y --no-install-recommends chromium)
	test -x /usr/games/gnugo || command -v gnugo >/dev/null || (apt-get update && apt-get install -y --no-install-recommends gnugo)
	$(BIN)/pytest -q -m slow

bench: $(STAMP)
	for f in bench/*.py; do case $$f in */common.py|*/profile.py) ;; *) $(BIN)/python $$f || exit 1;; esac; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
