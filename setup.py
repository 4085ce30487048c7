"""Build: the pure core and the codecs are compiled to C extensions with mypyc.

They are plain, strictly typed Python, so mypyc (part of mypy) compiles them as
they are; the compiled modules behave the same and run the per-message work of
decoding and planning two to three times faster (bench/RESULTS.md). Two small
hand-written extensions come with them: ``trimgate/trimming/_utf8.c``, the UTF-8 length
of a text counted without encoding it, and ``trimgate/providers/_chatscan.c``, which
sizes an OpenAI Chat body's messages from its bytes. Nothing else is compiled: the
aiohttp shell stays interpreted.

``TRIMGATE_PURE=1`` (or a machine without a C compiler) installs the same
modules as plain Python; ``trimgate.compiled()`` tells which one is running.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "trimgate/history.py",
    "trimgate/trimming/budget.py",
    "trimgate/trimming/cap.py",
    "trimgate/trimming/estimate.py",
    "trimgate/trimming/orphans.py",
    "trimgate/trimming/pipeline.py",
    "trimgate/trimming/policy.py",
    "trimgate/trimming/turns.py",
    "trimgate/providers/anthropic.py",
    "trimgate/providers/anthropic_items.py",
    "trimgate/providers/base.py",
    "trimgate/providers/common.py",
    "trimgate/providers/gemini.py",
    "trimgate/providers/gemini_items.py",
    "trimgate/providers/openai_chat.py",
    "trimgate/providers/openai_chat_items.py",
    "trimgate/providers/openai_responses.py",
    "trimgate/providers/openai_responses_items.py",
    "trimgate/providers/overflow.py",
    "trimgate/providers/overflow_read.py",
    "trimgate/providers/overflow_wordings.py",
]

HAND_WRITTEN = ["trimgate.trimming._utf8", "trimgate.providers._chatscan"]  # C sources


class OptionalBuildExt(build_ext):
    """A failed compile installs the pure-Python modules instead of failing the install.

    All or nothing: the compiled modules share one runtime library, so on any
    failure every built extension is removed again.
    """

    def run(self) -> None:
        inplace = self.inplace  # setuptools' run() clears it and restores it only on success
        try:
            super().run()
        except Exception as exc:  # no compiler, no headers: the pure modules still work
            self.inplace = False
            paths = [self.get_ext_fullpath(ext.name) for ext in self.extensions]
            if inplace:  # an editable install builds next to the sources
                self.inplace = True
                paths += [self.get_ext_fullpath(ext.name) for ext in self.extensions]
            for path in paths:
                if os.path.exists(path):
                    os.remove(path)
            remove_inplace_builds()  # and any left from an earlier build
            print(
                f"trimgate: compiling the core failed ({type(exc).__name__}: {exc}); "
                "installing it as pure Python",
                file=sys.stderr,
            )


def remove_inplace_builds() -> None:
    """Compiled modules next to the sources (an earlier editable install): a pure build
    must not leave them to shadow the new sources, or to miss their shared runtime."""
    root = Path(__file__).parent
    stale = [p for source in COMPILED for p in root.glob(source.removesuffix(".py") + ".*.so")]
    stale += root.glob("*__mypyc*.so")
    for name in HAND_WRITTEN:
        stale += root.glob(name.replace(".", "/") + ".*.so")
    for path in stale:
        path.unlink()


def ext_modules() -> list[Any]:
    if os.environ.get("TRIMGATE_PURE", "") not in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return []
    try:
        # the project's mypy config loads the pydantic plugin, which the build does not need
        compiled = mypycify(["--config-file=", *COMPILED], opt_level="3", debug_level="0")
    except (Exception, SystemExit) as exc:  # mypyc refused (e.g. a newer mypy): pure Python
        print(
            f"trimgate: mypyc failed ({type(exc).__name__}); installing pure Python",
            file=sys.stderr,
        )
        return []
    # -O3: the counting loops are vectorised
    flags = [] if sys.platform == "win32" else ["-O3"]
    return [
        *compiled,
        *(
            Extension(name, [name.replace(".", "/") + ".c"], extra_compile_args=flags)
            for name in HAND_WRITTEN
        ),
    ]


EXTENSIONS = ext_modules()
if not EXTENSIONS:
    remove_inplace_builds()
setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": OptionalBuildExt})
