# The course's commands. `make run` and `make test` set everything up on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
DAY ?=
VERSION ?=
COURSE := $(PY) -m course

.PHONY: setup run test test-peer check bench inspect progress list notebooks exercises lint clean

setup: $(STAMP)
	@$(PY) -c "$$REPAIR_PTH"

# A venv copied or moved with its clone (cp -r) still puts the old checkout on the path: point it here.
define REPAIR_PTH
import os, sysconfig
pth = os.path.join(sysconfig.get_paths()['purelib'], 'gpu_course.pth')
here = os.getcwd()
old = open(pth).read().strip() if os.path.exists(pth) else None
if old != here:
    open(pth, 'w').write(here + '\n')
    print(f'.venv pointed at {old}; it now points at {here}')
endef
export REPAIR_PTH

# Create .venv, install requirements.txt once (the stamp changes when requirements.txt does), and put
# the repository on the venv's path so `import course` works from notebooks/ and anywhere else.
$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing requirements into $(VENV) (once)..."
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@$(PY) -c "import os, sysconfig; open(os.path.join(sysconfig.get_paths()['purelib'], 'gpu_course.pth'), 'w').write(os.getcwd() + '\n')"
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

run: setup            ## the destination: the serving engine on the paged KV cache (ARGS="--help")
	@$(COURSE) run $(ARGS)

test: setup           ## every day's reference solution against its grader
	@$(PY) -m pytest -q -n auto --dist loadfile

test-peer: setup      ## numba-cuda's own simulator tests, with the course's simulator additions (course/peer.py)
	@$(PY) -m pytest -p course.peer --pyargs numba.cuda.tests.cudapy numba.cuda.tests.cudasim \
	  numba.cuda.tests.doc_examples numba.cuda.tests.cudadrv numba.cuda.tests.nrt -q -n 2 --dist loadfile \
	  -p no:cacheprovider -o addopts="" -o consider_namespace_packages=true -W ignore

check: setup          ## grade your exercise: make check DAY=6 [VERSION=naive]
	@$(COURSE) check $(DAY) $(if $(VERSION),--version $(VERSION))

bench: setup          ## naive vs optimized: make bench DAY=6 [ARGS="--plot out.png --json out.json"]
	@$(COURSE) bench $(DAY) $(ARGS)

inspect: setup        ## what the compiler did: make inspect DAY=6 [ARGS="--exercise --ptx"]
	@$(COURSE) inspect $(DAY) $(ARGS)

progress: setup       ## every day and your exercise's status
	@$(COURSE) progress

list: setup
	@$(COURSE) list

notebooks: setup      ## execute every notebook headless (outputs are not saved); DAY=8 runs one
	@$(COURSE) notebooks $(DAY)

exercises: setup      ## write every days/dayNN_*/exercise.py from its solution (ARGS=--check: fail on drift)
	@$(COURSE) exercises $(ARGS)

lint: setup
	@$(PY) -m ruff check course solutions days tests tools .ci

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache out
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
