"""`loadgen run`'s argv read as upstream's FlexibleArgumentParser reads it, and its --help in
upstream's sections.

Every flag also works with underscores (``--max_concurrency 8``), and a flag of upstream's
``nargs`` ("*" or "+") takes several space-separated values after one flag. A `vllm bench
serve` flag that loadgen does not implement yet exits 2 with ``not supported yet: --flag``;
none is ignored.
"""

from __future__ import annotations

import click

from loadgen.config import COMMON_FLAGS, HELP_GROUPS, RUN_FLAGS, VLLM_BENCH_SERVE_FLAGS

MULTI_VALUE_FLAGS = tuple(flag.name for flag in RUN_FLAGS if flag.nargs is not None)
ONE_OR_MORE_FLAGS = tuple(flag.name for flag in RUN_FLAGS if flag.nargs == "+")
COMMON_TITLE = "Most runs use (every other flag follows)"
NOT_BUILT_TITLE = "vllm bench serve flags not supported yet (they exit 2)"


def normalize_argv(args: list[str], known: set[str]) -> list[str]:
    """Rewrite argv the way upstream's FlexibleArgumentParser reads it.

    ``--a_b`` becomes ``--a-b``; ``--header k=v k2=v2`` becomes one ``--header`` per value;
    a `vllm bench serve` flag that is not in ``known`` is refused as not supported yet.
    """
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            out.extend(args[i - 1 :])
            break
        if not arg.startswith("--"):
            out.append(arg)
            continue
        name, eq, value = arg.partition("=")
        name = "--" + name[2:].replace("_", "-")
        if name not in known and name in VLLM_BENCH_SERVE_FLAGS:
            raise click.UsageError(f"not supported yet: {name}")
        if name in MULTI_VALUE_FLAGS and not eq:
            first = i
            while i < len(args) and not args[i].startswith("-"):
                out += [name, args[i]]
                i += 1
            if i == first and name in ONE_OR_MORE_FLAGS:
                raise click.UsageError(f"{name} expects at least one value")
            continue
        out.append(name + eq + value)
    return out


class VllmCompatibleCommand(click.Command):
    """A click command that parses argv as `vllm bench serve` does (see normalize_argv)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, normalize_argv(args, self.flag_names()))

    def flag_names(self) -> set[str]:
        """Every spelling the options accept (``--self-timed`` and ``--no-self-timed``)."""
        names: set[str] = set()
        for param in self.params:
            names.update(getattr(param, "opts", []), getattr(param, "secondary_opts", []))
        return names

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The flags most runs use, then the others in upstream's sections (the table's help
        groups), then the flags not built yet."""
        records = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.opts[0] if param.opts else param.name] = record
        with formatter.section(COMMON_TITLE):
            formatter.write_dl([records[flag] for flag in COMMON_FLAGS])
        shown = {*COMMON_FLAGS, *(flag for flags in HELP_GROUPS.values() for flag in flags)}
        with formatter.section("Options"):
            formatter.write_dl([r for flag, r in records.items() if flag not in shown])
        for title, flags in HELP_GROUPS.items():
            with formatter.section(title):
                formatter.write_dl([records[flag] for flag in flags if flag not in COMMON_FLAGS])
        missing = sorted(VLLM_BENCH_SERVE_FLAGS - self.flag_names())
        if not missing:  # every upstream flag is built: no section to show
            return
        with formatter.section(NOT_BUILT_TITLE):
            line = ""
            for flag in missing:  # never split one
                if line and len(line) + 1 + len(flag) > formatter.width - formatter.current_indent:
                    formatter.write_text(line)
                    line = flag
                else:
                    line = f"{line} {flag}".strip()
            formatter.write_text(line)
