# ctxbench — two commands do all set-up: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean bench

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# torch first, pinned to the CPU build on this machine's disk; anything else pulls CUDA.
$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/ctxbench demo

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(PY) -m pytest -q -n auto

bench: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/ctxbench bench plan-latency

clean:
	rm -rf $(VENV) build *.egg-info
