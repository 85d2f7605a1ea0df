#!/usr/bin/env python3
"""Write an example /etc/eventmq.conf with every setting, commented out,
from the binaries' own ``--help`` (so it cannot drift from what they read).

    scripts/gen-config.py BIN_DIR > eventmq.conf

Each binary's help names its config section and lists its keys ("Keys:
A, B, ..."), and options carry "[env: EVENTMQ_KEY]"; both count. For
each key the option that sets it is found in the same help — the one
marked ``[env: EVENTMQ_KEY]`` or ``(KEY)``, or whose long name is the key
(``HEARTBEAT_INTERVAL`` → ``--heartbeat-interval``) — and its text and
default go into the comment above the key. Exit status 1 when a binary's
help lists no keys (the help changed shape: fix this script).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# (section, binary, what it is), in the order of the file.
SECTIONS = [
    ("router", "emq-router", "emq-router"),
    ("jobmanager", "emq-jobmanager", "emq-jobmanager"),
    ("publisher", "emq-pubsub", "emq-pubsub (pub/sub)"),
]


def help_text(binary: Path) -> str:
    out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


def listed_keys(text: str) -> List[str]:
    """The keys of the help's "Keys: A, B, ... ." paragraph, in order;
    parenthetical remarks are skipped except "(and KEY)"."""
    m = re.search(r"Keys:(.*?)(?:\.\s*\n\s*\n|\.\s*$|\n\s*\n)", text, re.S)
    if not m:
        return []
    body = re.sub(r"\((?!and\s)[^)]*\)", "", m.group(1))
    keys: List[str] = []
    for k in re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\b[A-Z]{3,}\b", body):
        if k not in keys:
            keys.append(k)
    return keys


def env_keys(text: str) -> List[str]:
    keys: List[str] = []
    for k in re.findall(r"\[env: EVENTMQ_([A-Z0-9_]+)\]", text):
        if k not in keys:
            keys.append(k)
    return keys


def options(text: str) -> List[Tuple[str, str]]:
    """(long flag, its whole help text on one line) for every option of
    every heading (Options:, Authentication:, ...): a line indented 2 to 6
    spaces that starts with the flag, and the lines indented deeper below it."""
    out: List[Tuple[str, str]] = []
    current: Optional[List[str]] = None
    for line in text.splitlines():
        start = re.match(r"^ {2,6}(?:-\w, )?(--[\w-]+)", line)
        if start:
            current = [start.group(1), line.strip()]
            out.append((current[0], current[1]))
        elif current is not None and re.match(r"^ {7,}\S", line):
            current[1] += " " + line.strip()
            out[-1] = (current[0], current[1])
        else:
            current = None
    return out


def describe(key: str, opts: List[Tuple[str, str]]) -> Optional[Tuple[str, str, Optional[str]]]:
    """(flag, description, default) of the option that sets ``key``."""
    dashed = "--" + key.lower().replace("_", "-")
    for flag, text in opts:
        if f"[env: EVENTMQ_{key}]" in text or f"({key})" in text or flag == dashed:
            default = re.search(r"\[default: ([^\]]*)\]", text)
            desc = re.sub(r"^(?:-\w, )?--[\w-]+(?: <[^>]*>)?(?:\.\.\.)?\s*", "", text)
            desc = re.sub(r"\s*\[(?:env|default|possible values|alias(?:es)?)[^\]]*\]", "", desc)
            desc = desc.replace(f" ({key})", "").strip()
            # "268435456 (256 MiB)": the value alone, as the file takes it.
            value = default.group(1).split(" (")[0] if default else None
            return flag, desc, value
    return None


def section(name: str, binary: Path, what: str) -> str:
    text = help_text(binary)
    # The "Keys:" list, then what options name as [env: EVENTMQ_KEY] and
    # the list leaves out (shared flags such as --log-format).
    keys = listed_keys(text)
    keys += [k for k in env_keys(text) if k not in keys]
    if not keys:
        sys.exit(f"gen-config: {binary} --help lists no keys (its help changed shape?)")
    opts = options(text)
    lines = [f"[{name}]", f"# {what}: flags win over EVENTMQ_<KEY> variables, which win over this file."]
    for key in keys:
        lines.append("")
        found = describe(key, opts)
        if found:
            flag, desc, default = found
            for line in textwrap.wrap(f"{flag}: {desc}", 76):
                lines.append(f"# {line}")
            lines.append(f"#{key} = {default if default is not None else ''}".rstrip())
        else:
            lines.append(f"# (see {binary.name} --help)")
            lines.append(f"#{key} =")
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/gen-config.py BIN_DIR > eventmq.conf")
    bin_dir = Path(sys.argv[1])
    version = subprocess.run([str(bin_dir / "emq-router"), "--version"], capture_output=True, text=True,
                             timeout=30, check=True).stdout.strip()
    parts = [
        textwrap.dedent(
            f"""\
            # /etc/eventmq.conf: the settings of emq's binaries, each commented out
            # with its default (generated from their --help by scripts/gen-config.py;
            # {version}).
            #
            # Every binary reads its own section, then [global]: a flag wins over the
            # environment variable EVENTMQ_<KEY>, which wins over this file. Another
            # file: EVENTMQ_CONFIG_FILE=PATH. emq-cli reads [cli], then [router].
            # Durations take 5, 1.5, 250ms, 2m, 1h.
            """
        )
    ]
    for name, binary, what in SECTIONS:
        parts.append(section(name, bin_dir / binary, what))
    sys.stdout.write("\n".join(parts))


if __name__ == "__main__":
    main()
