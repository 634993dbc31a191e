# Shunter: the two commands a user needs are `make run` and `make test`.
.PHONY: setup run observe test unit integration lint bench clean

setup:
	bash scripts/setup.sh

run: setup
	.venv/bin/shunter up

observe: setup  # the stack plus a Prometheus on 127.0.0.1:9095 that scrapes it (docs/observability.md)
	.venv/bin/shunter up --observe

test: setup
	bash scripts/test.sh

unit: setup
	.venv/bin/python -m pytest -q -m "not integration"

integration: setup
	.venv/bin/python -m pytest -q -m integration

lint: setup
	.venv/bin/ruff check .
	.venv/bin/mypy scheduling settings control gateway python_backends simulator cli bench
	.venv/bin/lint-imports

bench: setup
	.venv/bin/python -m bench suite --out bench/results/latest.json --markdown bench/results/latest.md \
		--page docs/benchmarks.md

clean:
	rm -rf var model_repository/*/
