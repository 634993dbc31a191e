"""``python -m bench``: the one entry point of the benchmarks and the studies."""

from __future__ import annotations

import sys

from bench.commands import BENCHMARKS, COMMANDS, PROGRAM, STUDIES, listing

USAGE = f"""usage: {PROGRAM} NAME [ARGS]...    run one benchmark or study with its own arguments
       {PROGRAM} NAME --help         its arguments
       {PROGRAM} list                every NAME, one line each

`make bench` runs the suite and rewrites its generated block of docs/benchmarks.md:
  {PROGRAM} suite --out bench/results/latest.json --markdown bench/results/latest.md --page docs/benchmarks.md
Benches that start a stack or load the chat engine want the cores to themselves: run them under
`flock /tmp/shunter-integration.lock` on a shared host. Results go to bench/results/ (ignored by git)."""


def help_text() -> str:
    return "\n".join([USAGE, "", "benchmarks:", _indented(listing(BENCHMARKS)), "",
                      "studies (bench/studies/: one-off measurements that chose a setting or fit the simulator):",
                      _indented(listing(STUDIES))])


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def main(argv: list[str]) -> int:
    """Run ``argv`` as ``USAGE`` says; return the exit status when no command ran (a command exits)."""
    if not argv or argv[0] in ("-h", "--help"):
        print(help_text(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, args = argv[0], argv[1:]
    if name == "list":
        print(listing())
        return 0
    command = COMMANDS.get(name)
    if command is None:
        print(f"{PROGRAM}: no command {name!r}; `{PROGRAM} list` lists them", file=sys.stderr)
        return 2
    command.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
